"""Candidates in the cluster with vLLM: `ray.data.llm`'s vLLM engine processor, rows in and out.

A request row carries the chat messages (the candidate's system message first, as `chat_body` sends
it) and vLLM sampling parameters from the same `ModelSettings`; an answer row (``generated_text``,
token counts) becomes the OpenAI-compatible response JSON that the HTTP path returns, so everything
after the call (parsing, usage, cache, store) is shared. Needs GPU workers with vLLM installed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from healthbench.models.base import Messages, ModelSettings

VLLM_PREFIX = "vllm/"


def vllm_model_source(spec_text: str) -> str | None:
    """The Hugging Face id or path of ``vllm/HF_ID_OR_PATH``; None for any other spec."""
    if not spec_text.startswith(VLLM_PREFIX) or not spec_text[len(VLLM_PREFIX) :].strip():
        return None
    return spec_text[len(VLLM_PREFIX) :].strip()


def vllm_request(settings: ModelSettings, messages: Messages) -> dict[str, Any]:
    """The processor's input row for ``messages`` (temperature and max_tokens as for HTTP)."""
    sent: list[dict[str, str]] = [dict(m) for m in messages]
    if settings.system_message is not None:
        sent = [{"role": "system", "content": settings.system_message}, *sent]
    sampling: dict[str, Any] = {}
    if settings.temperature is not None:
        sampling["temperature"] = settings.temperature
    if settings.max_tokens is not None:
        sampling["max_tokens"] = settings.max_tokens
    return {"messages": sent, "sampling_params": sampling}


def vllm_response(row: Mapping[str, Any], model: str) -> str:
    """An answer row as the chat-completions JSON `parse_chat_response` reads."""
    return json.dumps(
        {
            "model": model,
            "choices": [
                {"message": {"content": str(row.get("generated_text") or "")}, "finish_reason": None}
            ],
            "usage": {
                "prompt_tokens": int(row.get("num_input_tokens") or 0),
                "completion_tokens": int(row.get("num_generated_tokens") or 0),
            },
        }
    )


def vllm_processor_config(
    model_source: str, engine_kwargs: Mapping[str, Any] | None, *, concurrency: int, batch_size: int
) -> Any:
    """`vLLMEngineProcessorConfig` for the candidate; engine arguments are passed through as given."""
    from ray.data.llm import vLLMEngineProcessorConfig

    return vLLMEngineProcessorConfig(
        model_source=model_source,
        engine_kwargs=dict(engine_kwargs or {}),
        concurrency=concurrency,
        batch_size=batch_size,
    )
