"""`healthbench analyze`'s six output files, byte for byte: the same as before analyze was built from
the reader's columns (the hashes were recorded from the sample-by-sample build), whether the files
are read in worker processes or in this one, and whether a run is read as columns or as samples."""

from __future__ import annotations

import datetime as dt
import hashlib
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from synthetic_runs import conversations, graded
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers every command on the app)
from healthbench.analysis.analyze import analyze, quote_style, write_analysis
from healthbench.analysis.inputs import LoadedRun, load_inputs
from healthbench.cli.app import app
from healthbench.data.sources import join_datasets
from healthbench.errors import DataError
from healthbench.results.simple_evals import write_allresults
from healthbench.scoring.run_score import ScoringOptions, score_run
from healthbench.scoring.stats import BootstrapOptions

CONVS = conversations(40, seed=5)
DAY = dt.date(2026, 1, 2)
OPTIONS = BootstrapOptions(n_resamples=200, seed=3)
# sha256 of each file (by `output_names` key) of `analyze` of the fixture's three runs with their
# dataset, as the sample-by-sample build wrote them (before the columnar one; the CI columns since
# the one bootstrap of issue 29): not one byte may change
EXPECTED = {
    "granular": "b590ce5f99818147a42cb75035c53555cd7383c1fc993f38d2b068d0cb826a1b",
    "themes": "7dfa09d72cd84c940542feab5752f98cfd952c2eb0e144705d3565a88ef69a1f",
    "axes": "6e13acc7aba64a39129182ca273ffc448f43881c3d62fd86034461d8923be3b5",
    "combined": "3500025788f2a0072e03916662139f80c948673c7b1496bcc0d40113bc744296",
    "models": "11c1580fbd055c69f1d49c2a59d2850c8c1fd7b18f0ea6d7ee40d8f1b163d6bc",
    "conversations": "da99614c6457425e7e9bef3ab9a27f1db50605b1ea89d9d48f1a54c1aa16563c",
    "worst_at_k": "1d0b9b0123a47b56d982a76ef74a1fdd2b5fc7770a08c626f7731c1e71aa4fef",
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


def written(folder: Path, files: list[Path], dataset: Path, **load: Any) -> dict[str, str]:
    return written_runs(folder, load_inputs(files, data=join_datasets([dataset], None), **load))


def written_runs(folder: Path, runs: list[LoadedRun]) -> dict[str, str]:
    paths = write_analysis(analyze(runs, OPTIONS), folder, day=DAY)
    assert paths["granular"].name == "healthbench_granular_data_20260102.tsv"
    return {key: hashlib.sha256(path.read_bytes()).hexdigest() for key, path in paths.items()}


def test_outputs_are_byte_for_byte_the_known_ones(inputs: tuple[list[Path], Path], tmp_path: Path) -> None:
    assert written(tmp_path, *inputs) == EXPECTED


def test_files_without_their_dataset_have_no_theme_rows(
    inputs: tuple[list[Path], Path], tmp_path: Path
) -> None:
    files, _ = inputs  # (conversations rebuilt from the files, no theme)
    hashes = written_runs(tmp_path, load_inputs(files))
    assert hashes["themes"] != EXPECTED["themes"]  # (no theme rows)


def test_a_bad_file_is_the_error_of_that_file_and_field(
    inputs: tuple[list[Path], Path], tmp_path: Path
) -> None:
    files, dataset = inputs
    bad = tmp_path / files[1].name
    bad.write_text(files[1].read_text().replace('"criteria_met": true', '"criteria_met": "yes"', 1))
    with pytest.raises(DataError) as caught:
        load_inputs([files[0], bad, files[2]], data=join_datasets([dataset], None))
    assert caught.value.path == str(bad)
    assert caught.value.field is not None and caught.value.field.endswith("criteria_met")
    assert str(caught.value).startswith(f"{bad} field 'metadata.example_level_metadata[")
    assert str(caught.value).endswith(": expected true, false or null, got a string")


def test_the_cli_writes_the_librarys_files(inputs: tuple[list[Path], Path], tmp_path: Path) -> None:
    files, dataset = inputs
    out = tmp_path / "cli"
    args = [*map(str, files), "--data", str(dataset), "--out", str(out)]
    result = CliRunner().invoke(app, ["analyze", *args, "--n-resamples", "200", "--seed", "3"])
    assert result.exit_code == 0, result.output
    library = write_analysis(
        analyze(load_inputs(files, data=join_datasets([dataset], None)), OPTIONS), tmp_path
    )
    written_by_cli = {p.name: p.read_bytes() for p in out.iterdir()}
    assert len(written_by_cli) == 7
    assert {p.name: p.read_bytes() for p in library.values()} == written_by_cli


@pytest.mark.parametrize("model", ["plain-model", 'a "quoted" model', "a\ttabbed model", "a\nbroken\rmodel"])
def test_the_granular_tsv_is_the_text_frames_csv_with_any_text(
    inputs: tuple[list[Path], Path], tmp_path: Path, model: str
) -> None:
    # the TSV is written from Enum columns, without quotes when no text needs them: the same bytes as
    # polars writes from the String frame (quoting what needs it)
    files, dataset = inputs
    result = analyze(load_inputs(files[:1], data=join_datasets([dataset], None), model=model), OPTIONS)
    tsv = write_analysis(result, tmp_path, day=DAY)["granular"].read_bytes()
    frame = result.granular()
    assert frame.schema["model"] == pl.String and result.granular(enums=True).schema["model"] != pl.String
    assert tsv == frame.write_csv(separator="\t").encode()
    assert (b'"' in tsv) == (model != "plain-model")
    assert quote_style(result.granular(enums=True), "\t") == (
        "never" if model == "plain-model" else "necessary"
    )
    assert quote_style(frame, "\t") == "necessary"  # (a String column is never assumed plain)
