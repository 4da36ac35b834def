"""The one family of errors the edges (CLI, HTTP) translate into a one-line message."""

from __future__ import annotations


def a_kind(kind: str) -> str:
    """``kind`` with its article, for messages: "an eval", "a meta_eval"."""
    return f"an {kind}" if kind[:1] in "aeiou" else f"a {kind}"


class HealthBenchError(Exception):
    """Base of every error we expect a user to see. ``str(err)`` is a complete one-line message."""

    exit_code = 1


class DataError(HealthBenchError):
    """Bad input data: names the file, the line (1-based) and the field when known."""

    def __init__(
        self, message: str, *, path: str | None = None, line: int | None = None, field: str | None = None
    ) -> None:
        self.path, self.line, self.field, self.reason = path, line, field, message
        where = ""
        if path is not None:
            where = f"{path}:{line}" if line is not None else f"{path}"
        if field:
            where = f"{where} field '{field}'" if where else f"field '{field}'"
        super().__init__(f"{where}: {message}" if where else message)

    def __reduce__(self) -> tuple[object, ...]:  # (sent back whole from a worker process)
        return _data_error, (self.reason, self.path, self.line, self.field)


def _data_error(message: str, path: str | None, line: int | None, field: str | None) -> DataError:
    return DataError(message, path=path, line=line, field=field)


class DownloadError(HealthBenchError):
    """A dataset could not be fetched and is not cached."""


class ConfigError(HealthBenchError):
    """Bad settings: unknown model spec, missing key, bad template, conflicting options."""


class ModelError(HealthBenchError):
    """A model call failed for good (after the retry policy gave up, or a fatal error). ``endpoint``
    (the model as `ModelSpec.describe` names it) and ``status`` (the last HTTP status, if any) let a
    caller report it without the server's own text (the job service does)."""

    def __init__(self, message: str, endpoint: str | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.endpoint, self.status = endpoint, status


class RunError(HealthBenchError):
    """A run cannot proceed or finish as asked (unknown run, strict mode with ungraded criteria)."""


class RunBusyError(RunError):
    """Another live process executes the run (it holds the run's lease)."""


class RunExistsError(RunError):
    """A run of that name was created first (possibly a moment ago, by another process)."""


class FatalModelError(ModelError):
    """A model call that no retry can fix (wrong key, unknown model, bad request): the run stops."""


class StoreError(HealthBenchError):
    """The run store cannot be opened or used: bad URL, unreadable or foreign file, unreachable server."""


class StoreGoneError(StoreError):
    """The SQLite file a run was writing was deleted or replaced under it: nothing can continue it."""


class StoreMissingError(StoreError):
    """A read-only command was pointed at a store that does not exist (nothing is created for it)."""


class OutageError(FatalModelError):
    """An endpoint that answered earlier has failed every call for longer than the allowed outage."""


class Terminated(KeyboardInterrupt):
    """The process got SIGTERM: handled like Ctrl-C (the run is marked interrupted, work is kept)."""

    exit_code = 143
