"""The service's log lines (`serve --log-format text|json`): the standard `logging` module, one handler
on stderr, every line of a job carrying its workspace and name, and no secret in any line.

A job runs as its own asyncio task; `job_context` sets the job in a context variable inside that task,
so lines logged by the job (and by threads it starts with ``asyncio.to_thread``, which copy the
context) carry it, and jobs running at once never see each other's.

Whatever a line holds (a message, an exception's text, a traceback) goes through `redact`: API tokens
(``hb_...``), ``Bearer ...`` credentials, anything shaped like a provider key, and the values of the
process's credential variables (``*_API_KEY``, ``*TOKEN*``, ...) are replaced by ``***``.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import re
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import StrEnum

from healthbench.models.errors import redact as redact_keys


class LogFormat(StrEnum):
    TEXT = "text"
    JSON = "json"


_JOB: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("healthbench_job", default=None)
_TOKEN_LIKE = re.compile(r"\b(hb_)[A-Za-z0-9_\-]{6,}")
_BEARER = re.compile(r"(?i)\b(bearer\s+)\S+")
_CREDENTIAL_NAME = re.compile(r"(?i)key|token|secret|password|credential")
_MIN_SECRET = 8  # shorter variable values are not hunted for (they would blank ordinary words)


@contextmanager
def job_context(workspace: str, name: str) -> Iterator[None]:
    """Lines logged inside carry ``workspace`` and ``job`` (the current task's context only)."""
    token = _JOB.set((workspace, name))
    try:
        yield
    finally:
        _JOB.reset(token)


def secrets_of(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The values of ``environ``'s credential variables (names containing key, token, secret,
    password or credential), longest first."""
    found = {v for k, v in environ.items() if _CREDENTIAL_NAME.search(k) and len(v.strip()) >= _MIN_SECRET}
    return tuple(sorted(found, key=len, reverse=True))


class Redactor:
    """Removes secrets from a line (see the module's note)."""

    def __init__(self, secrets: tuple[str, ...] = ()) -> None:
        self._secrets = secrets

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        text = _BEARER.sub(r"\1***", text)
        return redact_keys(_TOKEN_LIKE.sub(r"\1***", text))


class _Formatter(logging.Formatter):
    def __init__(self, redact: Redactor) -> None:
        super().__init__()
        self.redact = redact

    def fields(self, record: logging.LogRecord) -> dict[str, str]:
        fields = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": self.redact(record.getMessage()),
        }
        job = _JOB.get()
        if job is not None:
            fields["workspace"], fields["job"] = job
        if record.exc_info:
            fields["exception"] = self.redact(self.formatException(record.exc_info))
        return fields


class JsonFormatter(_Formatter):
    """One JSON object per line: time, level, logger, message, and workspace and job in a job."""

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(self.fields(record), ensure_ascii=False)


class TextFormatter(_Formatter):
    """``TIME LEVEL [workspace/job] message`` (the job part only in a job)."""

    def format(self, record: logging.LogRecord) -> str:
        f = self.fields(record)
        where = f" [{f['workspace']}/{f['job']}]" if "job" in f else ""
        line = f"{f['time']} {f['level'].upper()}{where} {f['message']}"
        return f"{line}\n{f['exception']}" if "exception" in f else line


def configure_logging(log_format: str = "text", environ: Mapping[str, str] | None = None) -> None:
    """Send every log line of this process to stderr in ``log_format``: the service's own
    (``healthbench.*``) from INFO, other libraries' from WARNING. Called once per process (the HTTP
    process and the worker process)."""
    log_format = LogFormat(log_format)
    redact = Redactor(secrets_of(os.environ if environ is None else environ))
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter(redact) if log_format == "json" else TextFormatter(redact))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    logging.getLogger("healthbench").setLevel(logging.INFO)
    # the database driver's own warnings ("error ignored terminating ..." when the server goes away)
    # repeat the store's one line: not printed (as in the CLI)
    logging.getLogger("psycopg").propagate = False
    logging.getLogger("psycopg").addHandler(logging.NullHandler())  # else Python's last resort prints them
