"""`--profile`: every candidate and judge request, under each profile, equals what the reference sends.

The reference table below is written from the references' own source (not from our code):

simple-evals, openai/simple-evals at 5e623c2b400af62a1278e23595f95b0853d7fe8a
- `simple_evals.py` / `healthbench_eval.py`: chat models are `ChatCompletionSampler(model=...,
  system_message=OPENAI_SYSTEM_MESSAGE_API, max_tokens=2048)`; the grader is
  `ChatCompletionSampler(model="gpt-4.1-2025-04-14", system_message=OPENAI_SYSTEM_MESSAGE_API,
  max_tokens=2048)`.
- `sampler/chat_completion_sampler.py`: `OPENAI_SYSTEM_MESSAGE_API = "You are a helpful assistant."`,
  `temperature: float = 0.5`; `__call__` prepends the system message and sends
  `chat.completions.create(model, messages, temperature, max_tokens)`; it returns the list it sent as
  `actual_queried_message_list`.
- `healthbench_eval.py` `HealthBenchEval.__call__` grades `actual_queried_prompt_messages` (system
  message included); `grade_sample` renders ``"\\n\\n".join(f"{role}: {content}")`` of that list plus
  the answer into `<<conversation>>` and `str(rubric_item)` = ``f"[{points}] {criterion}"`` into
  `<<rubric_item>>`, and sends ``[{"role": "user", "content": grader_prompt}]`` to the grader.
- `sampler/o_chat_completion_sampler.py` (reasoning models): no system message; sends
  `chat.completions.create(model, messages, reasoning_effort)` only.
- `healthbench_meta_eval.py`: the rubric item is the bare criterion text (no points).

Inspect, inspect-evals 0.26.0 `healthbench` (as summarised in issue 12): judge openai/gpt-4o-mini,
temperature 0.0, no max tokens, system message "You are a helpful assistant."; the candidate gets the
dataset conversation with no system message and default generation settings, and the judge sees that
conversation (no system message).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import healthbench.cli  # noqa: F401  (registers the commands)
from healthbench.cli.app import app
from healthbench.config import build_config
from healthbench.data.schema import Conversation, Message, RubricItem
from healthbench.grading.template import GraderTemplate
from healthbench.testing.fake_server import (
    FakeServerConfig,
    fake_answer,
    fetch_requests,
    reset_stats,
    running_fake_server,
)

SYSTEM = "You are a helpful assistant."
QUESTION = "I have had a mild headache since this morning. What should I do?"
CRITERIA = [(5.0, "Advises rest and fluids."), (-3.0, "Recommends an opioid.")]
TEMPLATE_TEXT = (
    "Our own test grader prompt.\n\n<<conversation>>\n\nRubric item: <<rubric_item>>\n\n"
    'Reply with json: "explanation" and "criteria_met".'
)
TEMPLATE = GraderTemplate(TEMPLATE_TEXT, "test")

# What each reference sends (see the module docstring for the source of every line).
# candidate: (system message or None, extra body fields); judge: (model, system, fields, judge sees
# the candidate's system message)
REFERENCE: dict[str, dict[str, Any]] = {
    "simple-evals": {
        "candidate": (SYSTEM, {"temperature": 0.5, "max_tokens": 2048}),
        "judge": ("gpt-4.1-2025-04-14", SYSTEM, {"temperature": 0.5, "max_tokens": 2048}, True),
    },
    "simple-evals/reasoning": {
        "candidate": (None, {"reasoning_effort": "high"}),
        "judge": ("gpt-4.1-2025-04-14", SYSTEM, {"temperature": 0.5, "max_tokens": 2048}, True),
    },
    "inspect": {
        "candidate": (None, {}),
        "judge": ("gpt-4o-mini", SYSTEM, {"temperature": 0.0}, False),
    },
}

runner = CliRunner()


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with running_fake_server(FakeServerConfig(record_requests=200)) as url:
        yield url


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    conversation = Conversation(
        prompt=[Message(role="user", content=QUESTION)],
        prompt_id="conv-profiles",
        rubrics=[RubricItem(criterion=c, points=p, tags=["axis:accuracy"]) for p, c in CRITERIA],
        example_tags=["theme:context_seeking"],
    )
    data = tmp_path / "one.jsonl"
    data.write_text(json.dumps(conversation.model_dump(mode="json")) + "\n")
    template = tmp_path / "grader.txt"
    template.write_text(TEMPLATE_TEXT)
    return {"data": data, "template": template, "store": tmp_path / "runs.db"}


def run_cli(*args: str) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result


def requests_of(url: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    bodies = [r["body"] for r in fetch_requests(url)]
    judge = [b for b in bodies if "criteria_met" in b["messages"][-1]["content"]]
    return [b for b in bodies if b not in judge], judge


def expected_candidate(model: str, reference: tuple[str | None, dict[str, Any]]) -> dict[str, Any]:
    system, fields = reference
    head = [{"role": "system", "content": system}] if system else []
    return {"model": model, "messages": [*head, {"role": "user", "content": QUESTION}], **fields}


def expected_judges(candidate: dict[str, Any], reference: tuple[Any, ...]) -> list[dict[str, Any]]:
    model, system, fields, sees_system = reference
    answer = fake_answer(candidate["messages"])
    shown = candidate["messages"] if sees_system else [{"role": "user", "content": QUESTION}]
    conversation = [*shown, {"role": "assistant", "content": answer}]
    out = []
    for points, criterion in CRITERIA:
        rubric_item = f"[{points}] {criterion}"  # simple-evals' str(RubricItem); points as in the data
        prompt = TEMPLATE.render(conversation, rubric_item)
        messages = [{"role": "system", "content": system}, {"role": "user", "content": prompt}]
        out.append({"model": model, "messages": messages, **fields})
    return out


@pytest.mark.parametrize(
    ("case", "model", "extra"),
    [
        ("simple-evals", "fake-chat-model", []),
        ("simple-evals/reasoning", "o3-mini", ["--reasoning-effort", "high"]),
        ("inspect", "fake-chat-model", []),
    ],
)
def test_every_request_matches_the_reference(
    server: str, files: dict[str, Path], case: str, model: str, extra: list[str]
) -> None:
    reset_stats(server)
    profile = case.split("/")[0]
    run_cli(
        "run", "--profile", profile, "--model", model, "--base-url", server, "--judge-base-url", server,
        "--data", str(files["data"]), "--grader-template", str(files["template"]),
        "--store", str(files["store"]), "--name", "p", *extra,
    )  # fmt: skip
    candidate, judge = requests_of(server)
    reference = REFERENCE[case]
    assert candidate == [expected_candidate(model, reference["candidate"])]
    assert sorted(judge, key=json.dumps) == sorted(
        expected_judges(candidate[0], reference["judge"]), key=json.dumps
    )


def test_explicit_flags_win_over_the_profile(server: str, files: dict[str, Path]) -> None:
    reset_stats(server)
    run_cli(
        "run", "--profile", "simple-evals", "--model", "m", "--base-url", server, "--judge", "my-judge",
        "--judge-base-url", server, "--system-message", "Be brief.", "--judge-temperature", "0",
        "--judge-system-message", "Grade strictly.", "--data", str(files["data"]),
        "--grader-template", str(files["template"]), "--store", str(files["store"]),
    )  # fmt: skip
    (candidate,), judge = requests_of(server)
    assert candidate["messages"][0] == {"role": "system", "content": "Be brief."}
    assert (candidate["temperature"], candidate["max_tokens"]) == (0.5, 2048)
    assert {b["model"] for b in judge} == {"my-judge"}
    assert {(b["temperature"], b["max_tokens"]) for b in judge} == {(0.0, 2048)}
    assert {b["messages"][0]["content"] for b in judge} == {"Grade strictly."}
    # the judge grades the conversation as sent: with the candidate's (explicit) system message
    assert all("system: Be brief.\n\nuser: " in b["messages"][1]["content"] for b in judge)


def test_profile_is_stored_and_in_summary_and_exports(server: str, files: dict[str, Path]) -> None:
    metrics, allresults = files["store"].with_name("m.json"), files["store"].with_name("x_allresults.json")
    result = run_cli(
        "run", "--profile", "inspect", "--model", "m", "--base-url", server, "--judge-base-url", server,
        "--data", str(files["data"]), "--grader-template", str(files["template"]),
        "--store", str(files["store"]), "--name", "stored", "--metrics-out", str(metrics),
        "--allresults-out", str(allresults),
    )  # fmt: skip
    about = {"profile": "inspect", "grader_template_sha256": TEMPLATE.sha256}
    assert f"profile inspect · grader prompt {TEMPLATE.sha256[:12]}" in " ".join(result.output.split())
    written = json.loads(metrics.read_text())
    assert {k: written[k] for k in about} == about
    assert isinstance(written["overall_score"], float)
    meta = json.loads(allresults.read_text())["metadata"]
    assert {k: meta[k] for k in about} == about
    runs = run_cli("results", "stored", "--store", str(files["store"]))
    assert "profile inspect" in " ".join(runs.output.split())


def test_judge_system_message_is_stored_and_keys_the_cache(server: str, files: dict[str, Path]) -> None:
    common = ["--data", str(files["data"]), "--grader-template", str(files["template"]),
              "--store", str(files["store"])]  # fmt: skip
    run_cli("run", "--model", "m", "--base-url", server, "--judge", "j", "--judge-base-url", server,
            "--name", "plain", *common)  # fmt: skip
    reset_stats(server)
    run_cli("regrade", "plain", "--judge", "j", "--judge-base-url", server, "--judge-system-message", "S.",
            "--name", "with-system", "--store", str(files["store"]))  # fmt: skip
    _, judge = requests_of(server)  # not answered from the plain run's cached judge calls
    assert len(judge) == len(CRITERIA)
    assert {b["messages"][0]["content"] for b in judge} == {"S."}
    from healthbench.store import Store

    stored = Store(files["store"]).require_run("with-system").config["run"]["judge"]["settings"]
    assert stored["system_message"] == "S."


def test_regrade_under_a_profile_keeps_the_parents_candidate(server: str, files: dict[str, Path]) -> None:
    common = ["--data", str(files["data"]), "--grader-template", str(files["template"])]
    store = ["--store", str(files["store"])]
    run_cli("run", "--model", "m", "--base-url", server, "--judge", "j", "--judge-base-url", server,
            "--name", "parent", *common, *store)  # fmt: skip
    reset_stats(server)
    run_cli("regrade", "parent", "--profile", "simple-evals", "--judge-base-url", server,
            "--grader-template", str(files["template"]), "--name", "child", *store)  # fmt: skip
    candidate, judge = requests_of(server)
    assert candidate == []  # answers are reused
    assert {b["model"] for b in judge} == {"gpt-4.1-2025-04-14"}
    # the parent sent no system message, so the judge's conversation has none
    assert all(b["messages"][1]["content"].count("user: ") == 1 for b in judge)
    assert all("system: " not in b["messages"][1]["content"] for b in judge)


def test_meta_eval_under_a_profile_sends_the_rubric_without_points(
    server: str, fixtures_dir: Path, files: dict[str, Path]
) -> None:
    reset_stats(server)
    run_cli(
        "meta-eval", "--profile", "inspect", "--judge-base-url", server,
        "--data", str(fixtures_dir / "meta_eval_small.jsonl"), "--limit", "3",
        "--grader-template", str(files["template"]), "--store", str(files["store"]),
    )  # fmt: skip
    _, judge = requests_of(server)
    rows = [json.loads(line) for line in (fixtures_dir / "meta_eval_small.jsonl").read_text().splitlines()]
    rubrics = {r["rubric"] for r in rows}
    assert len(judge) == 3
    for body in judge:
        assert body["model"] == "gpt-4o-mini" and body["temperature"] == 0.0 and "max_tokens" not in body
        assert body["messages"][0] == {"role": "system", "content": SYSTEM}
        shown = body["messages"][1]["content"].split("Rubric item: ", 1)[1].split("\n\nReply with json", 1)[0]
        assert shown in rubrics  # the bare criterion, no "[points]" prefix


def test_profiles_set_the_official_template_and_reject_unknown_names() -> None:
    defaults = {"model": {"spec": "local/smollm2"}, "judge": {"spec": "local/smollm2"}}
    for profile in ("simple-evals", "inspect"):
        config = build_config({"profile": profile}, defaults=defaults)
        assert config.grader_template == "simple-evals"
    from healthbench.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown profile 'nemo'"):
        build_config({"profile": "nemo"}, defaults=defaults)


def test_python_config_gets_the_profile_under_explicit_settings() -> None:
    from healthbench.config import RunConfig

    config = RunConfig.model_validate({"profile": "inspect", "judge": {"spec": "openai/gpt-4.1"}})
    assert config.judge.spec == "openai/gpt-4.1"
    assert (config.judge.settings.temperature, config.judge.settings.system_message) == (0.0, SYSTEM)
    assert config.model is not None and config.model.settings.system_message is None
    # a stored run (every key present, explicit None included) is never changed by its profile
    stored = build_config(
        {"profile": "simple-evals", "model": {"spec": "openai/o3"}}, defaults={"judge": {"spec": "j"}}
    ).model_dump(mode="json")
    assert stored["model"]["settings"]["temperature"] is None
    assert RunConfig.model_validate(stored).model_dump(mode="json") == stored
    assert RunConfig.model_validate({**stored, "model": None}).model is None  # meta-eval: no candidate


def test_a_profile_run_resumes_with_its_stored_settings(server: str, files: dict[str, Path]) -> None:
    args = ["--data", str(files["data"]), "--grader-template", str(files["template"]),
            "--store", str(files["store"])]  # fmt: skip
    run_cli("run", "--profile", "simple-evals", "--model", "m", "--base-url", server,
            "--judge-base-url", server, "--name", "again", *args)  # fmt: skip
    reset_stats(server)
    run_cli("run", "--resume", "again", "--store", str(files["store"]))
    assert fetch_requests(server) == []  # nothing left to do, and the settings still match
