"""The judge's bill with prompt caching: simple-evals' layout online, ours online and with --batch judge.

Runs the 527-row real fragment (../shared; a synthetic file of the same shape when absent) against
`healthbench fake-server --prompt-cache --reply-words 450` (its own process: it bills prompt caching as
OpenAI and Anthropic do, tokens being words), judges openai/gpt-4.1 and anthropic/claude-sonnet-4-5 at
list price, and prints side by side for each scenario: judge calls, the shares of judge input tokens
read from the cache and written to it, judge input $ and output $, judge $ per criterion, and the
projected full-set figure (that per-criterion cost x the full set's criteria, 5,000 conversations at
this file's criteria per conversation).

Batches are run against two fake servers: one answering a batch's requests one after another in file
order (``--batch-parallel 1``: each reads what the ones before it wrote, the best case) and one
answering all of a batch's requests at once (``--batch-parallel 0``: none reads what another of the
same batch wrote, as a provider running them in parallel), each with warm-first judging (the default:
one criterion per conversation in a first round of batches, the rest once it has answered) and without
(``--no-warm-first``: one round, cold).

simple-evals' grader prompt is used when it is in the data cache (``--cache-dir``; fetched by any
``healthbench run --grader-template simple-evals``); else the earlier built-in prompt stands in for its
layout (conversation, rubric item, then the instructions: nothing cacheable), a shorter prompt than
simple-evals', so the ratios against it understate the saving. Each scenario's ``cost_usd:judge``
is checked against the tokens the server billed at list price.

The fake judge answers ~9 tokens a call (its whole JSON reply, a ~5-word explanation; printed); real
judges write ~90 tokens a call with simple-evals' prompt (issue #33), at 4x the input price, and ours
asks for one sentence of at most 25 words (~40 tokens with the JSON): the last two columns add that
difference to the full-set projection.

    python benchmarks/cost.py [--cache-dir DIR] [--limit N]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
import support_path  # noqa: E402, F401  (src/ and tests/ on sys.path)
from pipeline import SHARED, synthetic  # noqa: E402
from support.process import fake_server_process  # noqa: E402

from healthbench.config import build_config  # noqa: E402
from healthbench.errors import ConfigError  # noqa: E402
from healthbench.grading.official import OFFICIAL_NAME  # noqa: E402
from healthbench.grading.template import BUILTIN_V1, load_template  # noqa: E402
from healthbench.models.base import Usage, parse_model_spec  # noqa: E402
from healthbench.models.pricing import PriceTable  # noqa: E402
from healthbench.results.metrics_out import usage_metrics  # noqa: E402
from healthbench.results.views import RunView  # noqa: E402
from healthbench.runner.run import run_eval  # noqa: E402
from healthbench.store import Store  # noqa: E402
from healthbench.testing.fake_server import fetch_stats, reset_stats  # noqa: E402

FULL_SET_CONVERSATIONS = 5_000
REAL_JUDGE_OUTPUT_TOKENS = 90  # what real judges write per call with simple-evals' prompt (issue #33)
SHORT_JUDGE_OUTPUT_TOKENS = 40  # one sentence of at most 25 words, as our prompt asks, in JSON
SIMPLE_EVALS_LIST_PRICE = 187.0  # the issue's figure: simple-evals' layout, gpt-4.1, online


def official_layout(cache_dir: str | None) -> tuple[str, str]:
    """(--grader-template value, label): simple-evals' prompt from the cache, else the stand-in."""
    try:
        load_template(OFFICIAL_NAME, cache_dir)
        return OFFICIAL_NAME, "simple-evals' prompt"
    except ConfigError:
        return BUILTIN_V1, "builtin-v1 (simple-evals' layout, shorter; official prompt not cached)"


def scenario(
    url: str, data: Path, workdir: Path, name: str, judge: str, cache_dir: str | None, **extra: Any
) -> dict[str, Any]:
    store = Store(workdir / f"{name}-{judge.replace('/', '-')}.db")
    config = build_config(
        {
            "data": str(data),
            "max_connections": 256,
            "model": {"spec": "bench-candidate", "base_url": url},
            "judge": {"spec": judge, "base_url": url},
            "cache_dir": cache_dir,
            "batch_poll_interval": 0.2,
            "batch_linger": 0.5,
            **extra,
        }
    )
    reset_stats(url)
    run_eval(config, store=store, name=name)
    billed = fetch_stats(url)["billed"]["judge"]
    view = RunView.open(store, name)
    usage = view.usage_totals()
    metrics = usage_metrics(usage.candidate, usage.judge)
    spec = parse_model_spec(judge)
    prices = PriceTable()
    batch = extra.get("batch", "none") != "none"
    at_list = prices.cost(spec.provider, spec.model, Usage(**billed), batch=batch)
    assert at_list is not None and abs(metrics["cost_usd:judge"] - at_list) <= 1e-9 * max(at_list, 1.0), (
        metrics["cost_usd:judge"],
        at_list,
    )
    price = prices.price(spec.provider, spec.model)
    assert price is not None
    factor = 0.5 if batch else 1.0
    parts = {k: v * factor for k, v in price.parts(Usage(**billed)).items()}
    criteria = usage.judge.calls
    conversations = len(view.score().per_sample)
    per_criterion = metrics["cost_usd:judge"] / criteria
    full_criteria = criteria / conversations * FULL_SET_CONVERSATIONS
    fake_output = billed["output_tokens"] / criteria

    def with_output(tokens: int) -> float:
        extra = max(0.0, tokens - fake_output) * price.output * factor / 1e6
        return (per_criterion + extra) * full_criteria

    store.close()
    return {
        "name": name,
        "judge": judge,
        "calls": criteria,
        "input_tokens": billed["input_tokens"],
        "cached_share": billed["cached_input_tokens"] / billed["input_tokens"],
        "write_share": billed["cache_write_input_tokens"] / billed["input_tokens"],
        "input_usd": parts["input"] + parts["cached_input"] + parts["cache_write_input"],
        "output_usd": parts["output"],
        "per_criterion": per_criterion,
        "full_set": per_criterion * full_criteria,
        "full_set_real_output": with_output(REAL_JUDGE_OUTPUT_TOKENS),
        "full_set_short_output": with_output(SHORT_JUDGE_OUTPUT_TOKENS),
        "output_per_call": fake_output,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", default=None, help="data cache holding simple-evals' prompt")
    parser.add_argument("--limit", type=int, default=None, help="first N conversations only")
    args = parser.parse_args(argv)
    fake = ("--prompt-cache", "--reply-words", "450", "--latency", "0.05")
    gpt, sonnet = "openai/gpt-4.1", "anthropic/claude-sonnet-4-5"
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        data = SHARED if SHARED.is_file() else synthetic(workdir / "synthetic.jsonl")
        limit = {"limit": args.limit} if args.limit else {}
        official, label = official_layout(args.cache_dir)
        print(f"data: {data.name}; fake server --prompt-cache --reply-words 450; official layout: {label}")

        def run(url: str, name: str, judge: str, **extra: Any) -> dict[str, Any]:
            return scenario(url, data, workdir, name, judge, args.cache_dir, **limit, **extra)

        cold = {"batch": "judge", "warm_first": False}
        with fake_server_process(*fake) as url:
            rows = [
                run(url, "official-online", gpt, grader_template=official),
                run(url, "ours-online", gpt),
                run(url, "ours-online", sonnet),
                run(url, "ours-batch-cold-seq", gpt, **cold),
                run(url, "ours-batch-cold-seq", sonnet, **cold),
            ]
        with fake_server_process(*fake, "--batch-parallel", "0") as url:
            rows += [
                run(url, "ours-batch-cold-par", gpt, **cold),
                run(url, "ours-batch-warm-par", gpt, batch="judge"),
                run(url, "ours-batch-cold-par", sonnet, **cold),
                run(url, "ours-batch-warm-par", sonnet, batch="judge"),
            ]
    print(
        f"{'scenario':<20} {'judge':<28} {'calls':>6} {'read':>5} {'write':>5} {'input $':>8} "
        f"{'output $':>8} {'$/criterion':>11} {'full set $':>10} {'40-tok out':>10} {'90-tok out':>10}"
    )
    for r in rows:
        print(
            f"{r['name']:<20} {r['judge']:<28} {r['calls']:>6} {r['cached_share']:>5.0%} "
            f"{r['write_share']:>5.0%} {r['input_usd']:>8.3f} {r['output_usd']:>8.3f} "
            f"{r['per_criterion']:>11.6f} {r['full_set']:>10.2f} {r['full_set_short_output']:>10.2f} "
            f"{r['full_set_real_output']:>10.2f}"
        )
    by = {(r["name"], r["judge"]): r for r in rows}
    official_row, ours = by["official-online", gpt], by["ours-online", gpt]
    ratio = ours["input_usd"] / official_row["input_usd"]
    print(
        f"gpt-4.1: {ours['cached_share']:.0%} of judge input billed as cached (target >= 70%); judge input "
        f"cost {ratio:.2f}x the official layout's (target <= 0.45)"
    )
    anthropic = by["ours-online", sonnet]
    print(
        f"claude-sonnet-4-5: {anthropic['cached_share']:.0%} of judge input read from the cache "
        "(target >= 60%)"
    )
    batched = by["ours-batch-warm-par", gpt]
    print(
        f"full set, gpt-4.1, batch + cache (warm-first, batch requests in parallel): "
        f"${batched['full_set']:.2f} (${batched['full_set_short_output']:.2f} with 40-token answers, "
        f"${batched['full_set_real_output']:.2f} with 90-token ones); "
        f"goal <= $40 against ~${SIMPLE_EVALS_LIST_PRICE:.0f}"
    )
    for judge in (gpt, sonnet):
        warm, cold_par = by["ours-batch-warm-par", judge], by["ours-batch-cold-par", judge]
        print(
            f"{judge} --batch judge, requests in parallel: warm-first ${warm['full_set']:.2f} against "
            f"${cold_par['full_set']:.2f} cold ({warm['full_set'] / cold_par['full_set']:.2f}x)"
        )
    print(f"the fake judge's answers: {ours['output_per_call']:.1f} tokens a call")
    print("every scenario's cost_usd:judge equals the tokens the server billed at list price (checked)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
