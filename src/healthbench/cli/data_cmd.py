"""`healthbench data ...`: download, describe and validate HealthBench dataset files."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text

from healthbench.cli.app import app, console, err_console, handles_errors, say
from healthbench.cli.progress import DownloadBar
from healthbench.data.jsonl import load_json
from healthbench.data.professional import PROFESSIONAL, TASK_TAGS, read_conversations, resolve_format
from healthbench.data.schema import Conversation, MetaEvalRecord
from healthbench.data.sources import (
    DEMO_FILES,
    META_VARIANTS,
    OFFICIAL_URLS,
    DatasetFile,
    cache_dir,
    read_records,
    require_file,
    resolve,
)
from healthbench.errors import DataError

data_app = typer.Typer(
    help="Download, describe and validate HealthBench dataset files.",
    no_args_is_help=True,
)
app.add_typer(data_app, name="data")

VARIANTS_HELP = f"Dataset variant: {', '.join([*OFFICIAL_URLS, *DEMO_FILES])}."
FormatOpt = Annotated[
    str | None,
    typer.Option(
        "--format",
        help="Format of an eval file: classic or professional (HealthBench Professional). "
        "Default: detected from the file.",
    ),
]
CacheDir = Annotated[
    Path | None,
    typer.Option(
        "--cache-dir",
        help="Where downloads are kept (default: $HEALTHBENCH_CACHE_DIR or the user cache directory).",
    ),
]


def _is_meta(variant: str | None, path: Path | None) -> bool:
    """Meta-eval data is told apart by variant name, or for a local file by its first record."""
    if variant is not None:
        return variant in META_VARIANTS
    if path is None:
        return False
    with path.open("rb") as handle:
        for raw in handle:
            if raw.strip():
                try:
                    first = load_json(raw.decode("utf-8-sig"), source=str(path))
                except (DataError, UnicodeDecodeError):
                    return False  # the full parse reports the error with its line
                return isinstance(first, dict) and "binary_labels" in first
    return False


@data_app.command("download")
@handles_errors
def download(
    variant: Annotated[str, typer.Argument(help=VARIANTS_HELP)],
    cache: CacheDir = None,
) -> None:
    """Download an official dataset once (cached), validate it, print its path and sha256."""
    source = resolve(variant, cache=cache, progress=DownloadBar(err_console))
    records = _count(source, meta=variant in META_VARIANTS)
    say(f"{source.variant}: {source.path}")
    say(f"source: {source.source}")
    say(f"sha256: {source.sha256}")
    say(f"records: {records}")


@data_app.command("info")
@handles_errors
def info(
    variant: Annotated[str | None, typer.Argument(help=f"{VARIANTS_HELP} Omit to list the variants.")] = None,
    data: Annotated[
        Path | None, typer.Option("--data", help="Describe this local JSONL file instead of a download.")
    ] = None,
    data_format: FormatOpt = None,
    cache: CacheDir = None,
) -> None:
    """Describe a dataset: path, source, sha256, format, records, criteria and theme counts.

    With neither VARIANT nor --data, list the variants and whether each is already cached.
    """
    if variant is None and data is None:
        _list_variants(cache)
        return
    source = resolve(variant or "local", data=data, cache=cache, progress=DownloadBar(err_console))
    meta = _is_meta(variant, data)
    found = None if meta else resolve_format(data_format, data)
    meta_rows = read_records(source.path, MetaEvalRecord) if meta else []
    conversations = [] if meta else read_conversations(source.path)
    say(f"path: {source.path}")
    say(f"source: {source.source}")
    say(f"sha256: {source.sha256}")
    if meta:
        _describe_meta(meta_rows)
    else:
        say(f"format: {'HealthBench Professional' if found == PROFESSIONAL else 'classic HealthBench'}")
        _describe_conversations(conversations, professional=found == PROFESSIONAL)


@data_app.command("validate")
@handles_errors
def validate(
    file: Annotated[Path, typer.Argument(help="A JSONL dataset file to check.")],
    meta_eval: Annotated[
        bool,
        typer.Option("--meta-eval", help="Check it as a meta-eval file (binary_labels rows; else detected)."),
    ] = False,
    data_format: FormatOpt = None,
) -> None:
    """Parse every line of FILE; print 'ok: N records' or the first problem (file, line, field).

    The format is detected as `data info` does: a meta-eval file (its first record has
    binary_labels), else classic HealthBench or HealthBench Professional (or --format)."""
    require_file(file)
    meta = meta_eval or (data_format is None and _is_meta(None, file))
    found = None if meta else resolve_format(data_format, file)
    count = _count(DatasetFile("local", file, "local", ""), meta=meta)
    kind = " (meta-eval)" if meta else " (HealthBench Professional)" if found == PROFESSIONAL else ""
    say(f"ok: {count} records{kind}")


def _count(source: DatasetFile, *, meta: bool) -> int:
    """Validate the whole file (an eval file of either format); the number of records."""
    if meta:
        return len(read_records(source.path, MetaEvalRecord))
    return len(read_conversations(source.path))


def _describe_conversations(records: list[Conversation], *, professional: bool = False) -> None:
    criteria = sum(len(r.rubrics) for r in records)
    say(f"conversations: {len(records)}")
    say(f"criteria: {criteria}")
    if professional:  # tasks carry use_case / type / difficulty / specialty tags, no theme
        _describe_tasks(records)
        return
    themes = Counter(theme for r in records for theme in r.themes)
    table = Table(title="Conversations by theme", title_justify="left")
    table.add_column("theme", overflow="fold")
    table.add_column("conversations", justify="right")
    for theme, count in sorted(themes.items()):
        table.add_row(Text(theme), str(count))
    untagged = sum(1 for r in records if not r.themes)
    if untagged:
        table.add_row("(no theme)", str(untagged))
    console.print(table)


def _describe_tasks(records: list[Conversation]) -> None:
    table = Table(title="Tasks by tag", title_justify="left")
    table.add_column("tag", overflow="fold")
    table.add_column("tasks", justify="right")
    counts = Counter(tag for r in records for tag in r.example_tags)
    for name in TASK_TAGS:
        for tag, count in sorted(counts.items()):
            if tag.startswith(f"{name}:"):
                table.add_row(Text(tag), str(count))
    console.print(table)


def _describe_meta(records: list[MetaEvalRecord]) -> None:
    labels = sum(len(r.binary_labels) for r in records)
    physicians = {p for r in records for p in r.anonymized_physician_ids}
    say(f"rows: {len(records)}")
    say(f"labels: {labels} from {len(physicians)} physicians")
    categories = Counter(r.category for r in records)
    table = Table(title="Rows by category", title_justify="left")
    table.add_column("category", overflow="fold")
    table.add_column("rows", justify="right")
    for category, count in sorted(categories.items()):
        table.add_row(Text(category), str(count))
    console.print(table)


def _list_variants(cache: Path | None) -> None:
    directory = cache_dir(cache)
    table = Table(title=Text(f"Dataset variants (cache: {directory})"), title_justify="left")
    table.add_column("variant")
    table.add_column("source")
    table.add_column("cached", justify="center")
    for name, url in OFFICIAL_URLS.items():
        cached = (directory / url.rsplit("/", 1)[1]).is_file()
        table.add_row(name, url, "yes" if cached else "no")
    for name in DEMO_FILES:
        table.add_row(name, "bundled demo (written for this project)", "yes")
    console.print(table)
