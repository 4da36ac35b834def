"""The one `_allresults.json` reader (msgspec, one schema per file): its columns view gives exactly
the numbers of its samples view, both refuse a bad file with the same file/example/field error, and
it reads bytes as it reads paths. The columnar dataset index hands unusual datasets to the
line-numbered reader."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from synthetic_runs import conversations, graded

from healthbench.data.rubric_index import read_rubric_index
from healthbench.errors import DataError
from healthbench.results.allresults_columns import Answer, Example, decode_allresults, read_columns
from healthbench.results.rescore import rescore_allresults
from healthbench.results.simple_evals import load_allresults, write_allresults
from healthbench.scoring.run_score import ScoringOptions, score_run

OPTIONS = ScoringOptions(n_resamples=200, seed=3)


@pytest.fixture
def run_files(tmp_path: Path) -> tuple[Path, Path]:
    convs = conversations(40)
    samples = graded(convs, seed=4, ungraded=0.02)
    file = write_allresults(tmp_path / "run_allresults.json", samples, score_run(samples, OPTIONS))
    dataset = tmp_path / "dataset.jsonl"
    dataset.write_text("".join(c.model_dump_json() + "\n" for c in convs))
    return file, dataset


def test_both_readers_give_the_same_metrics(run_files: tuple[Path, Path]) -> None:
    file, dataset = run_files
    fast = rescore_allresults(file, options=OPTIONS, data=[dataset], with_samples=False)
    slow = rescore_allresults(file, options=OPTIONS, data=[dataset])
    assert not fast.samples and slow.samples  # the two paths were taken
    assert fast.run_score.metrics() == slow.run_score.metrics()
    assert fast.run_score.per_sample == slow.run_score.per_sample
    assert (fast.score, fast.metrics) == (slow.score, slow.metrics)
    assert (fast.untagged, fast.n_samples, fast.agreement) == (slow.untagged, slow.n_samples, slow.agreement)
    assert any(k.startswith("theme:") for k in fast.run_score.stats)
    untagged = rescore_allresults(file, options=OPTIONS, with_samples=False)
    assert untagged.untagged == 40 and not any(k.startswith("theme:") for k in untagged.run_score.stats)
    length = ScoringOptions(n_resamples=10, length_penalty=0.1, length_center=20.0)
    assert (
        rescore_allresults(file, options=length, with_samples=False).run_score.metrics()
        == rescore_allresults(file, options=length).run_score.metrics()
    )


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
        read_columns(file)
    for with_samples in (False, True):  # the one reader: the same error in both views
        with pytest.raises(DataError, match=pattern):
            rescore_allresults(file, options=OPTIONS, data=[dataset], with_samples=with_samples)


def test_a_rubric_that_differs_from_the_dataset_is_refused(run_files: tuple[Path, Path]) -> None:
    file, dataset = run_files
    edit(file, lambda d: d["metadata"]["example_level_metadata"][5]["rubric_items"][0].update(criterion="x"))
    with pytest.raises(DataError, match="differs from the dataset's"):
        rescore_allresults(file, options=OPTIONS, data=[dataset], with_samples=False)


def test_a_criterion_moved_to_the_previous_example_is_refused(run_files: tuple[Path, Path]) -> None:
    # the file's criteria in the same order overall, but one belongs to another conversation
    file, dataset = run_files

    def move(document: dict) -> None:
        examples = document["metadata"]["example_level_metadata"]
        examples[0]["rubric_items"].append(examples[1]["rubric_items"].pop(0))

    edit(file, move)
    with pytest.raises(DataError, match="differs from the dataset's"):
        rescore_allresults(file, options=OPTIONS, data=[dataset], with_samples=False)


def test_an_empty_criterion_comes_before_any_rubric_error(run_files: tuple[Path, Path]) -> None:
    # criteria are checked example by example while rubrics are compared; the first empty criterion
    # of the file is still named before a rubric error of an earlier example (as in one pass)
    file, dataset = run_files

    def change(document: dict) -> None:
        examples = document["metadata"]["example_level_metadata"]
        examples[2]["rubric_items"][0]["criterion"] = "another criterion"
        examples[9]["rubric_items"][1]["criterion"] = "  "
        examples[0]["prompt_id"] = examples[1]["prompt_id"]  # a repeat with another rubric, first

    edit(file, change)
    field = "metadata.example_level_metadata[9].rubric_items[1].criterion"
    for data in ([dataset], None):
        for with_samples in (False, True):
            with pytest.raises(DataError) as caught:
                rescore_allresults(file, options=OPTIONS, data=data, with_samples=with_samples)
            assert str(caught.value) == f"{file} field '{field}': the criterion is empty"


def test_verdict_codes_are_the_files_criteria_met(run_files: tuple[Path, Path]) -> None:
    file, _ = run_files
    document = json.loads(file.read_text())
    examples = document["metadata"]["example_level_metadata"]
    met = [item["criteria_met"] for example in examples for item in example["rubric_items"]]
    decoded = decode_allresults(file)
    assert decoded.verdicts.tolist() == [{True: 0, False: 1, None: 2}[m] for m in met]
    assert None in met and decoded.verdicts.dtype == np.int8


def test_the_columns_views_skip_explanations_with_the_same_checks(run_files: tuple[Path, Path]) -> None:
    file, _ = run_files
    edit(
        file,
        lambda d: d["metadata"]["example_level_metadata"][4]["rubric_items"][0].update(
            explanation={"a": [1]}
        ),
    )
    full, light = decode_allresults(file), decode_allresults(file, shape=Answer)
    assert isinstance(full.examples[0], Example) and not isinstance(light.examples[0], Example)
    assert not hasattr(light.examples[4].rubric_items[0], "explanation")
    assert full.verdicts.tolist() == light.verdicts.tolist()
    assert [e.prompt_id for e in full.examples] == [e.prompt_id for e in light.examples]
    broken = file.read_bytes().replace(b'{"a": [1]}', b'{"a": [1}', 1)
    for shape in (Example, Answer):  # (a skipped explanation is still read as JSON)
        with pytest.raises(DataError, match="invalid JSON"):
            decode_allresults(broken, shape=shape)


def test_bad_datasets_are_named_by_the_one_reader(run_files: tuple[Path, Path], tmp_path: Path) -> None:
    file, dataset = run_files
    assert len(read_rubric_index([dataset])) == len(dataset.read_text().splitlines())
    lines = dataset.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text("\n".join([lines[0], '{"prompt": []}', *lines[2:]]))
    expected = f"{broken}:2 field 'prompt_id': Field required"
    with pytest.raises(DataError) as caught:
        read_rubric_index([broken])
    assert str(caught.value) == expected
    with pytest.raises(DataError) as caught:
        rescore_allresults(file, options=OPTIONS, data=[broken], with_samples=False)
    assert str(caught.value) == expected  # the same error as the records' path gives
    with pytest.raises(DataError) as caught:
        rescore_allresults(file, options=OPTIONS, data=[broken], with_samples=True)
    assert str(caught.value) == expected
    duplicate = tmp_path / "duplicate.jsonl"
    duplicate.write_text("\n".join([*lines, lines[0]]) + "\n")
    with pytest.raises(DataError, match=rf"duplicate.jsonl:{len(lines) + 1} field 'prompt_id': duplicate"):
        rescore_allresults(file, options=OPTIONS, data=[duplicate], with_samples=False)


@pytest.mark.shared
def test_real_datasets_are_read_by_the_columnar_index(shared_data: Path) -> None:
    # real lines carry ideal_completions_data objects: the fast index must take them, not fall back
    for name in ("oss_eval_sample527.jsonl", "consensus_sample104.jsonl"):
        index = read_rubric_index([shared_data / "eval" / name])
        assert len(index) == sum(1 for _ in (shared_data / "eval" / name).open())


def test_bytes_are_read_as_the_file(run_files: tuple[Path, Path]) -> None:
    file, _ = run_files
    from_path, from_bytes = load_allresults(file), load_allresults(file.read_bytes(), name="upload")
    assert from_bytes.samples == from_path.samples and from_bytes.metrics == from_path.metrics
    assert read_columns(file.read_bytes()).prompt_ids == read_columns(file).prompt_ids
    broken = file.read_bytes().replace(b'"criteria_met": true', b'"criteria_met": "yes"', 1)
    with pytest.raises(DataError, match=r"^upload field 'metadata\.example_level_metadata\[\d+\]"):
        load_allresults(broken, name="upload")
    with pytest.raises(DataError, match=r"^<bytes>:1: invalid JSON"):
        load_allresults(b"{oops")
