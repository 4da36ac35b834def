"""`--grader-template simple-evals`: OpenAI's grader prompt taken from simple-evals' source by parsing it.

Tests use a module of our own (tests/fixtures/fake_healthbench_eval.py.txt, a made-up GRADER_TEMPLATE)
served by a local HTTP server on loopback; the real file and the internet are never touched.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from healthbench.errors import ConfigError
from healthbench.grading.official import (
    OFFICIAL_SHA256,
    OFFICIAL_URL,
    SIMPLE_EVALS_COMMIT,
    extract_grader_template,
    official_grader_text,
)

MODULE = (Path(__file__).parent / "fixtures" / "fake_healthbench_eval.py.txt").read_text()
# what simple-evals' `"""...""".strip()` gives for the fixture's literal
EXPECTED = (
    "Made-up grader prompt for tests (not OpenAI's).\n\n# Conversation\n<<conversation>>\n\n"
    '# Rubric item\n<<rubric_item>>\n\nAnswer with a json object holding "explanation" and "criteria_met".'
)
EXPECTED_SHA = hashlib.sha256(EXPECTED.encode()).hexdigest()


@contextmanager
def serving(files: dict[str, str]) -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server answering GET path -> text (404 otherwise); yields its URL and the
    paths requested."""
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            body = files.get(self.path)
            self.send_response(200 if body is not None else 404)
            data = (body or "not found").encode()
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def test_the_pinned_source_is_the_commit_behind_openais_numbers() -> None:
    assert SIMPLE_EVALS_COMMIT == "5e623c2b400af62a1278e23595f95b0853d7fe8a"
    assert OFFICIAL_URL.startswith("https://raw.githubusercontent.com/openai/simple-evals/5e623c2b4")
    assert OFFICIAL_URL.endswith("/healthbench_eval.py")
    assert OFFICIAL_SHA256 == "2adffd51fd259554ebcd036ad1072d4aa2b7ce3aec2bbffe36271f911632ed3c"


def test_extraction_parses_the_module_and_strips_like_simple_evals() -> None:
    # the fixture's first statement raises SystemExit: getting the text proves it was not executed
    assert extract_grader_template(MODULE) == EXPECTED


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("X = 1\n", "defines no GRADER_TEMPLATE"),
        ("GRADER_TEMPLATE = make()\n", "is not a string literal"),
        ('GRADER_TEMPLATE = "a".upper()\n', "is not a string literal"),
        ("GRADER_TEMPLATE = (\n", "does not parse as Python"),
    ],
)
def test_extraction_refuses_what_is_not_a_literal(source: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        extract_grader_template(source)


def test_download_checks_the_hash_caches_and_is_reused_offline(tmp_path: Path) -> None:
    with serving({"/healthbench_eval.py": MODULE}) as (root, hits):
        url = f"{root}/healthbench_eval.py"
        text = official_grader_text(tmp_path, url=url, expected_sha256=EXPECTED_SHA)
        assert text == EXPECTED
        assert official_grader_text(tmp_path, url=url, expected_sha256=EXPECTED_SHA) == EXPECTED
        assert hits == ["/healthbench_eval.py"]  # the second call was answered by the cache
    # the server is gone: the cached copy still serves
    assert official_grader_text(tmp_path, url=url, expected_sha256=EXPECTED_SHA) == EXPECTED
    assert not list(tmp_path.glob("*.part"))  # atomic: no partial file left behind


def test_a_modified_template_is_refused_with_how_to_pass_a_file(tmp_path: Path) -> None:
    modified = MODULE.replace("Made-up grader prompt", "Edited grader prompt")
    with serving({"/healthbench_eval.py": modified}) as (root, _), pytest.raises(ConfigError) as info:
        official_grader_text(tmp_path, url=f"{root}/healthbench_eval.py", expected_sha256=EXPECTED_SHA)
    message = str(info.value)
    assert "sha256" in message and EXPECTED_SHA[:12] in message
    assert "--grader-template FILE" in message and "\n" not in message


def test_offline_without_cache_stops_with_one_line(tmp_path: Path) -> None:
    with serving({}) as (root, _):
        url = f"{root}/healthbench_eval.py"  # 404, as a missing file or a blocked network
        with pytest.raises(ConfigError) as info:
            official_grader_text(tmp_path / "cache", url=url, expected_sha256=EXPECTED_SHA)
    message = str(info.value)
    assert message.startswith("grader template simple-evals: cannot download")
    assert "--grader-template FILE" in message and "\n" not in message


def test_a_damaged_cache_is_fetched_again(tmp_path: Path) -> None:
    with serving({"/healthbench_eval.py": MODULE}) as (root, hits):
        url = f"{root}/healthbench_eval.py"
        official_grader_text(tmp_path, url=url, expected_sha256=EXPECTED_SHA)
        (cached,) = tmp_path.glob("simple-evals_*_healthbench_eval.py")
        cached.write_text(MODULE.replace("Made-up", "Tampered"))
        assert official_grader_text(tmp_path, url=url, expected_sha256=EXPECTED_SHA) == EXPECTED
        assert len(hits) == 2
