"""A schema-driven fuzz run (schemathesis) of the service's OpenAPI spec: no input gives a 5xx."""

from __future__ import annotations

from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, settings

from healthbench.service.app import PREFIX, create_app
from healthbench.service.auth import create_token
from healthbench.service.operations import JobService
from healthbench.service.schemas import JobCreate
from healthbench.store.runs import Store


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    store = Store(Path(tmp_path_factory.mktemp("fuzz")) / "s.db")
    service = JobService(store)
    token = create_token(service.jobs, ["*"])
    url = "http://127.0.0.1:9/v1"
    model = {"spec": "cand", "base_url": url}
    service.create("default", JobCreate.model_validate({"name": "j1", "model": model, "judge": model}))
    yield create_app(service), token
    store.close()


schema = schemathesis.pytest.from_fixture("fuzz_schema")


@pytest.fixture(scope="module")
def fuzz_schema(served):
    app, _ = served
    return schemathesis.openapi.from_asgi("/openapi.json", app)


@schema.parametrize()
@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_input_gives_a_server_error(case, served) -> None:
    _, token = served
    response = case.call(headers={"Authorization": f"Bearer {token}"})
    assert response.status_code < 500, (case.path, response.text)
    if response.status_code >= 400:
        assert set(response.json()) == {"error"}, response.text


def test_spec_uses_the_documented_layout(served) -> None:
    app, _ = served
    assert any(path.startswith(PREFIX) for path in app.openapi()["paths"])
