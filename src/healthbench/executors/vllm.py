"""Candidates in the cluster with vLLM: `ray.data.llm`'s vLLM engine processor, rows in and out.

A request row carries the chat messages (the candidate's system message first, as `chat_body` sends
it) and vLLM sampling parameters from the same `ModelSettings`; an answer row (``generated_text``,
token counts) becomes the OpenAI-compatible response JSON that the HTTP path returns, so everything
after the call (parsing, usage, cache, store) is shared. Needs GPU workers with vLLM installed.

`VllmEndpoint` is the candidate ``vllm/HF_ID_OR_PATH`` as `executors.ray_calls.call_through_ray` calls it:
the same batches, the same bound on what a killed driver repeats.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from healthbench.executors.ray_calls import RUN_AHEAD
from healthbench.models.base import Messages, ModelSettings, ModelSpec

CONCURRENT_BATCHES = 8  # batches one vLLM engine works on at once (vLLMEngineProcessorConfig's default)


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
        max_concurrent_batches=CONCURRENT_BATCHES,
    )


@dataclass(frozen=True)
class VllmEndpoint:
    """The candidate on the cluster's GPUs: `vLLMEngineProcessorConfig` rows in and out."""

    spec: ModelSpec  # provider "vllm"; ``model`` is the Hugging Face id or path
    settings: ModelSettings
    engine_kwargs: Mapping[str, Any] = field(default_factory=dict)
    concurrency: int = 1  # vLLM engine replicas
    batch_size: int = 32

    @property
    def in_flight(self) -> int:
        return RUN_AHEAD * CONCURRENT_BATCHES * self.batch_size * self.concurrency

    def body(self, messages: Messages, schema: dict[str, Any] | None) -> dict[str, Any]:
        return vllm_request(self.settings, messages)

    def config(self) -> Any:
        """The `vLLMEngineProcessorConfig` (needs Ray; building the processor also needs transformers)."""
        return vllm_processor_config(
            self.spec.model, self.engine_kwargs, concurrency=self.concurrency, batch_size=self.batch_size
        )

    def processor(self) -> Any:
        from ray.data.llm import build_processor

        answer = functools.partial(vllm_answer_row, model=self.spec.model)
        return build_processor(self.config(), preprocess=vllm_input_row, postprocess=answer)


def vllm_input_row(row: dict[str, Any]) -> dict[str, Any]:
    return {"tag": row["tag"], **json.loads(row["body"])}


def vllm_answer_row(row: dict[str, Any], *, model: str) -> dict[str, Any]:
    return {"tag": int(row["tag"]), "response": vllm_response(row, model)}
