"""Failures of one model call, classified as values so the retry wrapper can decide without guessing.

Providers raise `ProviderError`; only `healthbench.models.limits` decides what to do with it. Messages are
one line and never contain an API key (`redact` is applied to anything a server sends back).
"""

from __future__ import annotations

import email.utils
import enum
import json
import re
import time
from dataclasses import dataclass


class FailureKind(enum.Enum):
    """How a failed call should be handled."""

    RATE_LIMIT = "rate_limit"  # 429: wait (Retry-After when given) and try again
    TRANSIENT = "transient"  # 5xx, 529, timeouts, dropped connections, unreadable responses
    FATAL = "fatal"  # wrong key, unknown model, bad request, exhausted quota: retrying cannot help
    # nothing listens at the address or the name does not resolve: a blip on an endpoint that has
    # answered before (retried like TRANSIENT), most likely a wrong --base-url on one that never has
    UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class CallFailure:
    """One failed attempt: what kind, a one-line message, and the server's Retry-After in seconds."""

    kind: FailureKind
    message: str
    retry_after: float | None = None
    status: int | None = None


class ProviderError(Exception):
    """Raised by a provider adapter for a failed request; carries its `CallFailure`."""

    def __init__(
        self,
        kind: FailureKind,
        message: str,
        retry_after: float | None = None,
        status: int | None = None,
    ) -> None:
        self.failure = CallFailure(kind, one_line(message), retry_after, status)
        super().__init__(self.failure.message)

    @property
    def kind(self) -> FailureKind:
        return self.failure.kind

    @property
    def retry_after(self) -> float | None:
        return self.failure.retry_after

    @property
    def status(self) -> int | None:
        return self.failure.status


_KEY_LIKE = re.compile(r"\b(sk-(?:ant-)?)[A-Za-z0-9_\-*]{6,}")
_MAX_MESSAGE = 300


def one_line(text: str) -> str:
    """Collapse whitespace and cut long server messages so an error stays one readable line."""
    line = " ".join(text.split())
    return line if len(line) <= _MAX_MESSAGE else line[: _MAX_MESSAGE - 1] + "…"


def redact(text: str, secret: str | None = None) -> str:
    """Remove `secret` and anything shaped like an OpenAI/Anthropic key from `text`."""
    if secret:
        text = text.replace(secret, "***")
    return _KEY_LIKE.sub(r"\1***", text)


def parse_retry_after(value: str | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from a Retry-After header (delta-seconds or HTTP date); None when absent/bad."""
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    if seconds != seconds:  # NaN
        return None
    return max(0.0, seconds)


def server_message(body: str) -> str:
    """The human message in an OpenAI- or Anthropic-shaped error body, else the body itself."""
    try:
        data = json.loads(body)
    except ValueError:
        return body.strip()
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return str(error["message"])
        if isinstance(error, str):
            return error
    return body.strip()


def classify_status(status: int, body: str = "") -> FailureKind:
    """Map an HTTP status (and, for 429, the body) to a failure kind."""
    if status == 429:
        return FailureKind.FATAL if "insufficient_quota" in body else FailureKind.RATE_LIMIT
    if status in (408, 409) or status >= 500:  # 529 is Anthropic's "overloaded"
        return FailureKind.TRANSIENT
    return FailureKind.FATAL


def http_failure(
    status: int,
    body: str,
    *,
    retry_after_header: str | None = None,
    api_key: str | None = None,
    key_env: str | None = None,
) -> ProviderError:
    """Build the `ProviderError` for a non-2xx response, with a hint for the common fatal cases."""
    kind = classify_status(status, body)
    detail = redact(server_message(body), api_key) or "(empty body)"
    if status in (401, 403):
        hint = f" (check {key_env})" if key_env else " (this server wants an API key: set api_key_env)"
        message = f"{status} invalid or missing API key{hint}: {detail}"
    elif status == 404:
        message = f"404 not found (unknown model or wrong base URL): {detail}"
    elif status == 429 and kind is FailureKind.FATAL:
        message = f"429 quota exhausted (insufficient_quota; add credit or use another key): {detail}"
    else:
        message = f"{status}: {detail}"
    retry_after = None if kind is FailureKind.FATAL else parse_retry_after(retry_after_header)
    return ProviderError(kind, message, retry_after=retry_after, status=status)
