"""Benchmark: start-up of every command's help and of the read-only commands, whole processes.

Run with ``python benchmarks/startup.py [--rounds 5] [--baseline SRC]``.

Each command runs in a fresh process (``python -m healthbench ...``), best of ``--rounds``: CPU =
user + system seconds of the child (``resource.getrusage``) and wall seconds. ``runs`` lists a store
holding one imported run of ``--conversations`` (50) conversations (each tree imports it into its
own store); ``results`` shows that run, once before the timings (untimed), and ``results demo-run
(scores)`` shows it from a copy of the store as `import` left it (taken again before each timing).
Since issue #29 the two are the same work (a run is scored each time it is shown); a baseline tree
from before it (e.g. ed62df2) remembered a run's figures in the store, so there the first row is
the remembered figures and the second the scoring. The children run with compiled bytecode (an untimed
warm-up first). With ``--baseline SRC`` (e.g. the ``src`` folder of an export of ``main``: ``git
archive main src | tar -x -C /tmp/main``; repeatable, each column named by the folder holding that
``src``) the same commands run from that source side by side. The
machine is shared with other engineers' work: CPU seconds are the figure to read, wall seconds drift
with the load. Targets (issue #29): < 0.3 s for every command's help, < 0.6 s for ``results NAME``.
"""

from __future__ import annotations

import argparse
import os
import shutil
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
    ("data", "--help"),  # the slowest help: its module loads the dataset readers and the progress bars
    ("runs",),
    ("results", "demo-run"),
)
# `results demo-run` on a copy of the store as `import` left it, taken again before each timing
# (a baseline tree that remembers figures in the store has none there: it scores the run)
SCORED = ("results", "demo-run", "(scores)")


def make_store(folder: Path, conversations: int = 50) -> tuple[Path, Path]:
    from scoring import synthesize

    from healthbench.results.simple_evals import write_allresults
    from healthbench.scoring.run_score import ScoringOptions, score_run

    samples = synthesize(conversations).samples
    file = folder / "demo_allresults.json"
    write_allresults(file, samples, score_run(samples, ScoringOptions(n_resamples=0)))
    return file, folder / "store.db"


def copy_store(source: Path, target: Path) -> None:
    """Copy a SQLite store with its write-ahead log (what a process left there is part of it)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
        if Path(f"{source}{suffix}").exists():
            shutil.copyfile(f"{source}{suffix}", f"{target}{suffix}")


def tree_stores(python: str, file: Path, folder: Path, label: str, env: dict[str, str]) -> tuple[Path, Path]:
    """(store, pristine copy) of one tree: `demo-run` imported by that tree (a store written by a
    newer tree is refused by an older one); the store is then shown once, untimed (a baseline tree
    that remembers figures then has them)."""
    store = folder / f"{label.replace(' ', '-')}.db"
    cpu_of(
        [python, "-m", "healthbench", "import", str(file), "--store", str(store), "--name", "demo-run"], env
    )
    pristine = store.with_suffix(".pristine.db")
    copy_store(store, pristine)
    cpu_of([python, "-m", "healthbench", "results", "demo-run", "--store", str(store)], env)
    return store, pristine


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--baseline",
        type=Path,
        action="append",
        default=[],
        help="another source tree (its src folder) to compare; repeatable",
    )
    parser.add_argument("--conversations", type=int, default=50, help="conversations of the stored run")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        file, _ = make_store(folder, args.conversations)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(folder / "bytecode")
        python = sys.executable
        trees = {"this tree": ROOT / "src", **{src.resolve().parent.name: src for src in args.baseline}}
        envs = {label: {**env, "PYTHONPATH": str(src)} for label, src in trees.items()}
        stores = {label: tree_stores(python, file, folder, label, envs[label]) for label in trees}
        best: dict[tuple[str, str], tuple[float, float]] = {}
        for _ in range(args.rounds):
            for label in trees:
                store, pristine = stores[label]
                for command in (*COMMANDS, SCORED):
                    words = list(command)
                    if command == SCORED:
                        scratch = folder / "scored.db"
                        copy_store(pristine, scratch)
                        words = [*command[:2], "--store", str(scratch)]
                    elif command[0] in ("runs", "results") and "--help" not in command:
                        words = [*command, "--store", str(store)]
                    cpu, wall, _ = cpu_of([python, "-m", "healthbench", *words], envs[label])
                    key = (label, " ".join(command))
                    old = best.get(key, (float("inf"), float("inf")))
                    best[key] = (min(old[0], cpu), min(old[1], wall))
        rounds = f"best of {args.rounds} rounds, fresh processes (CPU s / wall s)"
        print(f"{args.conversations} conversations; {rounds}")
        print(f"{'command':38s}" + "".join(f"{label:>22s}" for label in trees))
        for command in (*COMMANDS, SCORED):
            name = " ".join(command)
            cells = "".join(
                f"{best[label, name][0]:10.2f} / {best[label, name][1]:6.2f} s" for label in trees
            )
            print(f"healthbench {name:26s}{cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
