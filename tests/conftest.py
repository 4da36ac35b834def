"""Shared fixtures: the real HealthBench fragments (when present), a fake server per test module, an
in-process job service, and tiny record factories."""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# the CLI's rich consoles are made at import and keep a COLUMNS found then (pytest-xdist's workers
# set 80), while tests give each command its own COLUMNS
os.environ.pop("COLUMNS", None)
# a command run without --store uses the user's default store: the tests' default stores live in a
# folder of their own (subprocesses inherit it), never in the store of the machine's user
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="healthbench-tests-data-")
os.environ.pop("HEALTHBENCH_STORE", None)
REPO_ROOT = Path(__file__).resolve().parents[1]
if importlib.util.find_spec("healthbench") is None:  # a checkout without `pip install -e .`
    sys.path.insert(0, str(REPO_ROOT / "src"))

from helpers import build_conversation, build_sample  # noqa: E402
from pg_fixtures import pg_server, pg_url, store_target  # noqa: E402, F401  (PostgreSQL fixtures)
from service_helpers import http, service  # noqa: E402, F401  (an in-process job service)
from support.process import fake_server_process  # noqa: E402

from healthbench.data.schema import Conversation  # noqa: E402
from healthbench.scoring.run_score import GradedSample  # noqa: E402

SHARED_DATA = REPO_ROOT.parent / "shared" / "data" / "healthbench"
SHARED_SKIP_REASON = (
    "../shared/data/healthbench not present "
    "(real HealthBench fragments exist only on developer machines and CI)"
)
FIXTURES = Path(__file__).resolve().parent / "fixtures"

ConversationFactory = Callable[..., Conversation]
SampleFactory = Callable[..., GradedSample]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked `slow` run first (in their order), the rest after them: on several workers the
    suite does not wait at its end for one long test that started last."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_configure(config: pytest.Config) -> None:
    """Under ``--dist loadgroup`` the tests marked ``xdist_group`` share one worker (one local Ray; one
    PostgreSQL that the outage tests restart). pytest 9.2 with pytest-xdist 3.8 silently drops the group
    (pytest-xdist issue 1386): those tests would start their servers once per worker, slow and flaky."""
    if config.getoption("dist", default="no") == "loadgroup" and pytest.version_tuple[:2] >= (9, 2):
        raise pytest.UsageError(
            f"pytest {pytest.__version__} ignores xdist_group under --dist loadgroup: "
            "install the tested versions, pip install -c constraints.txt -e '.[dev]'"
        )


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """``../shared/data/healthbench`` next to the repository; skips the test when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(SHARED_SKIP_REASON)
    return SHARED_DATA


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """A fake server in its own process on a free port, one per test module; its ``/v1`` URL."""
    with fake_server_process() as url:
        yield url


@pytest.fixture
def make_conversation() -> ConversationFactory:
    return build_conversation


@pytest.fixture
def make_sample() -> SampleFactory:
    return build_sample


@pytest.fixture
def write_file(tmp_path: Path) -> Callable[[str, str | bytes], Path]:
    """Write text or bytes to ``tmp_path / name`` and return the path."""

    def write(name: str, content: str | bytes) -> Path:
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path

    return write


@pytest.fixture(scope="module")
def online_metrics(tmp_path_factory: pytest.TempPathFactory) -> dict[str, float]:
    """The demo run answered online (the reference every batch run must equal)."""
    from support.fake_runs import fake_run_config

    from healthbench.results.run_results import score_stored_run
    from healthbench.runner.run import run_eval
    from healthbench.store import Store
    from healthbench.testing.fake_server import running_fake_server

    with running_fake_server() as url:
        store = Store(tmp_path_factory.mktemp("online") / "s.db")
        outcome = run_eval(fake_run_config(url), store=store, name="online")
        return score_stored_run(store, outcome.run).metrics()
