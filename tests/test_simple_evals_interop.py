"""Real simple-evals outputs: our scoring reproduces their numbers, and import/export round-trips.

Uses ../shared/data/healthbench (skipped when absent): 12 gpt-4o-mini ``_allresults.json`` files
(full / hard / consensus), two dataset fragments, and two Llama-4 metric summaries.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from healthbench.data.schema import Conversation, RubricItem
from healthbench.data.sources import read_records
from healthbench.errors import DataError
from healthbench.results.metrics_out import write_metrics
from healthbench.results.simple_evals import allresults_metrics, read_allresults, write_allresults
from healthbench.scoring.rubric import OVERALL
from healthbench.scoring.run_score import GradedSample, ScoringOptions, score_run

RESULTS_DIR = "results/simple-evals-gpt-4o-mini"
SUMMARIES_DIR = "results/llama-4-summaries"
EXAMPLE_TAGS = ("theme:", "physician_agreed_category:")
TOLERANCE = 1e-12
ConversationFactory = Callable[..., Conversation]
SampleFactory = Callable[..., GradedSample]


def _names(folder: str, pattern: str) -> list[str]:
    # Collected at import time; when ../shared is absent one placeholder runs and skips.
    directory = Path(__file__).resolve().parents[2] / "shared" / "data" / "healthbench" / folder
    return sorted(p.name for p in directory.glob(pattern)) or ["(shared data absent)"]


RESULT_FILES = _names(RESULTS_DIR, "*_allresults.json")
SUMMARY_FILES = _names(SUMMARIES_DIR, "*.json")


def variant_of(name: str) -> str:
    for variant in ("consensus", "hard"):
        if name.startswith(f"healthbench_{variant}_"):
            return variant
    return "full"


def is_tag_key(key: str) -> bool:
    return key.startswith(EXAMPLE_TAGS)


def mean_keys(metrics: dict[str, Any]) -> list[str]:
    """The metrics themselves: keys with a ``:n_samples`` sibling (not the std / CI / count keys)."""
    return [k for k in metrics if f"{k}:n_samples" in metrics]


@pytest.fixture(scope="module")
def fragments(shared_data: Path) -> tuple[list[Conversation], list[Conversation]]:
    full = read_records(shared_data / "eval" / "oss_eval_sample527.jsonl", Conversation)
    consensus = read_records(shared_data / "eval" / "consensus_sample104.jsonl", Conversation)
    return full, consensus


def as_consensus(conversation: Conversation) -> Conversation:
    """A full-set line as the consensus file writes it: only its level:cluster criteria."""
    cluster = [item for item in conversation.rubrics if "level:cluster" in item.tags]
    return conversation.model_copy(update={"rubrics": cluster})


@pytest.fixture(scope="module")
def datasets(fragments: tuple[list[Conversation], list[Conversation]]) -> dict[str, dict[str, Conversation]]:
    """Per variant, the conversations we have for it, by prompt_id.

    full: the 527 real full-set lines. hard: the same lines (a hard line is identical to its full
    line). consensus: the 104 real consensus lines, plus full-set lines reduced to their level:cluster
    criteria (how the consensus file is derived; checked on the overlap by a test below).
    """
    full, consensus = fragments
    by_id = {c.prompt_id: c for c in full}
    derived = {
        c.prompt_id: as_consensus(c) for c in full if any("level:cluster" in i.tags for i in c.rubrics)
    }
    return {"full": by_id, "hard": by_id, "consensus": {**derived, **{c.prompt_id: c for c in consensus}}}


@pytest.fixture
def result_file(shared_data: Path, request: pytest.FixtureRequest) -> Path:
    return shared_data / RESULTS_DIR / request.param


def load(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def test_the_twelve_result_files_are_there(shared_data: Path) -> None:
    assert len(list((shared_data / RESULTS_DIR).glob("*_allresults.json"))) == 12
    assert {variant_of(name) for name in RESULT_FILES} == {"full", "hard", "consensus"}


def test_consensus_lines_are_full_lines_reduced_to_cluster_criteria(
    fragments: tuple[list[Conversation], list[Conversation]],
) -> None:
    full, consensus = fragments
    by_id = {c.prompt_id: c for c in full}
    overlap = [c for c in consensus if c.prompt_id in by_id]
    assert overlap, "the fragments share no prompt"
    for line in overlap:
        derived = as_consensus(by_id[line.prompt_id])
        assert (derived.rubrics, derived.example_tags) == (line.rubrics, line.example_tags)


@pytest.mark.parametrize("result_file", RESULT_FILES, indirect=True)
def test_metrics_without_example_tags_are_reproduced_exactly(result_file: Path) -> None:
    raw = load(result_file)
    samples = read_allresults(result_file)
    result = score_run(samples, ScoringOptions(n_resamples=1000, seed=0))
    ours = result.metrics()
    stored = {k: v for k, v in raw["metrics"].items() if not is_tag_key(k)}
    for key, value in stored.items():
        if key.endswith(":n_samples"):
            assert ours[key] == value, key
        elif key.endswith(":bootstrap_std"):
            # random on both sides (theirs unseeded): only a loose check that it is the same statistic
            mine = ours[key]
            assert isinstance(mine, float)
            if value < 1e-9:
                assert mine < 1e-9, key
            else:
                assert 0.5 <= mine / value <= 2.0, (key, mine, value)
        else:
            assert abs(ours[key] - value) <= TOLERANCE, (key, ours[key], value)
    assert abs(ours["score"] - raw["score"]) <= TOLERANCE
    # no key of ours is missing from theirs or the other way round, and the order is simple-evals'
    ours_layout = [k for k in allresults_metrics(result)[1] if not is_tag_key(k)]
    assert ours_layout == list(stored)
    # every example's own score too
    examples = raw["metadata"]["example_level_metadata"]
    assert [m[OVERALL] if m else None for m in result.per_sample] == [e["score"] for e in examples]


@pytest.mark.parametrize("result_file", RESULT_FILES, indirect=True)
def test_example_tag_metrics_where_the_dataset_covers_them(
    result_file: Path, datasets: dict[str, dict[str, Conversation]]
) -> None:
    # The file stores no example tags; we only have the dataset lines of some of its prompts. A
    # theme/category key is comparable only when every example carrying it is joined. Uncovered
    # examples' tags are unknown, but the file states how many examples carry the key
    # (`key:n_samples`): when the joined examples carrying it are that many, no uncovered example
    # can carry it, so the key's population is fully known and its mean must match exactly.
    conversations = datasets[variant_of(result_file.name)]
    raw = load(result_file)
    samples = read_allresults(result_file, conversations, allow_missing=True)
    ours = score_run(samples, ScoringOptions(n_resamples=0)).metrics()
    compared = []
    for key in (k for k in mean_keys(raw["metrics"]) if is_tag_key(k)):
        carrying = sum(1 for s in samples if key in s.conversation.example_tags)
        stored_n = raw["metrics"][f"{key}:n_samples"]
        assert carrying <= stored_n, key  # the join never puts a tag on an example that lacks it
        if carrying == stored_n:
            assert ours[f"{key}:n_samples"] == stored_n
            assert abs(ours[key] - raw["metrics"][key]) <= TOLERANCE, key
            compared.append(key)
    assert compared, "no theme/category key is fully covered by the shared datasets"
    assert {k for k in mean_keys(ours) if is_tag_key(k)} <= set(raw["metrics"])


def test_joining_the_wrong_variant_is_refused(
    shared_data: Path, datasets: dict[str, dict[str, Conversation]]
) -> None:
    consensus_run = next(n for n in RESULT_FILES if variant_of(n) == "consensus")
    path = shared_data / RESULTS_DIR / consensus_run
    with pytest.raises(DataError, match="differs from the dataset's"):
        read_allresults(path, datasets["full"], allow_missing=True)
    with pytest.raises(DataError, match=r"prompt_id\(s\) are not in the dataset given"):
        read_allresults(path, datasets["consensus"])


@pytest.mark.parametrize("result_file", RESULT_FILES, indirect=True)
def test_round_trip(result_file: Path, tmp_path: Path, datasets: dict[str, dict[str, Conversation]]) -> None:
    conversations = datasets[variant_of(result_file.name)]
    raw = load(result_file)
    samples = read_allresults(result_file, conversations, allow_missing=True)
    options = ScoringOptions(n_resamples=200, seed=7)
    result = score_run(samples, options)
    exported = write_allresults(tmp_path / "export_allresults.json", samples, result, html=True)
    again = read_allresults(exported, conversations, allow_missing=True)
    assert again == samples
    assert score_run(again, options).metrics() == result.metrics()

    written = load(exported)
    assert abs(written["score"] - raw["score"]) <= TOLERANCE
    for key in (k for k in raw["metrics"] if not is_tag_key(k) and not k.endswith(":bootstrap_std")):
        assert abs(written["metrics"][key] - raw["metrics"][key]) <= TOLERANCE, key
    assert len(written["htmls"]) == len(samples) and written["convos"] == raw["convos"]
    stored_examples = raw["metadata"]["example_level_metadata"]
    for mine, theirs in zip(written["metadata"]["example_level_metadata"], stored_examples, strict=True):
        # same prompt, answer, grades, usage and simple-evals' completion_id (sha256 of id + answer)
        for field in ("prompt", "completion", "rubric_items", "usage", "prompt_id", "completion_id"):
            assert mine[field] == theirs[field], field


@pytest.fixture
def summary(shared_data: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
    return load(shared_data / SUMMARIES_DIR / request.param)


@pytest.mark.parametrize("summary", SUMMARY_FILES, indirect=True)
def test_metrics_out_uses_the_llama_summary_key_families(
    summary: dict[str, Any],
    tmp_path: Path,
    make_conversation: ConversationFactory,
    make_sample: SampleFactory,
) -> None:
    bases = mean_keys(summary)
    # their layout: every metric as key, key:n_samples (int), key:bootstrap_std; score == overall
    assert set(summary) == {f"{b}{s}" for b in bases for s in ("", ":n_samples", ":bootstrap_std")}
    assert all(isinstance(summary[f"{b}:n_samples"], int) for b in bases)
    assert summary["score"] == summary[OVERALL]
    # a run carrying exactly their tags gives every one of their keys, plus only documented extras
    example_tags = [b for b in bases if is_tag_key(b)]
    clusters = [b for b in bases if b.startswith("cluster:")]
    axes = [b for b in bases if b.startswith("axis:")]
    rubric = [RubricItem(criterion=c, points=5, tags=["level:cluster", c, axes[0]]) for c in clusters]
    rubric += [RubricItem(criterion=a, points=3, tags=["level:example", a]) for a in axes]
    conversation = make_conversation(rubric, example_tags=example_tags)
    sample = make_sample(conversation, [True] * len(rubric))
    ours = score_run([sample], ScoringOptions(n_resamples=10)).metrics()
    assert set(summary) <= set(ours)
    extras = set(ours) - set(summary)
    documented = {f"{b}{s}" for b in bases for s in (":ci_lower", ":ci_upper")}
    assert extras == documented | {"n_samples", "ungraded_criteria", "ungraded_samples"}
    assert all(isinstance(ours[f"{b}:n_samples"], int) for b in bases)
    written = write_metrics(tmp_path / "metrics.json", ours)
    assert list(json.loads(written.read_text())) == list(ours)
