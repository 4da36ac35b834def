"""The one error of the job service and its client: an HTTP status, a short type and a message."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from healthbench.errors import HealthBenchError

ERROR_TYPES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    411: "length_required",
    413: "payload_too_large",
    422: "invalid_request",
    429: "quota_exceeded",
    500: "internal_error",
    503: "unavailable",
}


class ServiceError(HealthBenchError):
    """An answer of the service that is not a success (raised by the client as well)."""

    def __init__(self, status: int, message: str, type: str | None = None) -> None:
        self.status = status
        self.type = type or ERROR_TYPES.get(status, "error")
        self.message = message
        super().__init__(f"{status} {self.type}: {message}")


def validation_message(errors: Sequence[Any], where: Sequence[str | int] = ()) -> str:
    """The 422 message of a pydantic validation error (its ``errors()``): the first error's location,
    after ``where`` (``body``, ``path.name``), and its message. The server and the client both say it."""
    first = errors[0] if errors else {}
    location = ".".join(str(p) for p in (*where, *first.get("loc", ())))
    message = str(first.get("msg", "invalid request")).removeprefix("Value error, ")
    return f"{location}: {message}"[:500]
