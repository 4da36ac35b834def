"""A run's set-up reads its dataset a page at a time (`jsonl.read_pages`, `subset.select_pages`): the
same lines, the same choice in the same order, the same errors, nothing stored on a bad line, and a
peak memory that does not hold every record."""

from __future__ import annotations

import hashlib
import json
import random
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from healthbench.config import RunConfig, build_config
from healthbench.data import jsonl
from healthbench.data.schema import Conversation, MetaEvalRecord, row_id
from healthbench.data.shapes import ClassicLine, MetaLine
from healthbench.data.sources import (
    load_conversations,
    load_meta_eval,
    open_conversations,
    read_records,
    record_pages,
)
from healthbench.data.subset import select, select_pages
from healthbench.errors import DataError
from healthbench.runner.baselines import PHYSICIAN, find_group, prepare_baseline
from healthbench.runner.meta_eval import prepare_meta_eval
from healthbench.runner.run import prepare_eval
from healthbench.store import Store

FIXTURES = Path(__file__).parent / "fixtures"
URL = "http://127.0.0.1:9/v1"  # never called: a set-up makes no model call
MODELS = {"model": {"spec": "cand", "base_url": URL}, "judge": {"spec": "judge", "base_url": URL}}
WriteFile = Callable[[str, str | bytes], Path]


def _row(i: int, *, theme: str = "hedging", group: str = "Group 1") -> dict[str, Any]:
    return {
        "prompt": [{"role": "user", "content": f"question {i} " + "x" * 150}],
        "prompt_id": f"p-{i:05d}",
        "rubrics": [
            {"criterion": f"criterion {i}.{k}", "points": 5 - k, "tags": [f"axis:a{k % 3}"]} for k in range(4)
        ],
        "example_tags": [f"theme:{theme}", f"physician_agreed_category:c{i % 4}"],
        "ideal_completions_data": {"ideal_completions_group": group, "ideal_completion": f"answer {i}"},
    }


def _rows(n: int) -> list[dict[str, Any]]:
    return [_row(i, theme=("hedging", "emergency_referrals", "communication")[i % 3]) for i in range(n)]


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


@pytest.fixture
def small_pages(monkeypatch: pytest.MonkeyPatch) -> int:
    """Pages of ~4 kB: a few dozen lines make many pages."""
    monkeypatch.setattr(jsonl, "PAGE_BYTES", 4096)
    return 4096


def _pages(path: Path | bytes, shape: Any = ClassicLine) -> list[list[Any]]:
    return list(jsonl.read_pages(path, shape, name="data.jsonl"))


# --- the paged reader gives the lines the whole-file reader gives --------------------------------


def test_pages_hold_the_lines_of_the_whole_file_in_order(small_pages: int, write_file: WriteFile) -> None:
    text = _jsonl(_rows(60))
    # a BOM, blank lines and no newline at the end: what the whole-file reader accepts
    content = "\ufeff" + text.replace("\n", "\n\n", 7).rstrip("\n")
    path = write_file("data.jsonl", content)
    data = path.read_bytes()
    pages = _pages(path)
    assert len(pages) > 5 and all(len(page) < 60 for page in pages)
    whole = jsonl._decode_valid(data, ClassicLine, set())  # the one-batch decode of the whole file
    assert whole is not None and len(whole) == 60
    assert (
        [line for page in pages for line in page]
        == whole
        == list(jsonl._lines_one_by_one(data, ClassicLine, "x"))
    )
    assert [line for page in _pages(data) for line in page] == whole  # the same from bytes (uploads)
    assert jsonl.read_lines(path, ClassicLine) == whole


def test_a_line_longer_than_a_page_is_a_page_of_its_own(small_pages: int, write_file: WriteFile) -> None:
    rows = _rows(10)
    rows[4]["prompt"][0]["content"] = "y" * (3 * small_pages)
    path = write_file("data.jsonl", _jsonl(rows))
    assert [line.prompt_id for page in _pages(path) for line in page] == [r["prompt_id"] for r in rows]


def test_records_built_from_pages_are_the_records_of_the_list_reader(
    small_pages: int, write_file: WriteFile
) -> None:
    path = write_file("data.jsonl", _jsonl(_rows(40)))
    pages = list(record_pages(path, Conversation))
    assert len(pages) > 1
    paged = [c.model_dump(mode="json") for page in pages for c in page]
    assert paged == [{**row, "canary": None} for row in _rows(40)]  # the file's values, defaults filled
    meta = list(record_pages(FIXTURES / "meta_eval_small.jsonl", MetaEvalRecord))
    assert len(meta) > 1
    listed = read_records(FIXTURES / "meta_eval_small.jsonl", MetaEvalRecord)
    assert (
        [r for page in meta for r in page]
        == listed
        == load_meta_eval(data=FIXTURES / "meta_eval_small.jsonl")[1]
    )


def test_a_valid_line_only_the_line_by_line_path_takes_on_page_two(
    small_pages: int, write_file: WriteFile
) -> None:
    """A line only Python calls blank (U+00A0) on a later page: that page goes line by line, the
    pages before are not given twice."""
    lines = _jsonl(_rows(40)).splitlines(keepends=True)
    lines.insert(30, "\u00a0\n")
    path = write_file("data.jsonl", "".join(lines))
    assert jsonl._decode_valid(path.read_bytes(), ClassicLine, set()) is None
    got = [line.prompt_id for page in _pages(path) for line in page]
    assert got == [f"p-{i:05d}" for i in range(40)]


def test_keys_of_one_hash_only_cost_the_line_by_line_path(
    small_pages: int, write_file: WriteFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pages remember the hashes of the keys they saw, not the keys (a meta-eval key holds a
    criterion's text): keys that share a hash are read line by line, where the keys are compared."""
    path = write_file("data.jsonl", _jsonl(_rows(40)))
    expected = jsonl.read_lines(path, ClassicLine)
    monkeypatch.setattr(jsonl, "hash", lambda key: 7, raising=False)
    assert jsonl._decode_valid(path.read_bytes(), ClassicLine, set()) is None  # every key "collides"
    assert jsonl.read_lines(path, ClassicLine) == expected


# --- a bad line on a later page: the whole-file reader's error, and no run ----------------------

BAD_LINES: dict[str, Callable[[list[str]], None]] = {
    "invalid JSON": lambda lines: lines.__setitem__(33, '{"prompt": [oops\n'),
    "missing field": lambda lines: lines.__setitem__(33, lines[33].replace('"prompt_id"', '"prompt_idx"')),
    "points out of range": lambda lines: lines.__setitem__(
        33, lines[33].replace('"points": 5', '"points": 50')
    ),
    "no positive point": lambda lines: lines.__setitem__(
        33, json.dumps({**_row(33), "rubrics": [{"criterion": "c", "points": -1}]}) + "\n"
    ),
    "duplicate of page one": lambda lines: lines.__setitem__(33, lines[2]),
    "last turn not the user's": lambda lines: lines.__setitem__(
        33, lines[33].replace('"role": "user"', '"role": "assistant"')
    ),
    "a row of the other format": lambda lines: lines.__setitem__(
        33, json.dumps({"id": "t", "conversation": {"messages": []}, "rubric_items": []}) + "\n"
    ),
}


def _bad_file(write_file: WriteFile, spoil: Callable[[list[str]], None]) -> Path:
    lines = _jsonl(_rows(40)).splitlines(keepends=True)
    spoil(lines)
    return write_file("data.jsonl", "".join(lines))


@pytest.mark.parametrize("kind", sorted(BAD_LINES))
def test_a_bad_line_on_a_later_page_is_the_whole_file_error_and_stores_nothing(
    kind: str, small_pages: int, write_file: WriteFile, tmp_path: Path
) -> None:
    path = _bad_file(write_file, BAD_LINES[kind])
    pages = jsonl.read_pages(path, ClassicLine)
    assert next(pages)  # the first page is good: the bad line is further on
    with pytest.raises(DataError) as whole:
        list(jsonl._lines_one_by_one(path.read_bytes(), ClassicLine, str(path)))
    assert f"{path}:34" in str(whole.value)  # the line the file has it on
    with pytest.raises(DataError) as paged:
        list(pages)
    assert str(paged.value) == str(whole.value)
    store = Store(tmp_path / "s.db")
    with pytest.raises(DataError) as setup:
        prepare_eval(store, build_config(MODELS, {"data": str(path)}), "r")
    assert str(setup.value) == str(whole.value)
    assert store.get_run("r") is None and store.list_runs() == []


def test_bad_utf8_anywhere_is_named_before_an_earlier_bad_line(
    small_pages: int, write_file: WriteFile
) -> None:
    """As the whole-file reader: the file's bytes are checked before its lines."""
    lines = [line.encode() for line in _jsonl(_rows(40)).splitlines(keepends=True)]
    lines[20] = b"{oops\n"
    lines[37] = lines[37].replace(b"question", b"qu\xffestion")
    path = write_file("data.jsonl", b"".join(lines))
    with pytest.raises(DataError, match=r":38: not valid UTF-8 \(byte 44\)") as paged:
        jsonl.read_lines(path, ClassicLine)
    with pytest.raises(DataError) as whole:
        list(jsonl._lines_one_by_one(path.read_bytes(), ClassicLine, str(path)))
    assert str(paged.value) == str(whole.value)


def test_a_bom_inside_the_file_on_a_page_start_is_not_dropped(
    small_pages: int, write_file: WriteFile
) -> None:
    """Only the file's first bytes may be a BOM: one on a later page's first line is the whole-file
    reader's error."""
    data = _jsonl(_rows(40)).encode()
    pages = list(jsonl._byte_pages(data, "x"))
    cut = len(pages[0])
    spoiled = data[:cut] + b"\xef\xbb\xbf" + data[cut:]
    with pytest.raises(DataError) as paged:
        jsonl.read_lines(spoiled, ClassicLine, name="up.jsonl")
    with pytest.raises(DataError) as whole:
        list(jsonl._lines_one_by_one(spoiled, ClassicLine, "up.jsonl"))
    assert str(paged.value) == str(whole.value)


def test_a_meta_eval_bad_line_on_a_later_page_stores_nothing(
    small_pages: int, write_file: WriteFile, tmp_path: Path
) -> None:
    lines = (FIXTURES / "meta_eval_small.jsonl").read_text().splitlines(keepends=True)
    assert len("".join(lines[:-1])) > small_pages
    lines[-1] = lines[-1].replace('"binary_labels"', '"binary_label"')
    path = write_file("meta.jsonl", "".join(lines))
    with pytest.raises(DataError) as whole:
        list(jsonl._lines_one_by_one(path.read_bytes(), MetaLine, str(path)))
    store = Store(tmp_path / "s.db")
    config = build_config(
        {"dataset": "meta_eval", "data": str(path), "judge": MODELS["judge"], "model": None}
    )
    with pytest.raises(DataError) as setup:
        prepare_meta_eval(store, config, "m")
    assert str(setup.value) == str(whole.value) and store.list_runs() == []


# --- the choice: simple-evals' sample, by keys ---------------------------------------------------


@pytest.mark.parametrize("n", [1, 17, 200, 526])
def test_sampling_indices_picks_what_sampling_the_records_picks(shared_data: Path, n: int) -> None:
    """``Random.sample`` draws from len(population) and k only: the sample of the indices of the real
    527-line fragment is the sample of its records."""
    records = read_records(shared_data / "eval" / "oss_eval_sample527.jsonl", Conversation)
    picked = random.Random(0).sample(records, n)
    indices = random.Random(0).sample(range(len(records)), n)
    assert [records[i].prompt_id for i in indices] == [r.prompt_id for r in picked]


def _chosen_in_order(pages: Any, **filters: Any) -> list[Any]:
    chosen = select_pages(pages, **filters)
    got = sorted(chosen.rows(), key=lambda pair: pair[0])
    assert [at for at, _ in got] == list(range(chosen.count))
    return [row for _, row in got]


@pytest.mark.parametrize(
    "filters",
    [
        {},
        {"limit": 50},
        {"limit": 526},
        {"limit": 527},
        {"themes": ["emergency_referrals"], "limit": 9},
        {"themes": ["hedging", "theme:context_seeking"]},
        {"ids": ["__first__", "__last__"], "limit": 1},
    ],
)
def test_select_pages_is_select_on_the_real_fragment(
    shared_data: Path, filters: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl, "PAGE_BYTES", 1 << 16)
    _, pages = open_conversations(data=shared_data / "eval" / "oss_eval_sample527.jsonl")
    records = [c for page in pages() for c in page]
    if "ids" in filters:
        filters = {**filters, "ids": [records[0].prompt_id, records[-1].prompt_id]}
    expected = select(records, **filters)
    if "limit" in filters and filters["limit"] < len(records) and set(filters) == {"limit"}:
        assert expected == random.Random(0).sample(records, filters["limit"])  # simple-evals' draw
    assert [c.prompt_id for c in _chosen_in_order(pages, **filters)] == [c.prompt_id for c in expected]
    # on the decoded lines, records built of the chosen only (as a run's set-up does): the same
    assert _chosen_in_order(pages.lines, build=pages.build, **filters) == expected


@pytest.mark.parametrize(
    ("filters", "message"),
    [
        ({"ids": ["p-00001", "nope", "nada"]}, "prompt_id not in the dataset: nope, nada"),
        (
            {"themes": ["global_health"]},
            "no conversation has the theme 'global_health' (theme:global_health)",
        ),
        ({"limit": 0}, "--limit must be at least 1, got 0"),
    ],
)
def test_select_pages_errors_are_select_errors(
    small_pages: int, write_file: WriteFile, filters: dict[str, Any], message: str
) -> None:
    _, pages = open_conversations(data=write_file("data.jsonl", _jsonl(_rows(30))))
    with pytest.raises(DataError) as listed:
        select([c for page in pages() for c in page], **filters)
    with pytest.raises(DataError) as paged:
        select_pages(pages, **filters)
    assert str(paged.value) == str(listed.value) == message


def test_a_file_changed_between_the_two_reads_is_an_error(small_pages: int, write_file: WriteFile) -> None:
    path = write_file("data.jsonl", _jsonl(_rows(30)))
    _, pages = open_conversations(data=path)
    chosen = select_pages(pages, limit=10)
    path.write_text(_jsonl(_rows(31)[1:]))
    with pytest.raises(DataError, match="changed while it was read"):
        list(chosen.rows())


# --- the set-ups store what the list path stored, in the same order ------------------------------


def _items(store: Store, name: str) -> list[tuple[str, Any]]:
    run = store.get_run(name)
    assert run is not None
    return [(item_id, dict(record)) for item_id, record in store.load_items(run.id)]


@pytest.mark.parametrize("filters", [{}, {"limit": 25}, {"themes": ["hedging"], "limit": 4}])
def test_an_eval_set_up_stores_the_chosen_conversations_in_sample_order(
    small_pages: int, write_file: WriteFile, tmp_path: Path, filters: dict[str, Any]
) -> None:
    path = write_file("data.jsonl", _jsonl(_rows(60)))
    config = build_config(MODELS, {"data": str(path), **filters})
    store = Store(tmp_path / "s.db")
    run = prepare_eval(store, config, "r")
    _, records = load_conversations(data=path)
    expected = select(records, limit=config.limit, ids=config.ids, themes=config.themes)
    assert _items(store, "r") == [(c.prompt_id, c.model_dump(mode="json")) for c in expected]
    assert run.config["dataset"]["conversations"] == len(expected)
    assert run.config["dataset"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_meta_eval_set_up_stores_the_chosen_rows_in_sample_order(small_pages: int, tmp_path: Path) -> None:
    path = FIXTURES / "meta_eval_small.jsonl"
    _, records = load_meta_eval(data=path)
    config = build_config(
        {"dataset": "meta_eval", "data": str(path), "judge": MODELS["judge"], "model": None}
    )
    config = config.model_copy(update={"limit": len(records) // 2})
    store = Store(tmp_path / "s.db")
    prepare_meta_eval(store, config, "m")
    expected = select(records, limit=config.limit)
    assert _items(store, "m") == [(row_id(r), r.model_dump(mode="json")) for r in expected]


def test_a_baseline_set_up_stores_the_chosen_completions(
    small_pages: int, write_file: WriteFile, tmp_path: Path
) -> None:
    rows = [_row(i, group="Group 1" if i % 4 else "Group 2") for i in range(40)]
    path = write_file("data.jsonl", _jsonl(rows))
    config = RunConfig.model_validate(
        {**build_config(MODELS, {"data": str(path)}).model_dump(), "model": None, "limit": 12, "n_repeats": 2}
        | {"completions": PHYSICIAN, "group": "Group 1"}
    )
    store = Store(tmp_path / "s.db")
    run, selection = prepare_baseline(store, config, "b", find_group("1"), open_conversations(data=path))
    expected = select([r for r in load_conversations(data=path)[1] if int(r.prompt_id[2:]) % 4], limit=12)
    assert _items(store, "b") == [(c.prompt_id, c.model_dump(mode="json")) for c in expected]
    assert (selection.matching, selection.skipped, selection.completions) == (30, 0, 30)
    answers = store.sample_progress(run.id)
    assert set(answers) == {(c.prompt_id, r) for c in expected for r in (0, 1)}


# --- memory: the set-up holds a page, not the file -----------------------------------------------


def test_the_set_up_peak_is_a_fraction_of_the_list_path(write_file: WriteFile, tmp_path: Path) -> None:
    """tracemalloc peak of `prepare_eval` on 5,000 small conversations (4.4 MB) against the same
    set-up made from the list API (every record parsed, then chosen, then stored, as before)."""
    path = write_file("data.jsonl", _jsonl(_rows(5000)))
    config = build_config(MODELS, {"data": str(path), "limit": 4900})

    def list_path(store: Store) -> None:
        _, records = load_conversations(data=path)
        chosen = select(records, limit=config.limit)
        store.create_run(
            "old", "eval", {"run": {}}, ((c.prompt_id, c.model_dump(mode="json")) for c in chosen)
        )

    setups = {"paged": lambda s: prepare_eval(s, config, "new"), "list": list_path}
    for label, setup in setups.items():  # once untraced: the modules a set-up imports are not counted
        setup(Store(tmp_path / f"warm-{label}.db"))
    peaks = {}
    for label, setup in setups.items():
        store = Store(tmp_path / f"{label}.db")
        tracemalloc.start()
        setup(store)
        peaks[label] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        store.close()
    assert peaks["list"] > 20_000_000, peaks  # every record held (~27 MB): far above the bound below
    assert peaks["paged"] < 12_000_000, peaks  # (~7 MB) a page of lines and records, 500 rows to insert
