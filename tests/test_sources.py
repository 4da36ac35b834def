"""Dataset sources: downloads through a mock transport (never the network), cache, --data, demo."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from healthbench.data.sources import (
    CACHE_ENV,
    OFFICIAL_URLS,
    cache_dir,
    load_conversations,
    load_meta_eval,
    resolve,
)
from healthbench.errors import DataError, DownloadError

BODY = (
    json.dumps(
        {
            "prompt": [{"role": "user", "content": "Can I take my allergy tablet twice today?"}],
            "prompt_id": "mock-1",
            "rubrics": [{"criterion": "Says to check the leaflet.", "points": 4, "tags": ["axis:accuracy"]}],
            "example_tags": ["theme:hedging"],
        }
    )
    + "\n"
).encode()


class Server:
    """A MockTransport handler that serves BODY (or a fixed status) and counts requests."""

    def __init__(self, status: int = 200, body: bytes = BODY) -> None:
        self.status, self.body, self.urls = status, body, []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.urls.append(str(request.url))
        return httpx.Response(self.status, content=self.body if self.status == 200 else b"nope")

    @property
    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self)


class BrokenStream(httpx.SyncByteStream):
    """A body that fails after the first chunk: the download must leave nothing behind."""

    def __iter__(self) -> Iterator[bytes]:
        yield BODY[:10]
        raise httpx.ReadError("connection reset")


def test_download_writes_file_and_records_sha256(tmp_path: Path) -> None:
    server = Server()
    source = resolve("hard", cache=tmp_path, transport=server.transport)
    expected = hashlib.sha256(BODY).hexdigest()
    assert server.urls == [OFFICIAL_URLS["hard"]]
    assert source.path == tmp_path / OFFICIAL_URLS["hard"].rsplit("/", 1)[1]
    assert source.path.read_bytes() == BODY
    assert (source.variant, source.source, source.sha256) == ("hard", OFFICIAL_URLS["hard"], expected)
    recorded = source.path.with_suffix(".jsonl.sha256").read_text()
    assert recorded == f"{expected}  {source.path.name}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [source.path.name, f"{source.path.name}.sha256"]
    )


def test_cache_is_reused_without_a_request(tmp_path: Path) -> None:
    first = Server()
    resolve("full", cache=tmp_path, transport=first.transport)
    second = Server(status=500)
    again = resolve("full", cache=tmp_path, transport=second.transport)
    assert len(first.urls) == 1 and second.urls == []
    assert again.sha256 == hashlib.sha256(BODY).hexdigest()


def test_cache_dir_env_is_honoured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "env-cache"))
    assert cache_dir() == tmp_path / "env-cache"
    assert cache_dir(tmp_path / "explicit") == tmp_path / "explicit"
    source = resolve("consensus", transport=Server().transport)
    assert source.path.parent == tmp_path / "env-cache"
    assert source.path.read_bytes() == BODY


def test_http_error_is_a_one_line_download_error(tmp_path: Path) -> None:
    with pytest.raises(DownloadError) as caught:
        resolve("full", cache=tmp_path, transport=Server(status=404).transport)
    message = str(caught.value)
    assert "\n" not in message
    assert OFFICIAL_URLS["full"] in message
    assert "--data" in message
    assert list(tmp_path.iterdir()) == []


def test_interrupted_download_leaves_no_partial_file(tmp_path: Path) -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, stream=BrokenStream()))
    with pytest.raises(DownloadError, match="ReadError"):
        resolve("meta_eval", cache=tmp_path, transport=transport)
    assert list(tmp_path.iterdir()) == []


def test_data_path_is_used_as_is(tmp_path: Path) -> None:
    local = tmp_path / "my copy.jsonl"
    local.write_bytes(BODY)
    server = Server()
    source = resolve("full", data=local, cache=tmp_path / "cache", transport=server.transport)
    assert (source.path, source.source) == (local, "local")
    assert source.sha256 == hashlib.sha256(BODY).hexdigest()
    assert server.urls == [] and not (tmp_path / "cache").exists()
    _, records = load_conversations("full", data=local)
    assert [r.prompt_id for r in records] == ["mock-1"]


def test_missing_data_path_is_a_data_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="file not found"):
        resolve("full", data=tmp_path / "absent.jsonl")


def test_unknown_variant_lists_the_known_ones() -> None:
    with pytest.raises(DataError) as caught:
        resolve("fulll")
    assert "unknown dataset variant 'fulll'" in str(caught.value)
    assert "consensus" in str(caught.value) and "demo" in str(caught.value)


def test_demo_variants_load_offline() -> None:
    source, conversations = load_conversations("demo")
    assert source.source == "demo" and source.path.is_file()
    assert len(conversations) == 8
    assert all(c.prompt_id.startswith("demo-") for c in conversations)
    meta_source, rows = load_meta_eval("demo_meta_eval")
    assert meta_source.source == "demo" and len(rows) == 24


def test_meta_variant_is_refused_as_conversations() -> None:
    with pytest.raises(DataError, match="meta-eval dataset"):
        load_conversations("demo_meta_eval")
