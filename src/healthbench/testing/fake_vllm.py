"""A stand-in for vLLM's engine stage in tests without a GPU: request rows answered as the fake server
answers them (`fake_reply`), with the same token counts, in the columns vLLM's processor adds.
Shipped in the package (not tests/support) because Ray's worker processes import it by name."""

from __future__ import annotations

from typing import Any

from healthbench.testing.fake_server import count_words, fake_reply


def fake_vllm_engine(row: dict[str, Any]) -> dict[str, Any]:
    """``row`` (messages, sampling_params) with ``generated_text`` and the token counts added."""
    messages = [{"role": str(m["role"]), "content": str(m["content"])} for m in row["messages"]]
    text = fake_reply(messages)
    return {
        **row,
        "generated_text": text,
        "num_input_tokens": sum(count_words(m["content"]) for m in messages),
        "num_generated_tokens": count_words(text),
    }
