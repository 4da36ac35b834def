"""Job service: result documents of a 5,000-conversation job and status latency under a busy job.

1. A 5,000-conversation job (synthetic rubric of 6 criteria each) runs through the service's own
   workers (`Client.local`) against the fake server with 0 latency.
2. With `healthbench serve` on that store (a real uvicorn process), over HTTP: aggregate-scores
   (time), and row-scores streamed (time, rows/s, the client's peak traced memory while iterating
   next to the size of the whole document: the ratio shows the rows never sit in memory at once,
   and the service's peak RSS).
3. Status p50/p99 for 50 concurrent clients, first with the service idle, then while a job runs at
   256 connections against a 1-second-latency fake server (target p99 < 100 ms, 0 errors). The two
   are measured side by side in one run, so their ratio holds under load from other processes.

4. A burst of 200 concurrent status GETs (200 connections, all sent at once, ``--rounds`` times)
   while a job runs at 256 connections against a 1-second-latency fake server, next to the same
   200 GETs one at a time (target: burst p99 < 250 ms with the Prometheus metrics on, 0 errors).
   Two services of this tree run side by side, each on its own store with its own busy job: one as
   `healthbench serve` runs (metrics on), one with its metrics off (`METRICS_OFF`: the HTTP
   middleware passes requests through untimed, the worker's engine gets no observer). With
   ``--baseline-src DIR`` (a ``src`` folder of another commit, e.g. ``git archive main src | tar -x
   -C DIR``) a third service runs that code. The floor is the same burst of ``GET /health`` on the
   metrics-on service (HTTP server and client only: no token, no store). Every round bursts every
   side once, the order of the sides reversed from one round to the next, so that each sees the same
   load from other processes; each side's figure is the median over the rounds of its round's p99.

    python benchmarks/service.py [--conversations 5000] [--seconds 10] [--rounds 10]
    python benchmarks/service.py --burst-only --rounds 10 [--baseline-src /tmp/base/src]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import statistics
import tempfile
import time
import tracemalloc
from pathlib import Path

import aiohttp
import httpx

ROOT = Path(__file__).resolve().parents[1]
import support_path  # noqa: E402, F401  (src/ and tests/ on sys.path)
from support.process import fake_server_process  # noqa: E402
from support.service_process import LOOPBACK, service_process  # noqa: E402

from healthbench.client import Client  # noqa: E402
from healthbench.service.app import PREFIX  # noqa: E402
from healthbench.service.auth import create_token  # noqa: E402
from healthbench.store.jobs import JobStore  # noqa: E402
from healthbench.store.runs import Store  # noqa: E402


def synthetic_jsonl(n: int, criteria: int = 6, seed: int = 0) -> str:
    rng = random.Random(seed)
    lines = []
    for i in range(n):
        rubrics = [
            {
                "criterion": f"Criterion {i}.{j}: " + "words " * rng.randint(5, 20),
                "points": rng.choice([-5, 3, 5, 7, 10]),
                "tags": ["level:example", rng.choice(["axis:accuracy", "axis:completeness"])],
            }
            for j in range(criteria)
        ]
        rubrics[0]["points"] = 6
        prompt = [{"role": "user", "content": f"question {i} " + "text " * rng.randint(10, 60)}]
        tags = [rng.choice(["theme:emergency_referrals", "theme:hedging", "theme:communication"])]
        lines.append(
            json.dumps({"prompt": prompt, "prompt_id": f"s{i}", "rubrics": rubrics, "example_tags": tags})
        )
    return "\n".join(lines) + "\n"


def roles(url: str) -> dict[str, dict[str, str]]:
    return {"model": {"spec": "cand", "base_url": url}, "judge": {"spec": "judge", "base_url": url}}


def build_job(store_path: str, n: int) -> float:
    with fake_server_process() as fake, Client.local(store_path) as client:
        started = time.perf_counter()
        client.evaluation.benchmark_jobs.create(
            name="big", data_jsonl=synthetic_jsonl(n), concurrency=256, max_retries=0, **roles(fake)
        )
        final = client.wait_until_done("big", interval=0.5)
        assert final.status == "completed", final
        return time.perf_counter() - started


def rss_peak_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def documents(store_path: str, token: str) -> None:
    with (
        service_process(store_path, *LOOPBACK) as service,
        Client(service.url, token=token, timeout=600) as client,
    ):
        results = client.evaluation.benchmark_jobs.results
        started = time.perf_counter()
        aggregate = results.aggregate_scores.download(name="big")
        aggregate_s = time.perf_counter() - started
        print(f"aggregate-scores: {aggregate_s:.2f} s for {len(aggregate['metrics'])} metrics")

        tracemalloc.start()
        started = time.perf_counter()
        rows, size = 0, 0
        for row in results.row_scores.download(name="big"):
            rows += 1
            size += len(json.dumps(row))
        stream_s = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        print(
            f"row-scores streamed: {rows} rows in {stream_s:.2f} s ({rows / stream_s:,.0f} rows/s); "
            f"document {size / 1e6:.1f} MB, client peak traced memory {peak / 1e6:.2f} MB "
            f"(ratio {peak / size:.3f}); service peak RSS {rss_peak_mb(service.process.pid):.0f} MB"
        )


async def poll_status(
    url: str, token: str, seconds: float, pause: float, clients: int = 50
) -> tuple[list[float], int]:
    """``clients`` clients polling the status for ``seconds``, each waiting ``pause`` between polls."""
    latencies: list[float] = []
    errors = 0
    path = f"{url}{PREFIX.format(workspace='default')}/busy/status"
    deadline = time.perf_counter() + seconds
    async with status_session(token, clients) as http:

        async def one_client() -> None:
            nonlocal errors
            while time.perf_counter() < deadline:
                latency, failed = await timed_get(http, path)
                latencies.append(latency)
                errors += failed
                await asyncio.sleep(pause)

        await asyncio.gather(*(one_client() for _ in range(clients)))
    return latencies, errors


def status_session(token: str, clients: int) -> aiohttp.ClientSession:
    """A client session of ``clients`` connections at most, carrying the token."""
    return aiohttp.ClientSession(
        headers={"Authorization": f"Bearer {token}"},
        timeout=aiohttp.ClientTimeout(total=30),
        connector=aiohttp.TCPConnector(limit=clients),
    )


async def timed_get(http: aiohttp.ClientSession, url: str) -> tuple[float, bool]:
    """One GET read to its end: its latency, and whether it failed (an answer but 200, a client error)."""
    started = time.perf_counter()
    try:
        async with http.get(url) as response:
            await response.read()
            failed = response.status != 200
    except aiohttp.ClientError:
        failed = True
    return time.perf_counter() - started, failed


def report(label: str, latencies: list[float], errors: int) -> float:
    cuts = statistics.quantiles(latencies, n=100)
    p50, p99 = cuts[49] * 1000, cuts[98] * 1000
    print(
        f"status, 50 clients, {label}: {len(latencies)} requests, "
        f"p50 {p50:.1f} ms, p99 {p99:.1f} ms, {errors} errors"
    )
    return p99


def status_under_load(store_path: str, token: str, seconds: float) -> None:
    modes = {"back to back": 0.0, "each client every 0.5 s": 0.5}
    body = {"data_jsonl": synthetic_jsonl(1000, seed=1), "concurrency": 256, "max_retries": 0}
    with (
        fake_server_process("--latency", "1.0") as fake,
        service_process(store_path, "--connections", "256", *LOOPBACK) as service,
    ):
        client = Client(service.url, token=token)
        jobs = client.evaluation.benchmark_jobs
        jobs.create(name="busy", **body, **roles(fake))
        jobs.cancel(name="busy")  # queued, never run: the idle baseline polls a real job row
        idle = {
            mode: asyncio.run(poll_status(service.url, token, seconds, pause))
            for mode, pause in modes.items()
        }
        jobs.delete(name="busy")
        jobs.create(name="busy", **body, **roles(fake))
        while jobs.get_status(name="busy").status_details.samples_done == 0:
            time.sleep(0.2)
        busy = {
            mode: asyncio.run(poll_status(service.url, token, seconds, pause))
            for mode, pause in modes.items()
        }
        details = jobs.get_status(name="busy").status_details
        jobs.cancel(name="busy")
        client.wait_until_done("busy", interval=0.5)
        client.close()
    for mode in modes:
        p99_idle = report(f"{mode}, service idle", *idle[mode])
        p99_busy = report(f"{mode}, job at 256 connections, 1 s latency", *busy[mode])
        print(f"  p99 busy / idle: {p99_busy / p99_idle:.2f}")
    print(
        f"job progress while polled: {details.progress:.1f}% "
        f"({details.samples_done} samples, {details.criteria_done} criteria)"
    )


async def burst_round(url: str, path: str, token: str, clients: int) -> tuple[list[float], int]:
    """``clients`` GETs of ``path`` sent at once on their own connections; latencies and errors."""
    async with status_session(token, clients) as http:
        answers = await asyncio.gather(*(timed_get(http, url + path) for _ in range(clients)))
    return [latency for latency, _ in answers], sum(failed for _, failed in answers)


async def one_at_a_time(url: str, path: str, token: str, count: int) -> list[float]:
    latencies = []
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
        for _ in range(count):
            started = time.perf_counter()
            async with http.get(url + path) as response:
                await response.read()
                assert response.status == 200, response.status
            latencies.append(time.perf_counter() - started)
    return latencies


def percentiles_ms(latencies: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(latencies, n=100)
    return cuts[49] * 1000, cuts[98] * 1000


def fresh_store(folder: str, label: str) -> tuple[str, str]:
    store_path = str(Path(folder) / f"{label}.db")
    store = Store(store_path)
    token = create_token(JobStore(store), ["*"])
    store.close()
    return store_path, token


STATUS_PATH = PREFIX.format(workspace="default") + "/busy/status"


# `healthbench serve` with its Prometheus metrics off (section 4's "metrics off" side): put on that
# service's PYTHONPATH as sitecustomize.py, it runs in the service process and in its worker process
METRICS_OFF = """\
import healthbench.service.jobs as jobs
import healthbench.service.metrics as metrics


async def _passed_through(self, scope, receive, send):
    await self.app(scope, receive, send)  # no request counted or timed


metrics.HttpMetrics.__call__ = _passed_through
jobs._observability = jobs.Observability  # the worker's jobs: no observer, no job histogram
"""


def burst_sides(folder: str, baseline_src: str | None) -> dict[str, str]:
    """Each side of section 4 and the PYTHONPATH its service runs with."""
    src = str(ROOT / "src")
    off = Path(folder) / "metrics-off"
    off.mkdir()
    (off / "sitecustomize.py").write_text(METRICS_OFF)
    sides = {"metrics on": src, "metrics off": f"{off}{os.pathsep}{src}"}
    return sides | ({"baseline": baseline_src} if baseline_src else {})


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f}, {five:.1f}, {fifteen:.1f} on {os.cpu_count()} cores"


def status_burst(folder: str, rounds: int, clients: int, baseline_src: str | None, jobs: int) -> None:
    """Section 4: the status burst while a job runs, metrics on and off (and ``baseline_src``'s
    service) side by side; the floor is the same burst of ``GET /health`` on the metrics-on service."""
    body = {"data_jsonl": synthetic_jsonl(jobs, seed=1), "concurrency": 256, "max_retries": 0}
    sides = burst_sides(folder, baseline_src)
    targets: dict[str, tuple[str, str, str]] = {}  # label -> url, path, token
    print(f"status burst: starting ({load_average()})")
    with contextlib.ExitStack() as stack:
        fake = stack.enter_context(fake_server_process("--latency", "1.0"))
        for label, pythonpath in sides.items():
            store_path, token = fresh_store(folder, label.replace(" ", "-"))
            service = stack.enter_context(
                service_process(store_path, "--connections", "256", *LOOPBACK, env={"PYTHONPATH": pythonpath})
            )
            client = stack.enter_context(Client(service.url, token=token))
            client.evaluation.benchmark_jobs.create(name="busy", **body, **roles(fake))
            while client.evaluation.benchmark_jobs.get_status(name="busy").status_details.samples_done == 0:
                time.sleep(0.2)
            targets[label] = (service.url, STATUS_PATH, token)
        url, _, token = targets["metrics on"]
        targets["floor: /health"] = (url, "/health", token)
        single = {label: asyncio.run(one_at_a_time(*target, clients)) for label, target in targets.items()}
        bursts: dict[str, list[list[float]]] = {label: [] for label in targets}
        errors = dict.fromkeys(targets, 0)
        for number in range(rounds):  # the order reversed every other round: the same load for each
            order = list(targets) if number % 2 == 0 else list(reversed(targets))
            for label in order:
                latencies, failed = asyncio.run(burst_round(*targets[label], clients))
                bursts[label].append(latencies)
                errors[label] += failed
                time.sleep(0.2)
        progress = {
            label: Client(url, token=token).evaluation.benchmark_jobs.get_status(name="busy").status_details
            for label, (url, _, token) in targets.items()
            if label in sides
        }
        scraped = {
            label: httpx.get(
                f"{targets[label][0]}/metrics",
                headers={"Authorization": f"Bearer {targets[label][2]}"},
                timeout=30,
                trust_env=False,
            ).text
            for label in ("metrics on", "metrics off")
        }
    print(
        f"status burst: {clients} concurrent GETs x {rounds} rounds while a job runs at 256 connections "
        f"against a 1 s fake server, each side its own service, job and store ({load_average()})"
    )
    p99s = {}
    for label in targets:
        round_p99s = [percentiles_ms(latencies)[1] for latencies in bursts[label]]
        pooled = [latency for latencies in bursts[label] for latency in latencies]
        p50, p99 = percentiles_ms(pooled)
        p99s[label] = statistics.median(round_p99s)
        print(
            f"  {label:>15}: round p99 median {p99s[label]:.0f} ms (min {min(round_p99s):.0f}, max "
            f"{max(round_p99s):.0f}); all rounds p50 {p50:.0f}, p99 {p99:.0f} ms; {errors[label]} errors "
            f"of {len(pooled)}; one at a time p50 {percentiles_ms(single[label])[0]:.2f} ms"
        )
    for label, details in progress.items():
        print(f"  {label:>15}: job at {details.progress:.1f}% when the rounds ended")
    for label, text in scraped.items():  # what each side's /metrics counted of its job and GETs
        counted = "healthbench_model_calls_total{" in text and "healthbench_http_requests_total{" in text
        print(f"  {label:>15}: /metrics counted the job's calls and the status GETs: {counted}")
    on, off = p99s["metrics on"], p99s["metrics off"]
    print(f"  burst p99 (median of rounds) metrics on / off: {on:.0f} / {off:.0f} ms = {on / off:.2f}")
    print(f"  burst p99 metrics on / floor: {on / p99s['floor: /health']:.2f}")
    if "baseline" in p99s:
        print(f"  burst p99 metrics on / baseline: {on / p99s['baseline']:.2f}")
    pooled = percentiles_ms([x for latencies in bursts["metrics on"] for x in latencies])[1]
    clean = errors["metrics on"] == 0
    print(
        "  target (metrics on: burst p99 < 250 ms, 0 errors): "
        f"median of the rounds' p99 {'met' if on < 250 and clean else 'NOT met'}, "
        f"p99 of all rounds' GETs {'met' if pooled < 250 and clean else 'NOT met'}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conversations", type=int, default=5000)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=10, help="bursts of the status burst (section 4)")
    parser.add_argument("--clients", type=int, default=200, help="GETs in one burst")
    parser.add_argument("--baseline-src", help="a src folder of another commit to run side by side")
    parser.add_argument("--burst-only", action="store_true", help="only section 4")
    parser.add_argument(
        "--burst-job", type=int, default=4000, help="conversations of each busy job of section 4"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        status_burst(folder, args.rounds, args.clients, args.baseline_src, args.burst_job)
        if args.burst_only:
            return
        store_path = str(Path(folder) / "service.db")
        store = Store(store_path)
        token = create_token(JobStore(store), ["*"])
        store.close()
        built = build_job(store_path, args.conversations)
        print(f"{args.conversations}-conversation job (6 criteria each) through the workers: {built:.1f} s")
        documents(store_path, token)
        status_under_load(store_path, token, args.seconds)


if __name__ == "__main__":
    main()
