"""One rule for a model's base URL (`healthbench.config.checked_base_url`), in the CLI, a config file
and a job body (issue 32: a leading space, an embedded newline, echoed in the job's error, and
``/../`` were accepted): surrounding whitespace dropped, the rest refused with a message that does not
repeat the URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers import one_line_error
from service_helpers import token_for
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app
from healthbench.config import ModelConfig, checked_base_url

runner = CliRunner()
API = "/apis/evaluation/v2/workspaces/default/benchmark-jobs"
REFUSED = [
    (
        "http://127.0.0.1:9/v1\nX-Injected: 1",
        "a base URL must not contain spaces, line breaks or control characters",
    ),
    ("http://127.0.0.1:9/v 1", "a base URL must not contain spaces, line breaks or control characters"),
    ("http://127.0.0.1:9/v1/../admin", "a base URL must not contain '.' or '..' path segments"),
    ("http://127.0.0.1:9/v1/%2E%2E/admin", "a base URL must not contain '.' or '..' path segments"),
    ("   ", "a base URL must not be empty"),
]


def test_surrounding_whitespace_is_dropped() -> None:
    assert checked_base_url("  http://127.0.0.1:9/v1 \n") == "http://127.0.0.1:9/v1"
    assert ModelConfig(spec="m", base_url=" http://h/v1").base_url == "http://h/v1"


@pytest.mark.parametrize(("url", "message"), REFUSED)
def test_the_cli_refuses_in_one_line(url: str, message: str, tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    args = ["run", "--model", "m", "--base-url", url, "--judge", "j", "--store", str(store), "--limit", "1"]
    error = one_line_error(runner.invoke(app, args), code=1)
    assert message in error and "admin" not in error and "Injected" not in error


@pytest.mark.parametrize(("url", "message"), REFUSED)
def test_the_service_refuses_a_job_body(url: str, message: str, http: Any, tmp_path: Path) -> None:
    headers = {"Authorization": f"Bearer {token_for(str(tmp_path / 's.db'), ['default'])}"}
    body = {"model": {"spec": "m", "base_url": url}, "judge": {"spec": "j"}}
    answer = http.post(API, json=body, headers=headers)
    assert answer.status_code == 422
    assert answer.json()["error"]["message"] == f"model.base_url: {message}"
