"""Where HealthBench data comes from: the official URLs (downloaded once, cached), local files, the demo.

The official files are fetched with a plain HTTPS GET on first use, written atomically into the cache
directory (``$HEALTHBENCH_CACHE_DIR`` or the platform's user cache dir), and their sha256 is recorded
next to them. Nothing is downloaded at import time.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic

import platformdirs

from healthbench.atomic import atomic_writer
from healthbench.data.formats import Source
from healthbench.data.schema import Conversation, MetaEvalRecord, Record, conversations_of, meta_records_of
from healthbench.errors import DataError, DownloadError

if TYPE_CHECKING:
    import httpx  # imported by `download` only: loading it costs more than reading a dataset

    from healthbench.data.shapes import ClassicLine

META_VARIANTS: tuple[str, ...] = ("meta_eval", "demo_meta_eval")

_BASE = "https://openaipublic.blob.core.windows.net/simple-evals/healthbench/"
OFFICIAL_URLS: dict[str, str] = {
    "full": _BASE + "2025-05-07-06-14-12_oss_eval.jsonl",
    "hard": _BASE + "hard_2025-05-08-21-00-10.jsonl",
    "consensus": _BASE + "consensus_2025-05-09-20-00-46.jsonl",
    "meta_eval": _BASE + "2025-05-07-06-14-12_oss_meta_eval.jsonl",
}
DEMO_FILES: dict[str, str] = {"demo": "demo.jsonl", "demo_meta_eval": "demo_meta_eval.jsonl"}
CACHE_ENV = "HEALTHBENCH_CACHE_DIR"

# called as a download advances: (file name, bytes so far, total bytes or None); the CLI draws it
DownloadProgress = Callable[[str, int, int | None], None]


@dataclass(frozen=True)
class DatasetFile:
    """A dataset file on disk with where it came from."""

    variant: str
    path: Path
    source: str  # URL, "demo" or "local"
    sha256: str


def cache_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The data cache directory: the argument, else $HEALTHBENCH_CACHE_DIR, else the platform default."""
    if override is not None:
        return Path(override)
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return Path(platformdirs.user_cache_dir("healthbench")) / "data"


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def require_file(path: Path) -> None:
    """A DataError naming why ``path`` cannot be read as a dataset file."""
    if path.is_dir():
        raise DataError("is a directory, not a JSONL file", path=str(path))
    if not path.is_file():
        raise DataError("file not found", path=str(path))


def _demo_path(variant: str) -> Path:
    resource = resources.files("healthbench.data") / "demo" / DEMO_FILES[variant]
    return Path(str(resource))


def resolve(
    variant: str,
    *,
    data: str | os.PathLike[str] | None = None,
    cache: str | os.PathLike[str] | None = None,
    progress: DownloadProgress | None = None,
    transport: httpx.BaseTransport | None = None,
) -> DatasetFile:
    """Find (or download once) the file for ``variant``; ``data`` overrides with a local file."""
    if data is not None:
        path = Path(data)
        require_file(path)
        return DatasetFile(variant, path, "local", sha256_of(path))
    if variant in DEMO_FILES:
        path = _demo_path(variant)
        return DatasetFile(variant, path, "demo", sha256_of(path))
    if variant not in OFFICIAL_URLS:
        known = ", ".join([*OFFICIAL_URLS, *DEMO_FILES])
        raise DataError(f"unknown dataset variant {variant!r} (known: {known})")
    url = OFFICIAL_URLS[variant]
    target = cache_dir(cache) / url.rsplit("/", 1)[1]
    if not target.is_file():
        download(url, target, progress=progress, transport=transport)
    meta = target.with_suffix(target.suffix + ".sha256")
    digest = meta.read_text().split()[0] if meta.is_file() else sha256_of(target)
    return DatasetFile(variant, target, url, digest)


def download(
    url: str,
    target: Path,
    *,
    progress: DownloadProgress | None = None,
    transport: httpx.BaseTransport | None = None,
) -> str:
    """GET ``url`` into ``target`` atomically (temp file + rename); returns and records its sha256.
    ``progress`` (if given) is called after every chunk; nothing is drawn otherwise."""
    import httpx

    digest = hashlib.sha256()
    try:
        with (
            atomic_writer(target, suffix=".part") as out,
            httpx.Client(transport=transport, follow_redirects=True, timeout=60.0) as client,
            client.stream("GET", url) as response,
        ):
            response.raise_for_status()
            total = int(response.headers.get("content-length", 0)) or None
            done = 0
            for chunk in response.iter_bytes(1 << 16):
                out.write(chunk)
                digest.update(chunk)
                done += len(chunk)
                if progress is not None:
                    progress(target.name, done, total)
    except (httpx.HTTPError, OSError) as exc:
        if isinstance(exc, httpx.HTTPStatusError):
            reason = f"HTTP {exc.response.status_code}"
        else:  # one line: some httpx messages span several
            reason = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        raise DownloadError(
            f"could not download {url} ({reason}); no cached copy in {target.parent}. "
            "Pass a local copy with --data PATH, or use --dataset demo to run offline."
        ) from None
    sha = digest.hexdigest()
    target.with_suffix(target.suffix + ".sha256").write_text(f"{sha}  {target.name}\n")
    return sha


def record_pages(
    source: Source, record_type: type[Record], *, name: str | None = None
) -> Iterator[list[Record]]:
    """A classic eval file as conversations, or a meta-eval file as its rows, from a path or bytes, a
    page at a time (`healthbench.data.jsonl.read_pages`: every problem is a DataError naming file,
    line and field)."""
    from healthbench.data.jsonl import read_pages  # (the reader loads msgspec: config imports this module)
    from healthbench.data.shapes import ClassicLine, MetaLine

    if record_type is MetaEvalRecord:
        return map(meta_records_of, read_pages(source, MetaLine, name=name))  # type: ignore[arg-type]
    return map(conversations_of, read_pages(source, ClassicLine, name=name))  # type: ignore[arg-type]


def read_records(source: Source, record_type: type[Record], *, name: str | None = None) -> list[Record]:
    """`record_pages`, gathered."""
    return [record for page in record_pages(source, record_type, name=name) for record in page]


@dataclass(frozen=True)
class Pages(Generic[Record]):
    """A dataset file a page at a time, each call reading it again: as decoded lines (`lines`, what
    a run's choice of rows looks at), or as records (calling it: `build` of each page of lines)."""

    lines: Callable[[], Iterator[list[Any]]]
    build: Callable[[list[Any]], list[Record]]

    def __call__(self) -> Iterator[list[Record]]:
        return map(self.build, self.lines())


def open_conversations(
    variant: str = "full",
    *,
    data: str | os.PathLike[str] | None = None,
    cache: str | os.PathLike[str] | None = None,
    progress: DownloadProgress | None = None,
) -> tuple[DatasetFile, Pages[Conversation]]:
    """The file of an eval variant (full, hard, consensus, demo) or a local file, classic or
    HealthBench Professional, and its conversations a page at a time (`Pages` of `read_eval_pages`'s
    lines, built by `conversations_of`)."""
    if variant in META_VARIANTS:
        raise DataError(f"{variant!r} is a meta-eval dataset; use `healthbench meta-eval`")
    from healthbench.data.jsonl import read_eval_pages  # (as in `record_pages`)

    source = resolve(variant, data=data, cache=cache, progress=progress)
    return source, Pages(lambda: read_eval_pages(source.path)[1], conversations_of)


def load_conversations(
    variant: str = "full",
    *,
    data: str | os.PathLike[str] | None = None,
    cache: str | os.PathLike[str] | None = None,
    progress: DownloadProgress | None = None,
) -> tuple[DatasetFile, list[Conversation]]:
    """The conversations of an eval variant or of a local file (`open_conversations`, gathered)."""
    source, pages = open_conversations(variant, data=data, cache=cache, progress=progress)
    return source, [record for page in pages() for record in page]


def join_datasets(
    files: Sequence[str | os.PathLike[str] | tuple[str, bytes]],
    variant: str | None,
    cache: str | os.PathLike[str] | None = None,
) -> dict[str, ClassicLine] | None:
    """The conversations of every given dataset (a path, or an upload as (name, bytes)) by prompt_id
    (None when none is given), as the reader decodes them (`healthbench.data.shapes.ClassicLine`: what
    scoring and the result shapes read; no pydantic record is built); a prompt_id given twice must
    have the same rubric, or it is a `DataError` naming the file."""
    if not files and variant is None:
        return None
    from healthbench.data.jsonl import join_by_prompt_id, read_eval  # (as in `read_records`)

    loaded: list[tuple[str, list[ClassicLine]]] = []
    for file in files:
        if isinstance(file, tuple):
            loaded.append((file[0], read_eval(file[1], name=file[0])[1]))
        else:
            source, pages = open_conversations(data=file)
            loaded.append((str(source.path), [line for page in pages.lines() for line in page]))
    if variant is not None:
        source, pages = open_conversations(variant, cache=cache)
        loaded.append((str(source.path), [line for page in pages.lines() for line in page]))
    return join_by_prompt_id(loaded)


def open_meta_eval(
    variant: str = "meta_eval",
    *,
    data: str | os.PathLike[str] | None = None,
    cache: str | os.PathLike[str] | None = None,
    progress: DownloadProgress | None = None,
) -> tuple[DatasetFile, Pages[MetaEvalRecord]]:
    """The meta-eval file and its rows a page at a time (`record_pages`)."""
    from healthbench.data.jsonl import read_pages  # (as in `record_pages`)
    from healthbench.data.shapes import MetaLine

    source = resolve(variant, data=data, cache=cache, progress=progress)
    return source, Pages(functools.partial(read_pages, source.path, MetaLine), meta_records_of)


def load_meta_eval(
    variant: str = "meta_eval",
    *,
    data: str | os.PathLike[str] | None = None,
    cache: str | os.PathLike[str] | None = None,
    progress: DownloadProgress | None = None,
) -> tuple[DatasetFile, list[MetaEvalRecord]]:
    """The rows of the meta-eval file (`open_meta_eval`, gathered)."""
    source, pages = open_meta_eval(variant, data=data, cache=cache, progress=progress)
    return source, [record for page in pages() for record in page]
