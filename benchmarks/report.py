"""Benchmark: size and speed of the HTML report of a full 5,000-conversation run.

Run with ``python benchmarks/report.py [--conversations 5000] [--runs 1] [--no-browser]``.

The run is built from the real HealthBench fragments in ``../shared/data/healthbench`` when present
(the 527 real conversations, prompts and rubrics, cycled to 5,000 with new ids; the answers and the
judge's explanations of the real gpt-4o-mini result files, cycled), else from synthetic text of the
same lengths. Nothing is copied into the project. Measured side by side in one process:

- size: the report against the simple-evals ``_allresults.json`` of the same run (target: under
  ~25 MB for one full run);
- build time: `build_report` + writing the HTML against `score_run` alone (the report's overhead);
- ``healthbench report`` of the run's ``_allresults.json`` in a fresh process, as a user runs it:
  CPU and wall seconds and peak RSS (targets: <= 2 s, <= 300 MB);
- in headless Chromium (when playwright and a Chromium are there, see tests/support/browser.py): time
  until the page is ready (decompress, parse, index, first rows), a theme filter, opening a
  conversation, and the JS heap. The machine is shared with other engineers' work: absolute times are
  noisy, ratios less so.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import support_path  # src/ and tests/ on sys.path
from support.browser import CHROMIUM, chromium_context

from healthbench.analysis.report import build_report
from healthbench.data.schema import Conversation, Message, RubricItem
from healthbench.results.simple_evals import write_allresults
from healthbench.scoring.rubric import Verdict
from healthbench.scoring.run_score import GradedSample, ScoringOptions, score_run

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "healthbench"
WORDS = tuple(
    [
        "patient",
        "dose",
        "symptoms",
        "doctor",
        "should",
        "hours",
        "fever",
        "pain",
        "advice",
        "seek",
        "care",
        "emergency",
        "risk",
        "treatment",
        "blood",
        "pressure",
        "history",
        "medication",
        "the",
        "a",
        "of",
        "and",
        "to",
        "with",
        "if",
        "your",
        "may",
        "is",
        "are",
        "not",
    ]
)


class Run:
    def __init__(self, model: str, samples: list[GradedSample]) -> None:
        self.model, self.run_id, self.samples = model, "20260101_000000", samples


def _text(rng: random.Random, chars: int) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < chars:
        words.append(rng.choice(WORDS))
    return " ".join(words)


def sources(rng: random.Random) -> tuple[list[Conversation], list[tuple[str, list[str]]], str]:
    """Base conversations and (answer, explanations) pairs: real when the fragments exist."""
    data = SHARED / "eval" / "oss_eval_sample527.jsonl"
    results = sorted((SHARED / "results" / "simple-evals-gpt-4o-mini").glob("healthbench_gpt-4o-mini_*.json"))
    if data.exists() and results:
        convs = [Conversation.model_validate_json(line) for line in data.read_text().splitlines()]
        answers = []
        for path in results:
            for ex in json.loads(path.read_text())["metadata"]["example_level_metadata"]:
                expl = [str(r.get("explanation") or "") for r in ex["rubric_items"]]
                answers.append((ex["completion"][0]["content"], expl))
        return convs, answers, "real HealthBench fragments (cycled)"
    convs = [
        Conversation(
            prompt=[Message(role="user", content=_text(rng, 670))],
            prompt_id=f"base-{i}",
            rubrics=[
                RubricItem(
                    criterion=_text(rng, 260),
                    points=rng.choice([-5, 3, 5, 8]) if j else 7,
                    tags=[f"axis:{rng.choice(['accuracy', 'completeness'])}"],
                )
                for j in range(12)
            ],
            example_tags=[f"theme:{rng.choice(['hedging', 'global_health', 'communication'])}"],
        )
        for i in range(200)
    ]
    answers = [(_text(rng, 1800), [_text(rng, 330) for _ in range(12)]) for _ in range(50)]
    return convs, answers, "synthetic text of real lengths (fragments absent)"


def make_run(
    model: str, n: int, seed: int, base: list[Conversation], answers: list[tuple[str, list[str]]]
) -> Run:
    rng = random.Random(seed)
    samples = []
    for i in range(n):
        conv = base[i % len(base)].model_copy(update={"prompt_id": f"{base[i % len(base)].prompt_id}-{i}"})
        text, expl = answers[(i + seed) % len(answers)]
        k = len(conv.rubrics)
        samples.append(
            GradedSample(
                conversation=conv,
                completion=text,
                verdicts=tuple(Verdict.MET if rng.random() < 0.55 else Verdict.NOT_MET for _ in range(k)),
                explanations=tuple(expl[j % len(expl)] if expl else "" for j in range(k)),
                usage={"input_tokens": 700, "output_tokens": 450},
            )
        )
    return Run(model, samples)


def browser_timings(path: Path) -> dict[str, float] | None:
    if CHROMIUM is None or importlib.util.find_spec("playwright") is None:
        return None
    with tempfile.TemporaryDirectory() as profile, chromium_context(profile) as ctx:
        page = ctx.new_page()
        start = time.perf_counter()
        page.goto(path.as_uri())
        page.wait_for_selector('body[data-ready="true"]', state="attached", timeout=120_000)
        ready = time.perf_counter() - start
        theme = page.locator("#f-theme option").nth(1).get_attribute("value")
        filt = page.evaluate(
            """(theme) => { const t = performance.now();
            const s = document.getElementById('f-theme'); s.value = theme;
            s.dispatchEvent(new Event('input')); return performance.now() - t; }""",
            theme,
        )
        start = time.perf_counter()
        page.locator(".conv-row").first.click()
        page.locator("#conv-detail tr.criterion").first.wait_for()
        opened = time.perf_counter() - start
        heap = page.evaluate("performance.memory ? performance.memory.usedJSHeapSize : 0")
        rows = page.locator(".conv-row").count()
    return {"ready_s": ready, "filter_ms": filt, "open_s": opened, "heap_mb": heap / 1e6, "rows": rows}


def report_process(allresults: Path, output: Path, src: Path | None = None) -> tuple[float, float, float]:
    """CPU seconds, wall seconds and peak RSS (MB) of ``healthbench report FILE -o OUTPUT`` in a
    fresh process (what a user runs; an untimed warm-up first compiles the bytecode), on this tree or
    on the tree whose ``src`` is ``src``."""
    command = [sys.executable, "-m", "healthbench", "report", str(allresults), "-o", str(output)]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(output.parent / ("bytecode" if src is None else "bytecode-base"))
    # this tree's src (not the interpreter's installed copy) unless another tree's is given
    env["PYTHONPATH"] = str((support_path.ROOT / "src" if src is None else src).resolve())
    subprocess.run(command, check=True, capture_output=True, env=env)
    # launched by a small Python process whose own children are measured: a child forked (or
    # spawned) by this big process would count this process's pages in its peak RSS until exec
    launcher = (
        "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True); "
        "r = resource.getrusage(resource.RUSAGE_CHILDREN); print(r.ru_utime + r.ru_stime, r.ru_maxrss)"
    )
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", launcher, *command], check=True, capture_output=True, env=env
    )
    wall = time.perf_counter() - start
    cpu, rss = result.stdout.split()
    return float(cpu), wall, int(rss) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--no-browser", action="store_true")
    parser.add_argument("--rounds", type=int, default=1, help="report processes timed (best of)")
    parser.add_argument(
        "--base",
        type=Path,
        action="append",
        default=[],
        help="another tree's src/ (e.g. `git archive main src | tar -x -C /tmp/base`; repeatable): its "
        "report process is timed on the same file, alternating with this tree's",
    )
    args = parser.parse_args()
    rng = random.Random(0)
    base, answers, origin = sources(rng)
    runs = [make_run(f"model-{r}", args.conversations, r, base, answers) for r in range(args.runs)]
    options = ScoringOptions()
    print(
        f"{args.runs} run(s) x {args.conversations} conversations, "
        f"{sum(len(s.verdicts) for s in runs[0].samples)} criteria per run; data: {origin}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        t = time.process_time()  # CPU seconds: the machine is shared
        scores = [score_run(r.samples, options) for r in runs]
        t_score = time.process_time() - t
        t = time.process_time()
        path = build_report(runs, options=options).write(Path(tmp) / "report.html")
        t_report = time.process_time() - t
        allresults = write_allresults(Path(tmp) / "x_allresults.json", runs[0].samples, scores[0])
        size, raw = path.stat().st_size, allresults.stat().st_size * args.runs
        print(
            f"report size: {size / 1e6:.1f} MB (target < 25 MB) vs {raw / 1e6:.1f} MB of _allresults.json "
            f"({size / raw:.2f}x)"
        )
        print(
            f"build (CPU): score_run {t_score:.2f} s, build_report + write {t_report:.2f} s "
            f"({t_report / t_score:.1f}x scoring alone)"
        )
        trees: dict[str, Path | None] = {"this tree": None}
        trees.update((base.resolve().parent.name, base) for base in args.base)
        best: dict[str, tuple[float, float, float]] = {}
        for _ in range(args.rounds):
            for name, src in trees.items():
                cpu, wall, rss = report_process(allresults, Path(tmp) / "cli-report.html", src)
                old = best.get(name, (float("inf"), float("inf"), float("inf")))
                best[name] = (min(old[0], cpu), min(old[1], wall), min(old[2], rss))
        for name, (cpu, wall, rss) in best.items():
            print(
                f"healthbench report of the _allresults.json, whole process ({name}): {cpu:.2f} s CPU, "
                f"{wall:.2f} s wall, peak RSS {rss:.0f} MB (target <= 2 s, <= 300 MB)"
            )
        if args.rounds > 1:
            print(f"(best of {args.rounds} rounds, side by side)")
        timings = None if args.no_browser else browser_timings(path)
        if timings is None:
            print("browser: skipped (--no-browser, or no chromium/playwright)")
        else:
            print(
                f"browser (headless Chromium): ready in {timings['ready_s']:.2f} s, theme filter "
                f"{timings['filter_ms']:.0f} ms, open a conversation {timings['open_s'] * 1000:.0f} ms, "
                f"JS heap {timings['heap_mb']:.0f} MB, {int(timings['rows'])} rows in the DOM"
            )


if __name__ == "__main__":
    main()
