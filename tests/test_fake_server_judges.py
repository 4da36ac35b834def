"""The fake server's judges of known error rates: ``<name>-errNN`` flips the truth (`fake_verdict`) with
probability NN %, independently of every other judge; members of a ``family-<F>-...`` share their errors.
Rates are checked on 4,000 prompts against binomial bounds (the draws are hashes: the same every run)."""

from __future__ import annotations

import math
from pathlib import Path

import httpx
import pytest

from healthbench.config import build_config
from healthbench.data.schema import MetaEvalRecord
from healthbench.data.sources import read_records
from healthbench.grading.template import builtin_template
from healthbench.results.meta_results import stored_labels
from healthbench.runner.meta_eval import run_meta_eval
from healthbench.store import Store
from healthbench.testing.fake_server import (
    FakeServerConfig,
    JudgeErrors,
    answer,
    create_app,
    fake_judge_text,
    fake_judge_verdict,
    fake_verdict,
    judge_errors,
    judge_flips,
    judge_prompt,
    running_fake_server,
    truth_verdict,
)

FIXTURE = Path(__file__).parent / "fixtures" / "meta_eval_small.jsonl"
PROMPTS = [f"Criterion {i}: is it met? Answer with criteria_met." for i in range(4000)]


def share(flags: list[bool]) -> float:
    return sum(flags) / len(flags)


def near(observed: float, p: float, n: int = len(PROMPTS)) -> bool:
    """Within 4 binomial standard deviations of p."""
    return abs(observed - p) <= 4 * math.sqrt(p * (1 - p) / n) + 1e-12


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("judge-err10", JudgeErrors(0.10)),
        ("gpt-4.1-mini-err5", JudgeErrors(0.05)),
        ("judge-err0", JudgeErrors(0.0)),
        ("judge-err100", JudgeErrors(1.0)),
        ("family-a-1-err20", JudgeErrors(0.20, "a", 1.0)),
        ("family-a-err20", JudgeErrors(0.20, "a", 1.0)),
        ("family-b2-x-shared50-err30", JudgeErrors(0.30, "b2", 0.5)),
        ("judge", None),
        ("fake-model", None),
        ("judge-err101", None),
        ("judge-err10-mini", None),
        ("err10", None),
    ],
)
def test_judge_names(model: str, expected: JudgeErrors | None) -> None:
    assert judge_errors(model) == expected


def test_an_exact_judge_answers_the_truth_as_before() -> None:
    for prompt in PROMPTS[:200]:
        assert fake_judge_verdict(prompt, "judge") is fake_verdict(prompt)
        assert fake_judge_text(prompt, model="judge") == fake_judge_text(prompt)
        assert not judge_flips(prompt, "fake-model")


@pytest.mark.parametrize("rate", [0, 10, 20, 30, 100])
def test_a_judge_errs_at_its_rate_whatever_the_truth(rate: int) -> None:
    model = f"judge-err{rate}"
    wrong = [fake_judge_verdict(p, model) != fake_verdict(p) for p in PROMPTS]
    assert near(share(wrong), rate / 100)
    met = [fake_verdict(p) for p in PROMPTS]
    assert near(share([w for w, m in zip(wrong, met, strict=True) if m]), rate / 100, sum(met))
    assert near(share([w for w, m in zip(wrong, met, strict=True) if not m]), rate / 100, len(met) - sum(met))


def test_the_met_rate_moves_the_truth_not_the_errors() -> None:
    for prompt in PROMPTS[:500]:
        flipped = judge_flips(prompt, "judge-err30")
        assert fake_judge_verdict(prompt, "judge-err30", 0.2) is (fake_verdict(prompt, 0.2) != flipped)


def test_judges_err_independently() -> None:
    a = [judge_flips(p, "judge-a-err20") for p in PROMPTS]
    b = [judge_flips(p, "judge-b-err30") for p in PROMPTS]
    assert near(share(a), 0.2) and near(share(b), 0.3)
    assert near(share([x and y for x, y in zip(a, b, strict=True)]), 0.2 * 0.3)


def test_a_family_shares_its_errors() -> None:
    one = [judge_flips(p, "family-a-1-err20") for p in PROMPTS]
    assert one == [judge_flips(p, "family-a-2-err20") for p in PROMPTS]  # shared 100 %: the same errors
    assert near(share(one), 0.2)
    # a lower rate in the family errs on a subset of a higher rate's criteria
    low = [judge_flips(p, "family-a-3-err10") for p in PROMPTS]
    assert all(o for o, lo in zip(one, low, strict=True) if lo)
    other = [judge_flips(p, "family-b-1-err20") for p in PROMPTS]  # another family: independent
    assert near(share([x and y for x, y in zip(one, other, strict=True)]), 0.04)


def test_a_partly_shared_family() -> None:
    # each member takes the family's draw with probability s: P(both err) = s² p + (1 - s²) p²
    p, s = 0.3, 0.5
    x = [judge_flips(q, "family-c-1-shared50-err30") for q in PROMPTS]
    y = [judge_flips(q, "family-c-2-shared50-err30") for q in PROMPTS]
    assert near(share(x), p) and near(share(y), p)
    assert near(share([u and v for u, v in zip(x, y, strict=True)]), s * s * p + (1 - s * s) * p * p)


def test_truth_of_a_request() -> None:
    messages = [
        {"role": "system", "content": "You grade."},
        {"role": "user", "content": [{"type": "text", "text": "Conversation ... criteria_met?"}]},
    ]
    assert truth_verdict(messages) is fake_verdict("Conversation ... criteria_met?")
    assert truth_verdict(messages, 0.0) is False


async def test_the_server_answers_each_judge_by_its_model_name() -> None:
    app = create_app(FakeServerConfig())
    models = ["judge", "judge-err30", "family-a-1-err40"]
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://fake") as client:
        flipped = 0
        for prompt in PROMPTS[:40]:
            messages = [{"role": "user", "content": prompt}]
            assert judge_prompt(messages) == prompt
            for model in models:
                body = {"model": model, "messages": messages}
                reply = (await client.post("/v1/chat/completions", json=body)).json()
                assert reply["choices"][0]["message"]["content"] == fake_judge_text(prompt, model=model)
                anthropic = (await client.post("/v1/messages", json={**body, "max_tokens": 100})).json()
                assert anthropic["content"][0]["text"] == fake_judge_text(prompt, model=model)
                # a batched request gets the online answer
                assert answer(FakeServerConfig(), body, False)[1]["choices"] == reply["choices"]
                flipped += fake_judge_verdict(prompt, model) != truth_verdict(messages)
        assert flipped > 0  # some of the 80 erring answers differ from the truth


def test_a_meta_eval_of_an_erring_judge_measures_its_errors(tmp_path: Path) -> None:
    """Meta-eval rows whose physicians' label is the truth of their judge prompt, graded through the
    engine by ``judge-err30``: the stored labels are that judge's answers, and its rates follow."""
    template = builtin_template()
    records = read_records(FIXTURE, MetaEvalRecord)
    prompts = []
    for record in records:
        conversation = [{"role": m.role, "content": m.content} for m in record.prompt]
        conversation.append({"role": "assistant", "content": record.completion})
        prompts.append(template.render(conversation, record.rubric))
    truthful = tmp_path / "truth.jsonl"
    truthful.write_text(
        "".join(
            record.model_copy(
                update={"binary_labels": [fake_verdict(p)], "anonymized_physician_ids": ["x"]}
            ).model_dump_json()
            + "\n"
            for record, p in zip(records, prompts, strict=True)
        )
    )
    store = Store(str(tmp_path / "runs.db"))
    with running_fake_server() as url:
        cfg = build_config(
            {"dataset": "meta_eval", "data": str(truthful), "judge": {"spec": "judge-err30", "base_url": url}}
        )
        outcome = run_meta_eval(cfg, store=store, name="erring")
    rows, labels = stored_labels(store, outcome.run)
    assert labels == [fake_judge_verdict(p, "judge-err30") for p in prompts]
    wrong = sum(label != row.binary_labels[0] for label, row in zip(labels, rows, strict=True))
    assert wrong == sum(judge_flips(p, "judge-err30") for p in prompts) > 0
