"""The vLLM candidate path: request rows and answer rows without a GPU; the real engine where present."""

from __future__ import annotations

import importlib.util
import json

import pytest

from healthbench.executors.vllm import (
    vllm_model_source,
    vllm_processor_config,
    vllm_request,
    vllm_response,
)
from healthbench.models.base import ModelSettings
from healthbench.models.openai import parse_chat_response


def test_model_source_is_the_text_after_vllm() -> None:
    assert vllm_model_source("vllm/Qwen/Qwen2.5-0.5B-Instruct") == "Qwen/Qwen2.5-0.5B-Instruct"
    assert vllm_model_source("vllm//models/llama") == "/models/llama"
    assert vllm_model_source("vllm/") is None
    assert vllm_model_source("openai/gpt-4.1") is None


def test_request_row_has_the_system_message_and_sampling_parameters() -> None:
    settings = ModelSettings(system_message="Be brief.", temperature=0.2, max_tokens=64)
    row = vllm_request(settings, [{"role": "user", "content": "Hi"}])
    assert row == {
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "sampling_params": {"temperature": 0.2, "max_tokens": 64},
    }
    assert json.loads(json.dumps(row)) == row  # travels as JSON through the pipeline


def test_request_row_leaves_out_unset_settings() -> None:
    settings = ModelSettings(temperature=None, max_tokens=None)
    assert vllm_request(settings, [{"role": "user", "content": "Hi"}])["sampling_params"] == {}


def test_answer_row_reads_like_an_http_answer() -> None:
    row = {"generated_text": "Drink water.", "num_input_tokens": 12, "num_generated_tokens": 3}
    completion = parse_chat_response(vllm_response(row, "Qwen/Qwen2.5-0.5B-Instruct"), "fallback")
    assert completion.text == "Drink water."
    assert (completion.usage.input_tokens, completion.usage.output_tokens) == (12, 3)
    assert completion.model == "Qwen/Qwen2.5-0.5B-Instruct"


def test_empty_answer_row_is_an_empty_answer() -> None:
    completion = parse_chat_response(vllm_response({"generated_text": None}, "m"), "m")
    assert completion.text == "" and completion.usage.output_tokens == 0


@pytest.mark.skipif(importlib.util.find_spec("ray") is None, reason="Ray is not installed")
def test_processor_config_passes_engine_arguments_through() -> None:
    config = vllm_processor_config(
        "Qwen/Qwen2.5-0.5B-Instruct",
        {"max_model_len": 4096, "tensor_parallel_size": 1},
        concurrency=2,
        batch_size=8,
    )
    assert config.model_source == "Qwen/Qwen2.5-0.5B-Instruct"
    assert config.engine_kwargs | {"task_type": "generate"} == {
        "max_model_len": 4096,
        "tensor_parallel_size": 1,
        "task_type": "generate",  # added by Ray
    }
    assert (config.concurrency, config.batch_size) == (2, 8)


def _has_gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


@pytest.mark.skipif(
    importlib.util.find_spec("vllm") is None or not _has_gpu(),
    reason="the real vLLM path needs vllm and a CUDA GPU (neither is on this machine)",
)
def test_real_vllm_engine_answers_a_request_row() -> None:  # pragma: no cover - GPU only
    import ray
    from ray.data.llm import build_processor

    config = vllm_processor_config(
        "Qwen/Qwen2.5-0.5B-Instruct", {"max_model_len": 2048}, concurrency=1, batch_size=4
    )
    processor = build_processor(
        config,
        preprocess=lambda row: vllm_request(
            ModelSettings(max_tokens=16), [{"role": "user", "content": "Hi"}]
        ),
        postprocess=lambda row: {"response": vllm_response(row, "Qwen/Qwen2.5-0.5B-Instruct")},
    )
    rows = processor(ray.data.range(1)).take_all()
    assert parse_chat_response(rows[0]["response"], "m").usage.output_tokens > 0
