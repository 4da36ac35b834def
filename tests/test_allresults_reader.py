"""The one `_allresults.json` reader (msgspec, one schema, one pass of checks): a re-scored file gives the
numbers its samples give, a bad file gets the error naming the file, the example and the field (the
first problem in file order), and bytes read as the file does."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from synthetic_runs import conversations, graded

from healthbench.analysis.inputs import AnswerSamples, load_inputs
from healthbench.data.shapes import ClassicLine
from healthbench.data.sources import join_datasets
from healthbench.errors import DataError
from healthbench.results.rescore import rescore_allresults
from healthbench.results.simple_evals import load_allresults, write_allresults
from healthbench.scoring.run_score import ScoringOptions, score_run
from healthbench.scoring.verdict import Verdict

OPTIONS = ScoringOptions(n_resamples=200, seed=3)


@pytest.fixture
def run_files(tmp_path: Path) -> tuple[Path, Path]:
    convs = conversations(40)
    samples = graded(convs, seed=4, ungraded=0.02)
    file = write_allresults(tmp_path / "run_allresults.json", samples, score_run(samples, OPTIONS))
    dataset = tmp_path / "dataset.jsonl"
    dataset.write_text("".join(c.model_dump_json() + "\n" for c in convs))
    return file, dataset


def test_a_rescored_file_gives_its_samples_numbers(run_files: tuple[Path, Path]) -> None:
    file, dataset = run_files
    rescored = rescore_allresults(file, options=OPTIONS, data=[dataset])
    assert rescored.run_score.metrics() == score_run(rescored.samples, OPTIONS).metrics()
    assert rescored.agreement.equal == rescored.agreement.compared and rescored.agreement.same_score
    assert (rescored.untagged, rescored.n_samples) == (0, 40)
    assert any(k.startswith("theme:") for k in rescored.run_score.stats)
    untagged = rescore_allresults(file, options=OPTIONS)
    assert untagged.untagged == 40 and not any(k.startswith("theme:") for k in untagged.run_score.stats)


def test_a_dataset_of_records_or_of_decoded_lines_joins_alike(run_files: tuple[Path, Path]) -> None:
    """`join_datasets` gives the reader's decoded lines (tags as tuples); records built by hand (tags
    as lists, as docs/interop.md's Python example passes them) join the same file to the same scores."""
    file, dataset = run_files
    lines = join_datasets([dataset], None)
    assert lines is not None
    records = {c.prompt_id: c for c in conversations(40)}
    from_lines, from_records = load_allresults(file, lines), load_allresults(file, records)
    assert isinstance(from_lines.samples[0].conversation, ClassicLine)
    ours, theirs = (score_run(r.samples, OPTIONS).metrics() for r in (from_lines, from_records))
    assert ours == theirs
    assert [json.loads(msgspec.json.encode(line)) for line in lines.values()] == [
        c.model_dump(mode="json") for c in records.values()
    ]  # (what `import --store` keeps of a conversation: the JSON it was read from)


def test_verdicts_are_the_files_criteria_met(run_files: tuple[Path, Path]) -> None:
    file, _ = run_files
    examples = json.loads(file.read_text())["metadata"]["example_level_metadata"]
    met = [item["criteria_met"] for example in examples for item in example["rubric_items"]]
    verdicts = [v for sample in load_allresults(file).samples for v in sample.verdicts]
    assert None in met and verdicts == list(map(Verdict.of, met))


def edit(file: Path, change) -> Path:
    document = json.loads(file.read_text())
    change(document)
    file.write_text(json.dumps(document))
    return file


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: d["metadata"]["example_level_metadata"][2]["rubric_items"][1].update(points="5"),
            "example_level_metadata[2].rubric_items[1].points",
        ),
        (
            lambda d: d["metadata"]["example_level_metadata"][3]["rubric_items"][0].pop("criteria_met"),
            "example_level_metadata[3].rubric_items[0].criteria_met",
        ),
        (
            lambda d: d["metadata"]["example_level_metadata"][1]["prompt"][0].update(content=7),
            "example_level_metadata[1].prompt[0].content",
        ),
        (
            lambda d: d["metadata"]["example_level_metadata"][0].update(completion=[]),
            "example_level_metadata[0].completion",
        ),
    ],
)
def test_bad_files_get_the_precise_error(run_files: tuple[Path, Path], change, message: str) -> None:
    file, dataset = run_files
    edit(file, change)
    pattern = message.replace("[", r"\[").replace("]", r"\]")
    with pytest.raises(DataError, match=pattern):
        rescore_allresults(file, options=OPTIONS, data=[dataset])


def test_a_rubric_that_differs_from_the_dataset_is_refused(run_files: tuple[Path, Path]) -> None:
    file, dataset = run_files
    edit(file, lambda d: d["metadata"]["example_level_metadata"][5]["rubric_items"][0].update(criterion="x"))
    with pytest.raises(DataError, match="differs from the dataset's"):
        rescore_allresults(file, options=OPTIONS, data=[dataset])


def test_a_criterion_moved_to_the_previous_example_is_refused(run_files: tuple[Path, Path]) -> None:
    # the file's criteria in the same order overall, but one belongs to another conversation
    file, dataset = run_files

    def move(document: dict) -> None:
        examples = document["metadata"]["example_level_metadata"]
        examples[0]["rubric_items"].append(examples[1]["rubric_items"].pop(0))

    edit(file, move)
    with pytest.raises(DataError, match="differs from the dataset's"):
        rescore_allresults(file, options=OPTIONS, data=[dataset])


def test_the_first_problem_in_file_order_is_named(run_files: tuple[Path, Path]) -> None:
    file, dataset = run_files

    def change(document: dict) -> None:
        examples = document["metadata"]["example_level_metadata"]
        examples[9]["rubric_items"][1]["criterion"] = "  "
        examples[2]["rubric_items"][0]["criterion"] = "another criterion"
        examples[2]["prompt_id"] = examples[1]["prompt_id"]  # a repeat with another rubric, first

    edit(file, change)
    for data in ([dataset], None):
        with pytest.raises(DataError) as caught:
            rescore_allresults(file, options=OPTIONS, data=data)
        assert str(caught.value).startswith(
            f"{file} field 'metadata.example_level_metadata[2].rubric_items': prompt_id"
        )
    edit(file, lambda d: d["metadata"]["example_level_metadata"][2].update(prompt_id="another"))
    with pytest.raises(DataError) as caught:
        rescore_allresults(file, options=OPTIONS)
    field = "metadata.example_level_metadata[9].rubric_items[1].criterion"
    assert str(caught.value) == f"{file} field '{field}': the criterion is empty"


def test_bad_datasets_are_named_by_the_one_reader(run_files: tuple[Path, Path], tmp_path: Path) -> None:
    file, dataset = run_files
    lines = dataset.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([lines[0], '{"prompt": []}', *lines[2:]]))
    with pytest.raises(DataError) as caught:
        rescore_allresults(file, options=OPTIONS, data=[broken])
    assert str(caught.value) == f"{broken}:2 field 'prompt_id': missing field"
    duplicate = tmp_path / "duplicate.jsonl"
    duplicate.write_text("\n".join([*lines, lines[0]]) + "\n")
    with pytest.raises(DataError, match=rf"duplicate.jsonl:{len(lines) + 1} field 'prompt_id': duplicate"):
        rescore_allresults(file, options=OPTIONS, data=[duplicate])


def test_type_errors_read_alike_in_both_formats(run_files: tuple[Path, Path], tmp_path: Path) -> None:
    file, dataset = run_files
    edit(file, lambda d: d["metadata"]["example_level_metadata"][2]["rubric_items"][1].update(points="5"))
    with pytest.raises(DataError) as caught:
        load_allresults(file)
    field = "metadata.example_level_metadata[2].rubric_items[1].points"
    assert str(caught.value) == f"{file} field '{field}': expected a number, got a string"
    row = json.loads(dataset.read_text().splitlines()[0])
    row["rubrics"][1]["points"] = "5"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(row) + "\n")
    with pytest.raises(DataError) as caught:
        rescore_allresults(file, options=OPTIONS, data=[bad])
    assert str(caught.value) == f"{bad}:1 field 'rubrics.1.points': expected a number, got a string"


def test_bytes_are_read_as_the_file(run_files: tuple[Path, Path]) -> None:
    file, _ = run_files
    from_path, from_bytes = load_allresults(file), load_allresults(file.read_bytes(), name="upload")
    assert from_bytes.samples == from_path.samples and from_bytes.metrics == from_path.metrics
    broken = file.read_bytes().replace(b'"criteria_met": true', b'"criteria_met": "yes"', 1)
    with pytest.raises(DataError, match=r"^upload field 'metadata\.example_level_metadata\[\d+\]"):
        load_allresults(broken, name="upload")
    with pytest.raises(DataError, match=r"^<bytes>:1: invalid JSON"):
        load_allresults(b"{oops")


def test_read_without_texts_the_same_answers_and_numbers(run_files: tuple[Path, Path]) -> None:
    """``texts=False`` (what `analyze` and a plain `import` read): the same conversations, verdicts,
    repeats and scores; no completion, explanation, prompt messages nor usage, and their rules are not
    checked (a file with two completion messages is read)."""
    file, dataset = run_files
    lines = join_datasets([dataset], None)
    for data in (lines, None):
        full, lean = (load_allresults(file, data, texts=texts) for texts in (True, False))
        assert (lean.score, lean.metrics) == (full.score, full.metrics)
        assert [(s.conversation, s.verdicts, s.repeat) for s in lean.samples] == [
            (s.conversation, s.verdicts, s.repeat) for s in full.samples
        ]
        assert {(s.completion, s.explanations, s.prompt_messages, s.usage) for s in lean.samples} == {
            ("", (), None, None)
        }
        assert score_run(lean.samples, OPTIONS).metrics() == score_run(full.samples, OPTIONS).metrics()
    two = edit(
        file,
        lambda d: d["metadata"]["example_level_metadata"][1]["completion"].append(
            {"role": "assistant", "content": "again"}
        ),
    )
    with pytest.raises(DataError, match="expected exactly one completion message"):
        load_allresults(two)
    assert len(load_allresults(two, texts=False).samples) == 40
    with pytest.raises(ValueError, match="length adjustment reads the completions"):
        rescore_allresults(file, texts=False, options=ScoringOptions(length_center=1000, length_penalty=0.1))


def test_files_read_as_columns_against_one_dataset(run_files: tuple[Path, Path], tmp_path: Path) -> None:
    """`analyze`'s read (`load_inputs` without texts: columns, the dataset's rubrics made once for every
    file): the samples `load_allresults` gives, and a later file's differing rubric is still refused."""
    file, dataset = run_files
    lines = join_datasets([dataset], None)
    second = tmp_path / "second_allresults.json"
    second.write_bytes(file.read_bytes())
    runs = load_inputs([file, second], data=lines, texts=False)
    assert isinstance(runs[0].samples, AnswerSamples)
    expected = load_allresults(file, lines, texts=False).samples
    assert [list(run.samples) for run in runs] == [expected, expected]
    assert runs[1].samples == tuple(expected)
    edit(second, lambda d: d["metadata"]["example_level_metadata"][5]["rubric_items"][0].update(points=-7))
    field = r"metadata\.example_level_metadata\[5\]\.rubric_items"
    with pytest.raises(
        DataError, match=f"^{second} field '{field}': the rubric stored for prompt_id conv-0005 "
    ):
        load_inputs([file, second], data=lines, texts=False)
