"""Benchmark: `healthbench analyze` of many ``_allresults.json`` files, whole processes, against the
seed notebook's own polars + numpy code on the same files.

Run with ``python benchmarks/analyze.py [--runs 20] [--conversations 5000] [--rounds 1]
[--baseline SRC]``.

``--runs`` synthetic runs of the same conversations (`benchmarks/scoring.py`'s generator; each run its
own verdicts and explanations) are written as simple-evals ``_allresults.json`` files with their
dataset JSONL, then, side by side in each round, in fresh processes:

- ``notebook``: this script with ``--notebook``: ``json.load`` of every file and of the dataset (for
  the themes), the granular criterion table built row by row as the notebook does, then the
  notebook's tables (`benchmarks/analysis_tables.notebook_tables`: polars group-bys and 1,000
  ``np.random.choice`` resamples per (model, run, theme or axis));
- ``healthbench analyze FILES --data DATASET --out DIR`` (every table, 1,000-resample CIs, files
  written);
- with ``--baseline SRC`` (e.g. ``git archive main src | tar -x -C /tmp/base``, then
  ``--baseline /tmp/base/src``; repeatable), the same command run from that tree (``PYTHONPATH``):
  how many of its seven files are byte for byte ours is printed (a tree from before issue #29's one
  bootstrap draws other CIs: the files holding CIs then differ);
- ``decode floor``: this script with ``--decode``: the reader's decode and checks of the files alone,
  as ``analyze`` reads them (`healthbench.results.allresults_reader.decode_allresults` without texts).

Every child runs this checkout's ``src`` (``PYTHONPATH``; a baseline's its own), never the
installed package.

CPU = user + system seconds of the child process (``resource.getrusage``), best of the rounds; wall
seconds are shown too. The children run with compiled bytecode (an untimed warm-up first). The
machine is shared with other engineers' work, so absolute numbers drift; the ratio is measured side
by side. Means must agree to 1e-12 and counts exactly (CIs are random on both sides).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from ingest import cpu_of  # noqa: E402


def write_inputs(folder: Path, n_runs: int, n: int) -> tuple[list[Path], Path]:
    from scoring import synthesize

    from healthbench.results.simple_evals import write_allresults
    from healthbench.scoring.rubric import Verdict
    from healthbench.scoring.run_score import GradedSample, ScoringOptions, score_run

    base = synthesize(n).samples
    rng = random.Random(0)
    files = []
    for index in range(n_runs):
        rate = 0.4 + 0.3 * rng.random()
        samples = [
            GradedSample(
                s.conversation,
                f"synthetic answer {index}",
                tuple(Verdict.of(rng.random() < rate) for _ in s.verdicts),
                explanations=tuple(f"explanation {k}" for k in range(len(s.verdicts))),
            )
            for s in base
        ]
        file = folder / f"healthbench_model-{index % 4}_20260101_0000{index:02d}_allresults.json"
        write_allresults(file, samples, score_run(samples, ScoringOptions(n_resamples=0)))
        files.append(file)
    dataset = folder / "dataset.jsonl"
    dataset.write_text("".join(s.conversation.model_dump_json() + "\n" for s in base))
    return files, dataset


def notebook(dataset: Path, out: Path, files: list[Path], n_resamples: int) -> None:
    """The seed notebook's path: json.load, a row per criterion, polars, per-group resampling."""
    import numpy as np
    import polars as pl
    from analysis_tables import notebook_tables

    themes = {}
    with dataset.open() as handle:
        for line in handle:
            row = json.loads(line)
            themes[row["prompt_id"]] = next(
                (t.removeprefix("theme:") for t in row["example_tags"] if t.startswith("theme:")), None
            )
    rows = []
    for file in files:
        _, model, date, time_, _ = file.name.split("_", 4)
        run_id = f"{date}_{time_}"
        document = json.loads(file.read_text())
        for example in document["metadata"]["example_level_metadata"]:
            for index, item in enumerate(example["rubric_items"]):
                axis = next((t.removeprefix("axis:") for t in item["tags"] if t.startswith("axis:")), None)
                rows.append(
                    {
                        "model": model,
                        "run_id": run_id,
                        "conversation_id": example["prompt_id"],
                        "rubric_criterion_index": index,
                        "axis": axis,
                        "points": float(item["points"]),
                        "criterion_met": item["criteria_met"],
                        "theme": themes[example["prompt_id"]],
                    }
                )
    granular = pl.DataFrame(rows)
    np.random.seed(0)
    tables = notebook_tables(granular, n_resamples)
    out.write_text(json.dumps([[*key, *value] for key, value in tables.items()]))


def decode(files: list[Path]) -> None:
    from healthbench.results.allresults_reader import decode_allresults

    print(sum(len(decode_allresults(file, texts=False).examples) for file in files))


def ours(folder: Path) -> dict[tuple[str, str, str, str], tuple[float, int]]:
    out = {}
    for kind, name in (("theme", "theme_data.csv"), ("axis", "axis_data.csv")):
        with (folder / name).open() as handle:
            for row in csv.DictReader(handle):
                out[row["model"], row["run_id"], kind, row[kind]] = (
                    float(row["mean"]),
                    int(row["n_samples"]),
                )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--notebook", nargs="+", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--decode", nargs="+", type=Path, help=argparse.SUPPRESS)
    parser.add_argument(
        "--baseline",
        type=Path,
        action="append",
        default=[],
        help="src folder of another tree to run analyze from too (repeatable)",
    )
    args = parser.parse_args(argv)
    if args.notebook:
        notebook(args.notebook[0], args.notebook[1], args.notebook[2:], args.resamples)
        return 0
    if args.decode:
        decode(args.decode)
        return 0
    python = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        files, dataset = write_inputs(folder, args.runs, args.conversations)
        size = sum(f.stat().st_size for f in files) / 1e6
        print(f"{args.runs} runs x {args.conversations} conversations: {size:.0f} MB of _allresults.json")
        reference, out = folder / "notebook.json", folder / "out"
        names = [str(f) for f in files]
        resamples = ["--resamples", str(args.resamples)]
        options = ["--out", str(out), "--n-resamples", str(args.resamples), "--seed", "0"]
        commands: dict[str, list[str]] = {
            "notebook": [python, __file__, *resamples, "--notebook", str(dataset), str(reference), *names],
            "analyze": [python, "-m", "healthbench", "analyze", *names, "--data", str(dataset), *options],
            "decode floor": [python, __file__, "--decode", *names],
        }
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
        env["PYTHONPYCACHEPREFIX"] = str(folder / "bytecode")
        env["PYTHONPATH"] = str(ROOT / "src")  # this checkout's code, not the installed package
        envs = {name: env for name in commands}
        base_outs: dict[str, Path] = {}  # a baseline's name (the folder of its src) -> its output folder
        for baseline in args.baseline:
            name = baseline.resolve().parent.name
            base_outs[name] = folder / f"{name}-out"
            base_options = ["--out", str(base_outs[name]), *options[2:]]
            commands[name] = [python, "-m", "healthbench", "analyze", *names, "--data", str(dataset)]
            commands[name] += base_options
            envs[name] = {**env, "PYTHONPATH": str(baseline.resolve())}
            cpu_of([python, "-c", "import healthbench.cli, polars, numpy, msgspec"], envs[name])
        cpu_of([python, "-c", "import healthbench.cli, polars, numpy, msgspec"], env)  # warm-up
        best: dict[str, tuple[float, float]] = {}
        for _ in range(args.rounds):
            for name, command in commands.items():
                cpu, wall, _ = cpu_of(command, envs[name])
                old = best.get(name, (float("inf"), float("inf")))
                best[name] = (min(old[0], cpu), min(old[1], wall))
        expected = {
            tuple(row[:4]): (row[4], row[7]) for row in json.loads(reference.read_text())
        }  # (model, run_id, kind, name) -> (mean, n)
        got = ours(out)
        assert expected.keys() == got.keys(), set(expected) ^ set(got)
        for key, (mean, n) in expected.items():
            assert abs(got[key][0] - mean) <= 1e-12 and got[key][1] == n, (key, got[key], mean, n)
        print(f"{len(expected)} theme/axis rows: means agree to 1e-12, counts exactly")
        for name, base_out in base_outs.items():
            theirs = sorted(base_out.iterdir())
            differ = [f.name for f in theirs if f.read_bytes() != (out / f.name).read_bytes()]
            same = f"{len(theirs) - len(differ)} of its {len(theirs)} files are byte for byte ours"
            print(f"{name}: {same}" + (f"; differ: {', '.join(differ)}" if differ else ""))
        for name, (cpu, wall) in best.items():
            print(f"{name:22s} {cpu:7.2f} s CPU {wall:7.2f} s wall")
        cpu_ratio = best["notebook"][0] / best["analyze"][0]
        wall_ratio = best["notebook"][1] / best["analyze"][1]
        print(f"analyze vs notebook: {cpu_ratio:.1f}x CPU, {wall_ratio:.1f}x wall (guardrail 8x)")
        for name in base_outs:
            base = best[name]
            print(
                f"{name} vs notebook: {best['notebook'][0] / base[0]:.1f}x CPU, "
                f"{best['notebook'][1] / base[1]:.1f}x wall; analyze vs {name}: "
                f"{base[0] / best['analyze'][0]:.2f}x CPU, {base[1] / best['analyze'][1]:.2f}x wall"
            )
        floor = best["decode floor"][0]
        print(f"decode floor {floor:.2f} s CPU = {best['notebook'][0] / floor:.1f}x the notebook at most")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
