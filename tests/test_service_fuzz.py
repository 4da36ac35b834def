"""A schema-driven fuzz run of the service: `schemathesis run` with every check against the service's
own OpenAPI spec, on a live local server, finds nothing (no 5xx, answers as documented, schema-valid
bodies accepted, schema-invalid ones refused, 405s with an Allow header, ...).

The CLI is driven in a subprocess (its pytest plugin does not work with pytest 9); the server runs in
this process (uvicorn in a thread, no job worker: no job created by the fuzzer ever runs), on a store
in a temporary directory, with the data cache holding small files under the official names so that
nothing is downloaded (a download would be a 500, i.e. a finding)."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import pytest
import uvicorn

from healthbench.data import sources
from healthbench.service.app import PREFIX, create_app
from healthbench.service.auth import create_token
from healthbench.service.health import WorkerHealth
from healthbench.service.operations import JobService
from healthbench.service.schemas import JobCreate
from healthbench.store.runs import Store

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures"
MAX_EXAMPLES = 10  # per operation and phase: ~1,500 cases with the coverage phase, 30-45 s here
MIN_CASES = 500


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class _Idle:
    """Job workers as `/health/ready` sees them: running (none runs here, so that no job the fuzzer
    creates ever runs; without workers the probe's documented 503 would be a finding)."""

    def health(self) -> WorkerHealth:
        return WorkerHealth(True)


def _no_download(url: str, *_: Any, **__: Any) -> str:
    raise AssertionError(f"the fuzzed service tried to download {url}")


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """The service on a free loopback port: its URL and a token of every workspace."""
    folder = tmp_path_factory.mktemp("fuzz")
    cache = folder / "cache"
    cache.mkdir()
    for variant, url in sources.OFFICIAL_URLS.items():
        small = "meta_eval_small.jsonl" if variant == "meta_eval" else "small_dataset.jsonl"
        shutil.copy(FIXTURES / small, cache / url.rsplit("/", 1)[1])
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(sources.CACHE_ENV, str(cache))
        patch.setattr(sources, "download", _no_download)
        store = Store(folder / "s.db")
        service = JobService(store)
        token = create_token(service.jobs, ["*"])
        model = {"spec": "cand", "base_url": "http://127.0.0.1:9/v1"}
        service.create("default", JobCreate.model_validate({"name": "j1", "model": model, "judge": model}))
        port = _free_port()
        server = uvicorn.Server(
            uvicorn.Config(create_app(service, _Idle()), host="127.0.0.1", port=port, log_level="warning")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "the service did not start"
            time.sleep(0.05)
        try:
            yield url, token
        finally:
            server.should_exit = True
            thread.join(30)
            store.close()


def test_schemathesis_with_every_check_finds_nothing(live: tuple[str, str]) -> None:
    url, token = live
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(FIXTURES / "schemathesis.toml"),
        "run",
        f"{url}/openapi.json",
        "--checks",
        "all",
        "--max-examples",
        str(MAX_EXAMPLES),
        "--seed",
        "1",
        "--workers",
        "1",
        "--header",
        f"Authorization: Bearer {token}",
        "--no-color",
    ]
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "fuzz_hooks",
        "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    generated = re.search(r"(\d+) generated", output)
    assert generated is not None, output[-3000:]
    assert int(generated.group(1)) >= MIN_CASES, output[-3000:]
    print(output[-400:])  # the summary (cases generated, seconds), shown with -s
    assert "no issues found" in output or " passed" in output, output[-3000:]


def test_spec_uses_the_documented_layout(live: tuple[str, str]) -> None:
    url, _ = live
    spec = httpx.get(f"{url}/openapi.json", trust_env=False).json()
    assert any(path.startswith(PREFIX) for path in spec["paths"])
    create = spec["paths"][PREFIX]["post"]
    assert {"400", "401", "403", "409", "422"} <= set(create["responses"])


def test_job_body_schema_is_a_union_by_kind(live: tuple[str, str]) -> None:
    """What the server refuses for a kind, the schema refuses too (and the other way round)."""
    url, token = live
    spec = httpx.get(f"{url}/openapi.json", trust_env=False).json()
    body = {"$ref": "#/components/schemas/JobCreate", "components": spec["components"]}
    alternatives = spec["components"]["schemas"]["JobCreate"]["oneOf"]
    assert [a["properties"]["kind"]["const"] for a in alternatives] == [
        "eval",
        "regrade",
        "meta-eval",
        "import",
        "meta-eval-labels",
    ]
    model = {"spec": "cand", "base_url": "http://127.0.0.1:9/v1"}
    refused = [
        {},  # an eval needs model and judge
        {"model": model},
        {"kind": "import"},  # needs allresults_json
        {"kind": "import", "allresults_json": "{}", "model": model},  # model does not apply
        {"kind": "regrade", "source": "j1", "judge": model, "repeats": 2},
        {"model": None, "judge": model},
        {"model": model, "judge": model, "limit": "5"},  # strict: what the schema says, not "5" for 5
        {"model": model, "judge": model, "allow_untagged": 0},
        {"model": {**model, "settings": {"temperature": "0.5"}}, "judge": model},
    ]
    accepted = [
        {"model": model, "judge": model},
        {"kind": "eval", "model": model, "judge": model, "repeats": 2},
        {"kind": "meta-eval", "judge": model, "concurrency": 3},
        {"kind": "regrade", "source": "j1", "judge": model, "repeats": 1},  # a default is allowed
    ]
    headers = {"Authorization": f"Bearer {token}"}
    for case in refused:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(case, body)
        answer = httpx.post(
            f"{url}{PREFIX.format(workspace='default')}", json=case, headers=headers, trust_env=False
        )
        assert answer.status_code == 422, (case, answer.text)
    for case in accepted:
        jsonschema.validate(case, body)


def test_405_names_every_method_of_the_path(live: tuple[str, str]) -> None:
    url, token = live
    path = f"{url}{PREFIX.format(workspace='default')}/j1"
    answer = httpx.put(path, headers={"Authorization": f"Bearer {token}"}, trust_env=False)
    assert answer.status_code == 405
    assert answer.headers["allow"] == "DELETE, GET"
    assert json.loads(answer.text)["error"]["type"] == "method_not_allowed"


def test_a_body_that_is_not_utf8_is_400(live: tuple[str, str]) -> None:
    url, token = live
    answer = httpx.post(
        f"{url}{PREFIX.format(workspace='default')}",
        content=b'{"name": "\xff"}',
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        trust_env=False,
    )
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["type"] == "bad_request"
