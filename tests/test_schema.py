"""Parsing HealthBench JSONL: every malformed input is a DataError naming file, line and field."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from healthbench.data import jsonl as jsonl_reader
from healthbench.data.professional import read_conversations
from healthbench.data.schema import Conversation, MetaEvalRecord, RubricItem
from healthbench.data.shapes import ClassicLine, MetaLine, ProfessionalLine
from healthbench.data.sources import read_records
from healthbench.errors import DataError

WriteFile = Callable[[str, str | bytes], Path]


def conversation_line(**changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "prompt": [{"role": "user", "content": "Is it safe to take ibuprofen with a cold?"}],
        "prompt_id": "p-1",
        "rubrics": [
            {"criterion": "Mentions stomach upset.", "points": 5, "tags": ["axis:accuracy"]},
            {"criterion": "Recommends a dose above the maximum.", "points": -8, "tags": ["axis:accuracy"]},
        ],
        "example_tags": ["theme:hedging"],
    }
    record.update(changes)
    return record


def meta_line(**changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "prompt": [{"role": "user", "content": "Is it safe to take ibuprofen with a cold?"}],
        "completion": "Usually yes, with food.",
        "rubric": "Mentions stomach upset.",
        "category": "cluster:hedging_example",
        "binary_labels": [True, False],
        "anonymized_physician_ids": ["doc-1", "doc-2"],
        "prompt_id": "p-1",
        "completion_id": "c-1",
    }
    record.update(changes)
    return record


def jsonl(*records: dict[str, Any] | str) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records)


def read_error(path: Path, record_type: type = Conversation) -> str:
    with pytest.raises(DataError) as caught:
        read_records(path, record_type)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_valid_file_parses_with_types_kept(write_file: WriteFile) -> None:
    path = write_file("ok.jsonl", jsonl(conversation_line(), conversation_line(prompt_id="p-2")))
    records = read_records(path, Conversation)
    assert [r.prompt_id for r in records] == ["p-1", "p-2"]
    assert records[0].rubrics[0].points == 5 and isinstance(records[0].rubrics[0].points, int)
    assert str(records[0].rubrics[1]) == "[-8] Recommends a dose above the maximum."
    assert records[0].themes == ["hedging"]


def test_blank_lines_are_skipped_and_line_numbers_stay_physical(write_file: WriteFile) -> None:
    path = write_file("gaps.jsonl", jsonl(conversation_line(), "", conversation_line(prompt_id="p-1")))
    message = read_error(path)
    assert message.startswith(f"{path}:3 field 'prompt_id': duplicate 'p-1' (first seen on line 1)")


def test_bad_json_names_file_and_line(write_file: WriteFile) -> None:
    path = write_file("bad.jsonl", jsonl(conversation_line(), '{"prompt": [', conversation_line()))
    message = read_error(path)
    assert message.startswith(f"{path}:2: invalid JSON")


def test_non_object_line(write_file: WriteFile) -> None:
    path = write_file("list.jsonl", jsonl("[1, 2]"))
    assert read_error(path) == f"{path}:1: expected a JSON object, got a list"


def test_missing_field_names_the_field(write_file: WriteFile) -> None:
    record = conversation_line()
    del record["prompt_id"]
    path = write_file("missing.jsonl", jsonl(conversation_line(prompt_id="p-0"), record))
    assert read_error(path) == f"{path}:2 field 'prompt_id': missing field"


def test_points_as_string_is_a_type_error(write_file: WriteFile) -> None:
    record = conversation_line()
    record["rubrics"][1]["points"] = "10"
    path = write_file("points.jsonl", jsonl(record))
    assert read_error(path) == f"{path}:1 field 'rubrics.1.points': expected a number, got a string"


def test_points_out_of_range(write_file: WriteFile) -> None:
    record = conversation_line()
    record["rubrics"][0]["points"] = 11
    path = write_file("range.jsonl", jsonl(record))
    assert read_error(path).startswith(f"{path}:1 field 'rubrics.0.points': ")


def test_empty_rubric(write_file: WriteFile) -> None:
    path = write_file("empty-rubric.jsonl", jsonl(conversation_line(rubrics=[])))
    assert read_error(path) == f"{path}:1 field 'rubrics': the rubric is empty"


def test_rubric_without_positive_points(write_file: WriteFile) -> None:
    rubric = [
        {"criterion": "Is rude.", "points": -5, "tags": []},
        {"criterion": "x", "points": 0, "tags": []},
    ]
    path = write_file("negative.jsonl", jsonl(conversation_line(rubrics=rubric)))
    message = read_error(path)
    assert message.startswith(f"{path}:1 field 'rubrics': the rubric has no criterion with positive points")


def test_empty_prompt(write_file: WriteFile) -> None:
    path = write_file("no-prompt.jsonl", jsonl(conversation_line(prompt=[])))
    assert read_error(path) == f"{path}:1 field 'prompt': the conversation has no messages"


def test_duplicate_prompt_id(write_file: WriteFile) -> None:
    path = write_file("dup.jsonl", jsonl(conversation_line(), conversation_line()))
    assert read_error(path) == f"{path}:2 field 'prompt_id': duplicate 'p-1' (first seen on line 1)"


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_empty_file(write_file: WriteFile, content: str) -> None:
    path = write_file("empty.jsonl", content)
    assert read_error(path) == f"{path}: the file contains no records"


def test_non_utf8_bytes_name_the_line(write_file: WriteFile) -> None:
    good = json.dumps(conversation_line()).encode()
    path = write_file("latin1.jsonl", good + b"\n" + b'{"prompt_id": "caf\xe9"}\n')
    assert read_error(path) == f"{path}:2: not valid UTF-8 (byte 19)"  # 18 ASCII bytes, then 0xE9


def test_missing_file() -> None:
    assert read_error(Path("/nonexistent/healthbench.jsonl")).startswith("/nonexistent/healthbench.jsonl: ")


@pytest.mark.parametrize(
    ("changes", "field", "reason"),
    [
        (
            {"binary_labels": [True, False], "anonymized_physician_ids": ["doc-1"]},
            "anonymized_physician_ids",
            "binary_labels has 2 labels but anonymized_physician_ids has 1 ids",
        ),
        ({"binary_labels": [], "anonymized_physician_ids": []}, "binary_labels", "binary_labels is empty"),
        ({"binary_labels": [1, 0]}, "binary_labels.0", "expected a boolean, got a number"),
        ({"binary_labels": ["yes", "no"]}, "binary_labels.0", "expected a boolean, got a string"),
    ],
)
def test_meta_eval_label_errors(
    write_file: WriteFile, changes: dict[str, Any], field: str, reason: str
) -> None:
    path = write_file("meta.jsonl", jsonl(meta_line(completion_id="c-0"), meta_line(**changes)))
    assert read_error(path, MetaEvalRecord) == f"{path}:2 field '{field}': {reason}"


def test_meta_eval_valid_and_duplicate_rows(write_file: WriteFile) -> None:
    path = write_file("meta-ok.jsonl", jsonl(meta_line(), meta_line(rubric="Another criterion.")))
    rows = read_records(path, MetaEvalRecord)
    assert [r.binary_labels for r in rows] == [[True, False], [True, False]]
    duplicate = write_file("meta-dup.jsonl", jsonl(meta_line(), meta_line()))
    assert read_error(duplicate, MetaEvalRecord).startswith(f"{duplicate}:2 field 'prompt_id': duplicate")


def test_rubric_item_keeps_int_and_float_points() -> None:
    assert str(RubricItem(criterion="c", points=7, tags=[])) == "[7] c"
    assert str(RubricItem(criterion="c", points=2.5, tags=[])) == "[2.5] c"


# --- the one reader: bytes as paths, the batch path as the line-by-line path --------------------------

FIXTURES = Path(__file__).parent / "fixtures"


def test_bytes_read_as_the_file_and_errors_name_them(write_file: WriteFile) -> None:
    text = jsonl(conversation_line(), conversation_line(prompt_id="p-2"))
    path = write_file("ok.jsonl", text)
    assert read_records(text.encode(), Conversation) == read_records(path, Conversation)
    bad = jsonl(conversation_line(), conversation_line(rubrics=[]))
    with pytest.raises(DataError) as caught:
        read_records(bad.encode(), Conversation, name="data_jsonl")
    assert str(caught.value) == "data_jsonl:2 field 'rubrics': the rubric is empty"
    with pytest.raises(DataError, match=r"^<bytes>:1: invalid JSON"):
        read_records(b"{oops\n", Conversation)


@pytest.mark.parametrize(
    ("file", "shape"),
    [
        ("small_dataset.jsonl", ClassicLine),
        ("professional_small.jsonl", ProfessionalLine),
        ("meta_eval_small.jsonl", MetaLine),
    ],
)
def test_the_batch_decode_equals_the_line_by_line_path(file: str, shape: type) -> None:
    data = (FIXTURES / file).read_bytes()
    batch = jsonl_reader._decode_valid(data, shape, set())
    assert batch is not None and batch == list(jsonl_reader._lines_one_by_one(data, shape, file))
    assert [type(r.points) for line in batch for r in getattr(line, "rubrics", [])] == [
        type(r.points)
        for line in list(jsonl_reader._lines_one_by_one(data, shape, file))
        for r in getattr(line, "rubrics", [])
    ]


@pytest.mark.shared
def test_real_files_take_the_batch_path(shared_data: Path) -> None:
    for name, shape in (
        ("oss_eval_sample527.jsonl", ClassicLine),
        ("consensus_sample104.jsonl", ClassicLine),
        ("meta_eval_sample5.jsonl", MetaLine),
    ):
        data = (shared_data / "eval" / name).read_bytes()
        batch = jsonl_reader._decode_valid(data, shape, set())
        assert batch is not None and batch == list(jsonl_reader._lines_one_by_one(data, shape, name))


def test_invalid_json_names_the_line_and_column(write_file: WriteFile) -> None:
    good = json.dumps(conversation_line())
    bad = good.replace('"example_tags"', '"ideal_completions_data": {"x": NaN}, "example_tags"')
    path = write_file("nan.jsonl", good.replace('"p-1"', '"p-0"') + "\n" + bad + "\n")
    column = bad.index("NaN") + 1
    assert read_error(path) == f"{path}:2: invalid JSON (invalid character at column {column})"


def test_professional_rules_name_the_files_fields(write_file: WriteFile) -> None:
    task = {
        "id": "t",
        "conversation": {"messages": []},
        "rubric_items": [{"criterion_text": " ", "points": 5}],
        "use_case": "consult",
        "type": "good_faith",
        "difficulty": "typical",
        "specialty": "general",
    }
    path = write_file("pro.jsonl", json.dumps(task) + "\n")
    with pytest.raises(DataError) as caught:
        read_conversations(path)
    assert str(caught.value) == f"{path}:1 field 'conversation.messages': the conversation has no messages"
    task["conversation"] = {"messages": [{"role": "user", "content": "q"}]}
    path = write_file("pro.jsonl", json.dumps(task) + "\n")
    with pytest.raises(DataError) as caught:
        read_conversations(path)
    assert str(caught.value) == f"{path}:1 field 'rubric_items.0.criterion_text': the criterion is empty"


def test_records_made_from_read_lines_are_what_model_construct_makes() -> None:
    """`schema._trusted` fills a record's slots itself (model_construct's work, without its per-field
    checks): a pydantic release that adds a slot makes this test fail, not the records."""
    from pydantic import BaseModel

    from healthbench.data import schema

    assert set(BaseModel.__slots__) == {
        "__dict__",
        "__pydantic_fields_set__",
        "__pydantic_extra__",
        "__pydantic_private__",
    }
    fields = {"criterion": "c", "points": 3.0, "tags": ["axis:accuracy"]}
    made = schema._trusted(schema.RubricItem, dict(fields))
    built = schema.RubricItem.model_construct(**fields)
    assert made == built and made.model_dump() == built.model_dump()
    assert made.model_fields_set == built.model_fields_set == set(fields)
    assert made.model_copy(update={"points": 1.0}).points == 1.0
