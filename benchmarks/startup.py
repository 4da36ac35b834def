"""Benchmark: start-up of every command's help and of the read-only commands, whole processes.

Run with ``python benchmarks/startup.py [--rounds 5] [--baseline SRC]``.

Each command runs in a fresh process (``python -m healthbench ...``), best of ``--rounds``: CPU =
user + system seconds of the child (``resource.getrusage``) and wall seconds. ``runs`` lists a store
holding one imported 50-conversation run; ``results`` shows that run. The children run with compiled
bytecode (an untimed warm-up first). With ``--baseline SRC`` (e.g. the ``src`` folder of an export of
``main``: ``git archive main src | tar -x -C /tmp/main``) the same commands run from that source side
by side. The machine is shared with other engineers' work: CPU seconds are the figure to read, wall
seconds drift with the load. Target: < 0.3 s for every command's help and the read-only commands.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from ingest import cpu_of  # noqa: E402

COMMANDS = (
    ("--help",),
    ("run", "--help"),
    ("meta-eval", "--help"),
    ("results", "--help"),
    ("analyze", "--help"),
    ("report", "--help"),
    ("runs",),
    ("results", "demo-run"),
)


def make_store(folder: Path) -> tuple[Path, Path]:
    from scoring import synthesize

    from healthbench.results.simple_evals import write_allresults
    from healthbench.scoring.run_score import ScoringOptions, score_run

    samples = synthesize(50).samples
    file = folder / "demo_allresults.json"
    write_allresults(file, samples, score_run(samples, ScoringOptions(n_resamples=0)))
    return file, folder / "store.db"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="another source tree (its src folder) to compare")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        file, store = make_store(folder)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(folder / "bytecode")
        python = sys.executable
        trees = {"this tree": ROOT / "src", **({"baseline": args.baseline} if args.baseline else {})}
        cpu_of(
            [python, "-m", "healthbench", "import", str(file), "--store", str(store), "--name", "demo-run"],
            env,
        )
        best: dict[tuple[str, str], tuple[float, float]] = {}
        for _ in range(args.rounds):
            for label, src in trees.items():
                tree_env = {**env, "PYTHONPATH": str(src)}
                for command in COMMANDS:
                    words = (
                        [*command, "--store", str(store)] if command[0] in ("runs", "results") else command
                    )
                    if "--help" in words:
                        words = command
                    cpu, wall, _ = cpu_of([python, "-m", "healthbench", *words], tree_env)
                    key = (label, " ".join(command))
                    old = best.get(key, (float("inf"), float("inf")))
                    best[key] = (min(old[0], cpu), min(old[1], wall))
        print(f"best of {args.rounds} rounds, fresh processes (CPU s / wall s)")
        print(f"{'command':28s}" + "".join(f"{label:>22s}" for label in trees))
        for command in COMMANDS:
            name = " ".join(command)
            cells = "".join(
                f"{best[label, name][0]:10.2f} / {best[label, name][1]:6.2f} s" for label in trees
            )
            print(f"healthbench {name:16s}{cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
