"""Classification of failed calls: status codes, Retry-After, key redaction, one-line messages."""

from __future__ import annotations

import email.utils

import pytest

from healthbench.models.errors import (
    FailureKind,
    ProviderError,
    classify_status,
    http_failure,
    one_line,
    parse_retry_after,
    redact,
    server_message,
)


@pytest.mark.parametrize(
    ("status", "body", "kind"),
    [
        (429, '{"error": {"message": "Rate limit reached"}}', FailureKind.RATE_LIMIT),
        (429, '{"error": {"code": "insufficient_quota"}}', FailureKind.FATAL),
        *((status, "", FailureKind.TRANSIENT) for status in (500, 502, 503, 529, 408)),
        *((status, "", FailureKind.FATAL) for status in (400, 401, 403, 404, 422)),
    ],
)
def test_classify_status(status, body, kind):
    assert classify_status(status, body) is kind


def test_parse_retry_after():
    assert parse_retry_after(None) is None
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after(" 0.5 ") == 0.5
    assert parse_retry_after("-3") == 0.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after("nan") is None
    date = email.utils.formatdate(1_000_030, usegmt=True)
    assert parse_retry_after(date, now=1_000_000) == 30.0


def test_redact_removes_the_key_and_key_shaped_strings():
    assert (
        redact("Incorrect API key provided: sk-proj-abcdef123456", None)
        == "Incorrect API key provided: sk-***"
    )
    assert redact("bad key sk-ant-api03-XYZXYZXYZ", None) == "bad key sk-ant-***"
    assert redact("key=hunter2hunter2 rejected", "hunter2hunter2") == "key=*** rejected"


def test_server_message_reads_both_error_shapes():
    assert server_message('{"error": {"message": "m1", "type": "x"}}') == "m1"
    assert server_message('{"type": "error", "error": {"type": "overloaded_error", "message": "m2"}}') == "m2"
    assert server_message("<html>Bad gateway</html>\n") == "<html>Bad gateway</html>"


def test_one_line_collapses_and_cuts():
    assert one_line("a\n  b\tc") == "a b c"
    long = one_line("x" * 1000)
    assert len(long) == 300 and long.endswith("…")


def test_http_failure_messages():
    body = '{"error": {"message": "Incorrect API key provided: sk-wrong12345678"}}'
    err = http_failure(401, body, api_key="sk-wrong12345678", key_env="OPENAI_API_KEY")
    assert err.kind is FailureKind.FATAL and err.status == 401
    assert (
        str(err) == "401 invalid or missing API key (check OPENAI_API_KEY): Incorrect API key provided: ***"
    )
    quota = http_failure(
        429, '{"error": {"message": "quota", "code": "insufficient_quota"}}', retry_after_header="1"
    )
    assert quota.kind is FailureKind.FATAL and quota.retry_after is None
    assert str(quota).startswith("429 quota exhausted (insufficient_quota")
    limited = http_failure(429, '{"error": {"message": "slow down"}}', retry_after_header="2")
    assert (limited.kind, limited.retry_after, str(limited)) == (
        FailureKind.RATE_LIMIT,
        2.0,
        "429: slow down",
    )
    missing = http_failure(404, '{"error": {"message": "The model `gpt-9` does not exist"}}')
    assert str(missing) == "404 not found (unknown model or wrong base URL): The model `gpt-9` does not exist"
    busy = http_failure(503, "", retry_after_header="4")
    assert (busy.kind, busy.retry_after, str(busy)) == (FailureKind.TRANSIENT, 4.0, "503: (empty body)")


def test_provider_error_carries_a_call_failure():
    err = ProviderError(FailureKind.TRANSIENT, "timed out\nafter 5s", status=None)
    assert err.failure.message == "timed out after 5s"
    assert (err.kind, err.retry_after, err.status) == (FailureKind.TRANSIENT, None, None)
