"""`healthbench.analysis.inputs`: files, folders, stored runs and patterns become `LoadedRun`s."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.process import fake_server_process
from synthetic_runs import conversations, graded

from healthbench.analysis.inputs import FileName, load_inputs, parse_file_name
from healthbench.config import build_config
from healthbench.errors import DataError, RunError
from healthbench.results.simple_evals import write_allresults
from healthbench.runner.run import run_eval
from healthbench.scoring.run_score import ScoringOptions, score_run
from healthbench.store import Store


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "healthbench_gpt-4o-mini_20260113_121418_allresults.json",
            FileName("gpt-4o-mini", "20260113_121418", "full"),
        ),
        (
            "healthbench_consensus_gpt-4o-mini_20260113_121422_tta_allresults.json",
            FileName("gpt-4o-mini", "20260113_121422_tta", "consensus"),
        ),
        (
            "healthbench_hard_meta-llama_Llama-4_Scout_20251023_153707_allresults.json",
            FileName("meta-llama_Llama-4_Scout", "20251023_153707", "hard"),
        ),
        ("my_run_allresults.json", FileName("my_run", "my_run", None)),
    ],
)
def test_file_names(name: str, expected: FileName) -> None:
    assert parse_file_name(Path("/some/dir") / name) == expected


def write_run(folder: Path, name: str, samples) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_allresults(folder / name, samples, score_run(samples, ScoringOptions(n_resamples=0)))


def test_folders_and_files_in_order_with_dataset_tags(tmp_path: Path) -> None:
    convs = conversations(6)
    write_run(tmp_path / "runs", "healthbench_model-x_20260101_000002_allresults.json", graded(convs, seed=2))
    write_run(tmp_path / "runs", "healthbench_model-x_20260101_000001_allresults.json", graded(convs, seed=1))
    (tmp_path / "runs" / "notes.txt").write_text("not a run")
    single = write_run(
        tmp_path, "healthbench_hard_model-y_20260102_000000_allresults.json", graded(convs[:3])
    )
    runs = load_inputs([tmp_path / "runs", single], data={c.prompt_id: c for c in convs}, data_sha256="abc")
    assert [(r.model, r.run_id, r.dataset_variant) for r in runs] == [
        ("model-x", "20260101_000001", "full"),
        ("model-x", "20260101_000002", "full"),
        ("model-y", "20260102_000000", "hard"),
    ]
    expected = graded(convs, seed=1)
    assert [(s.conversation, s.verdicts) for s in runs[0].samples] == [
        (s.conversation, s.verdicts) for s in expected
    ]
    assert runs[0].dataset_sha256 == "abc" and runs[0].judge is None
    assert runs[0].reported["overall_score:n_samples"] == 6
    without = load_inputs([single])[0]
    assert without.samples[0].conversation.example_tags == []  # no dataset: no themes


def test_overrides_and_duplicates(tmp_path: Path) -> None:
    path = write_run(tmp_path, "healthbench_m_20260101_000000_allresults.json", graded(conversations(3)))
    run = load_inputs([path], model="renamed", run_id="r1")[0]
    assert (run.model, run.run_id) == ("renamed", "r1")
    with pytest.raises(DataError, match="are both model 'm' run '20260101_000000'"):
        load_inputs([path, path])
    with pytest.raises(DataError, match="--run-id names one run, but the inputs hold 2 runs"):
        load_inputs([path, tmp_path], run_id="x")


def test_bad_inputs_are_one_line_errors(tmp_path: Path) -> None:
    path = write_run(tmp_path, "healthbench_m_20260101_000000_allresults.json", graded(conversations(3)))
    truncated = tmp_path / "healthbench_t_20260101_000000_allresults.json"
    truncated.write_bytes(path.read_bytes()[:-200])
    other_eval = tmp_path / "mmlu_gpt-4o_allresults.json"
    other_eval.write_text(
        '{"score": 0.8, "metrics": {}, "metadata": {"example_level_metadata": [{"answer": "A"}]}}'
    )
    cases = [
        (tmp_path / "missing.json", "no such file or folder"),
        (tmp_path / "empty", "no *_allresults.json file in this folder"),
        (truncated, "invalid JSON"),
        (other_eval, "example_level_metadata[0]"),
    ]
    (tmp_path / "empty").mkdir()
    for spec, message in cases:
        with pytest.raises(DataError, match=re.escape(message)) as info:
            load_inputs([spec])
        assert "\n" not in str(info.value) and str(spec) in str(info.value)
    with pytest.raises(DataError, match="no runs to analyse"):
        load_inputs([])


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Store:
    store = Store(tmp_path_factory.mktemp("store") / "runs.db")
    with fake_server_process() as url, fake_server_process() as other_url:
        for name, model, judge_url in (
            ("base-1", "cand-a", url),
            ("base-2", "cand-a", url),
            ("other", "cand-b", url),
            ("other-judge", "cand-a", other_url),  # another fake judge of the same model name
        ):
            config = build_config(
                {
                    "model": {"spec": model, "base_url": url},
                    "judge": {"spec": "fake-judge", "base_url": judge_url},
                }
            )
            run_eval(config, store=store, name=name)
    return store


def test_stored_runs_by_name_and_pattern(stored: Store) -> None:
    runs = load_inputs(["base-*", "other"], store=stored)
    assert [(r.model, r.run_id, r.source) for r in runs] == [
        ("cand-a", "base-1", "store:base-1"),
        ("cand-a", "base-2", "store:base-2"),
        ("cand-b", "other", "store:other"),
    ]
    first = runs[0]
    assert first.judge == "fake-judge" and first.dataset_variant == "demo"
    assert first.grader_template_sha256 is not None and len(first.grader_template_sha256) == 64
    assert first.dataset_sha256 is not None and len(first.samples) == 8
    assert first.samples[0].conversation.example_tags  # stored runs keep their tags
    with pytest.raises(RunError, match=r"no eval run in .* matches 'nothing-\*'"):
        load_inputs(["nothing-*"], store=stored)
    with pytest.raises(RunError, match="no run named 'nothing'"):
        load_inputs(["nothing"], store=stored)


def test_a_judge_of_the_same_name_at_another_endpoint_warns_in_analyze_and_compare(stored: Store) -> None:
    """The judge's identity is the full grading setup (model, endpoint, settings, grader prompt,
    profile), as `results --correct-with` checks it: the same model name is not the same judge."""
    from healthbench.analysis.analyze import setting_warnings
    from healthbench.analysis.compare import setup_warnings

    same = load_inputs(["base-1", "base-2"], store=stored)
    assert same[0].grading_setup == same[1].grading_setup is not None
    assert setting_warnings(same) == [] and setup_warnings(*same) == []
    runs = load_inputs(["base-1", "other-judge"], store=stored)
    assert runs[0].judge == runs[1].judge == "fake-judge"
    expected = "the runs used different judge setups (judge endpoint differ: "
    assert any(
        w.startswith(expected + "cand-a/base-1 vs cand-a/other-judge)") for w in setting_warnings(runs)
    )
    assert any(w.startswith(expected + "A vs B)") for w in setup_warnings(*runs))
