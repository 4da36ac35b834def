"""`healthbench analyze`'s six output files, byte for byte: the same as before analyze was built from
the reader's columns (the hashes were recorded from the sample-by-sample build), whether the files
are read in worker processes or in this one, and whether a run is read as columns or as samples."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path

import pytest
from synthetic_runs import conversations, graded

from healthbench.analysis.analyze import analyze, write_analysis
from healthbench.analysis.inputs import load_inputs
from healthbench.data.sources import join_datasets
from healthbench.results.simple_evals import write_allresults
from healthbench.scoring.run_score import ScoringOptions, score_run
from healthbench.scoring.stats import BootstrapOptions

CONVS = conversations(40, seed=5)
DAY = dt.date(2026, 1, 2)
OPTIONS = BootstrapOptions(n_resamples=200, seed=3)
# sha256 of each file of `analyze` of the fixture's three runs with their dataset, as written by the
# sample-by-sample build (before the columnar one): the columnar build must not change one byte
EXPECTED = {
    "healthbench_granular_data_20260102.tsv": "b590ce5f99818147a42cb75035c53555cd7383c1fc993f38d2b068d0cb826a1b",
    "theme_data.csv": "5a18764ba1b0ed17bfc3e8db752df04b8d5d3e64aedbc9cd00501a7e0d2c8749",
    "axis_data.csv": "4774b658b0d6615c1b0f7a58e49aac21b50ebd90f9ac206ea1e83113c6821b02",
    "theme_axis_data.csv": "59b637c0f86aa53b13cbccf723beeff4ad7f583828527068e74e53cd67a9cb72",
    "model_runs.csv": "11c1580fbd055c69f1d49c2a59d2850c8c1fd7b18f0ea6d7ee40d8f1b163d6bc",
    "conversation_repeats.csv": "da99614c6457425e7e9bef3ab9a27f1db50605b1ea89d9d48f1a54c1aa16563c",
    "worst_at_k.csv": "3128105d4c4902330c1548382439cfa6f5c3f7ce9e8fd21b891c9e7a47c24a4a",
}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], Path]:
    """Three runs (two of model-a, one of model-b), two answers per conversation, a few ungraded
    criteria, and the dataset."""
    folder = tmp_path_factory.mktemp("runs")
    files = []
    for index, (model, hit_rate) in enumerate((("model-a", 0.7), ("model-a", 0.6), ("model-b", 0.4))):
        samples = graded(CONVS, hit_rate=hit_rate, seed=index + 1, repeats=2, ungraded=0.01)
        path = folder / f"healthbench_{model}_20260101_00000{index}_allresults.json"
        files.append(write_allresults(path, samples, score_run(samples, ScoringOptions(n_resamples=0))))
    dataset = folder / "dataset.jsonl"
    dataset.write_text("".join(c.model_dump_json() + "\n" for c in CONVS))
    return files, dataset


def written(folder: Path, files: list[Path], dataset: Path, **load: bool) -> dict[str, str]:
    runs = load_inputs(files, data=join_datasets([dataset], None), **load)
    paths = write_analysis(analyze(runs, OPTIONS), folder, day=DAY)
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in paths.values()}


def test_outputs_are_byte_for_byte_those_of_the_sample_build(
    inputs: tuple[list[Path], Path], tmp_path: Path
) -> None:
    assert written(tmp_path, *inputs) == EXPECTED
