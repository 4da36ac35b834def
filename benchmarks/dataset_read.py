"""Benchmark: reading a full-size HealthBench JSONL and meta-eval file, this tree vs another's ``src``.

Run with ``python benchmarks/dataset_read.py --base /tmp/jsonl-base/src [--rounds 3]``, where the base
is e.g. ``main``'s source exported with ``git archive main src | tar -x -C /tmp/jsonl-base``.

Inputs (written to a temporary folder, never into the repository), from the real fragments in
``../shared/data/healthbench`` (the benchmark exits with a message when they are absent):

- a 5,000-conversation eval file: the 527-line fragment cycled, each copy with a new prompt_id;
- a 29,511-row meta-eval file (the official file's size): the 5-row fragment cycled, each copy with a
  new completion_id.

Each read runs in a fresh process (``load_conversations(data=...)`` / ``load_meta_eval(data=...)``,
the path every command and the service take), side by side for the two trees in each round, twice:
with the interpreter's default collector thresholds (``default``, as in the job service) and with a
command-line process's (``cli``: `healthbench.process_settings.apply` in trees before issue #29, a
collection every 50,000 allocations instead of 700; since #29 a command keeps the defaults). The
child reports the read's own CPU seconds (``resource.getrusage``: the import of the package is not
counted) and wall seconds, and a digest of the records (prompt_ids, criteria, points, tags, texts,
labels) that must be equal for the two trees. Best of the rounds; the
machine is shared, so absolute numbers drift.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data" / "healthbench" / "eval"
META_ROWS = 29_511
SETTINGS = ("default", "cli")  # the interpreter's collector thresholds, or a command's (process_settings)

CHILD = """
import hashlib, json, resource, sys, time
from healthbench.data.sources import load_conversations, load_meta_eval

kind, path, settings = sys.argv[1], sys.argv[2], sys.argv[3]
if settings == "cli":
    try:  # a tree before issue #29 (its commands retuned the collector); none since: as default
        from healthbench.process_settings import apply
        apply()
    except ImportError:
        pass
def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime
start_cpu, start = cpu(), time.perf_counter()
records = (load_conversations if kind == "eval" else load_meta_eval)(data=path)[1]
read_cpu, wall = cpu() - start_cpu, time.perf_counter() - start
if kind == "eval":
    parts = [(r.prompt_id, [(i.criterion, i.points, i.tags) for i in r.rubrics], r.example_tags,
              [m.content for m in r.prompt], r.ideal_completions_data) for r in records]
else:
    parts = [(r.completion_id, r.rubric, r.binary_labels, r.anonymized_physician_ids,
              [m.content for m in r.prompt], r.completion) for r in records]
digest = hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:16]
print(json.dumps({"records": len(records), "cpu": read_cpu, "wall": wall, "digest": digest}))
"""


def write_inputs(folder: Path, conversations: int) -> dict[str, Path]:
    eval_lines = [json.loads(x) for x in (SHARED / "oss_eval_sample527.jsonl").read_text().splitlines() if x]
    meta_lines = [json.loads(x) for x in (SHARED / "meta_eval_sample5.jsonl").read_text().splitlines() if x]
    eval_file, meta_file = folder / "eval_5000.jsonl", folder / "meta_eval_29511.jsonl"
    with eval_file.open("w") as out:
        for i in range(conversations):
            row = dict(eval_lines[i % len(eval_lines)], prompt_id=f"bench-{i}")
            out.write(json.dumps(row) + "\n")
    with meta_file.open("w") as out:
        for i in range(META_ROWS):
            row = meta_lines[i % len(meta_lines)]
            out.write(json.dumps(dict(row, completion_id=f"{row['completion_id']}-{i}")) + "\n")
    return {"eval": eval_file, "meta-eval": meta_file}


def read_once(src: Path, kind: str, path: Path, settings: str) -> dict[str, float | str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    result = subprocess.run(
        [sys.executable, "-c", CHILD, "eval" if kind == "eval" else "meta", str(path), settings],
        capture_output=True,
        text=True,
        check=True,
        env=env,
        cwd=src.parent,
    )
    return dict(json.loads(result.stdout))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="the other tree's src folder")
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if not SHARED.is_dir():
        print(f"the real fragments are absent ({SHARED}); nothing to measure")
        return 1
    trees = {"this tree": ROOT / "src", "base": args.base.resolve()}
    with tempfile.TemporaryDirectory(prefix="healthbench-read-") as tmp:
        files = write_inputs(Path(tmp), args.conversations)
        for kind, path in files.items():
            print(f"{kind}: {path.name}, {path.stat().st_size / 1e6:.1f} MB")
        best: dict[tuple[str, str, str], dict[str, float | str]] = {}
        for _ in range(args.rounds):
            for kind, path in files.items():
                for settings in SETTINGS:
                    for tree, src in trees.items():
                        got = read_once(src, kind, path, settings)
                        old = best.get((kind, settings, tree))
                        if old is None or float(got["cpu"]) < float(old["cpu"]):
                            best[(kind, settings, tree)] = got
    for kind, settings in ((k, s) for k in files for s in SETTINGS):
        ours, base = best[(kind, settings, "this tree")], best[(kind, settings, "base")]
        same = "identical records" if ours["digest"] == base["digest"] else "RECORDS DIFFER"
        print(
            f"{kind:9s} {settings:7s} {int(ours['records']):6d} records: "
            f"this tree {float(ours['cpu']):.2f} CPU-s "
            f"({float(ours['wall']):.2f} s wall), base {float(base['cpu']):.2f} CPU-s "
            f"({float(base['wall']):.2f} s wall): "
            f"{float(base['cpu']) / float(ours['cpu']):.1f}x less CPU; {same}"
        )
    print(f"(best of {args.rounds} rounds, fresh processes side by side; the machine is shared)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
