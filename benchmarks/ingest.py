"""Benchmark: `healthbench import` and `healthbench --help`, whole processes, CPU seconds.

Run with ``python benchmarks/ingest.py [--conversations 5000] [--rounds 3]``.

A synthetic 5,000-conversation run (`benchmarks/scoring.py`'s generator: ~57k criteria, themes,
physician categories, axes, levels, clusters) is written as a simple-evals ``_allresults.json`` with
its dataset JSONL, then, side by side in each round, in fresh processes:

- ``simple-evals``: this script with ``--reference``: ``json.load`` of the file and the dataset, then
  simple-evals' scoring rules and its bootstrap (1,000 ``np.random.choice`` resamples per key), as
  transcribed in `benchmarks/scoring.py`;
- ``healthbench import FILE --data DATASET`` (every key, 1,000-resample CIs);
- ``healthbench --help``;
- with ``--base SRC`` (another tree's ``src``, e.g. ``git archive main src | tar -x -C /tmp/base``;
  repeatable): ``import (NAME)``, the same command run on that tree (NAME: the folder holding that
  ``src``), to compare side by side.

Every child runs this checkout's ``src`` (``PYTHONPATH``; a baseline's its own), never the
installed package.

CPU = user + system seconds of the child process (``resource.getrusage``), best of the rounds. The
children run as an installed package does, with compiled bytecode: one untimed warm-up run of each
command first writes it into a temporary ``PYTHONPYCACHEPREFIX`` (even where the environment sets
``PYTHONDONTWRITEBYTECODE``), the same for both sides. The machine is shared with other engineers'
work, so absolute numbers drift; the ratio is measured side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))


def reference(file: Path, dataset: Path, n_resamples: int) -> None:
    """simple-evals' own path: parse both files, score every example, bootstrap every key."""
    import numpy as np
    from scoring import reference_run  # the transcription of simple-evals' rules

    tags = {}
    with dataset.open() as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                tags[row["prompt_id"]] = row.get("example_tags", [])
    document = json.loads(file.read_text())
    rows = [
        {
            "example_tags": tags[example["prompt_id"]],
            "rubrics": example["rubric_items"],
            "grades": [{"criteria_met": item["criteria_met"]} for item in example["rubric_items"]],
        }
        for example in document["metadata"]["example_level_metadata"]
    ]
    np.random.seed(0)
    metrics = reference_run(rows, n_resamples)
    print(f"reference: {len(metrics)} keys, overall {metrics['overall_score']:.6f}")


def write_inputs(folder: Path, n: int) -> tuple[Path, Path]:
    from scoring import synthesize

    from healthbench.results.simple_evals import write_allresults
    from healthbench.scoring.run_score import ScoringOptions, score_run

    data = synthesize(n)
    file = folder / "healthbench_synthetic_20260101_000000_allresults.json"
    write_allresults(file, data.samples, score_run(data.samples, ScoringOptions(n_resamples=0)))
    dataset = folder / "dataset.jsonl"
    dataset.write_text("".join(s.conversation.model_dump_json() + "\n" for s in data.samples))
    return file, dataset


def cpu_of(command: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """(CPU seconds, wall seconds, stdout) of one child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, result.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--resamples", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--base", type=Path, action="append", default=[], help="another tree's src/ to time `import` on too"
    )
    parser.add_argument(
        "--reference", nargs=2, type=Path, metavar=("FILE", "DATASET"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.reference:
        reference(*args.reference, args.resamples)
        return 0
    python = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        file, dataset = write_inputs(Path(tmp), args.conversations)
        size = file.stat().st_size / 1e6
        print(f"synthetic _allresults.json: {args.conversations} conversations, {size:.1f} MB; dataset JSONL")
        commands: dict[str, list[str]] = {
            "simple-evals": [python, __file__, "--reference", str(file), str(dataset)],
            "import": [python, "-m", "healthbench", "import", str(file), "--data", str(dataset)],
            "--help": [python, "-m", "healthbench", "--help"],
        }
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "bytecode")
        env["PYTHONPATH"] = str(ROOT / "src")  # this checkout's code, not the installed package
        envs = {name: env for name in commands}
        for base in args.base:
            name = f"import ({base.resolve().parent.name})"
            commands[name] = commands["import"]
            envs[name] = {**env, "PYTHONPATH": str(base.resolve())}
        for name, command in commands.items():
            cpu_of(command, envs[name])  # warm-up: compiles the bytecode, untimed
        best: dict[str, tuple[float, float]] = {}
        outputs: dict[str, str] = {}
        for _ in range(args.rounds):
            for name, command in commands.items():
                cpu, wall, outputs[name] = cpu_of(command, envs[name])
                old = best.get(name, (float("inf"), float("inf")))
                best[name] = (min(old[0], cpu), min(old[1], wall))
    assert (
        "141/141 means and n_samples equal" in outputs["import"]
        or "means and n_samples equal" in outputs["import"]
    )
    agreement = next(line for line in outputs["import"].splitlines() if line.startswith("agreement"))
    print(f"import output: {agreement}")
    for name, (cpu, wall) in best.items():
        print(f"{name:24s} CPU {cpu:6.2f} s   wall {wall:6.2f} s")
    for name in best:
        if name.startswith("import"):
            ratio = best["simple-evals"][0] / best[name][0]
            verdict = "MET" if ratio >= 8 else "NOT met"
            print(f"{name}: {ratio:.1f}x less CPU than simple-evals' scoring (target 8x: {verdict})")
    help_cpu, help_wall = best["--help"]
    print(
        f"--help: {help_cpu:.2f} s CPU, {help_wall:.2f} s wall (target 0.3 s: "
        f"{'MET' if help_cpu < 0.3 else 'NOT met'} on CPU)"
    )
    print(
        f"(best of {args.rounds} rounds, side by side; the machine is shared, so wall times include waiting)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
