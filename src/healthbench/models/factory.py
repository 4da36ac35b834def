"""Build a `ChatModel` from a spec: pick the provider adapter (imported lazily) and wrap it once.

``import healthbench`` never needs llama-cpp-python; a missing optional package becomes a ConfigError
naming the exact ``pip install`` to run, raised here, when the model is created.
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import random
from collections.abc import Mapping

from healthbench.defaults import DEFAULT_MAX_CONNECTIONS
from healthbench.errors import ConfigError
from healthbench.models.base import (
    ModelSettings,
    ModelSpec,
    ProviderModel,
    resolve_api_key,
)
from healthbench.models.limits import ConnectionPool, ManagedModel, RetryPolicy, Sleep

# provider -> (module, class, optional packages it needs, install hint)
_ADAPTERS: dict[str, tuple[str, str, tuple[str, ...], str]] = {
    "openai": ("healthbench.models.openai", "OpenAIChatModel", (), ""),
    "anthropic": ("healthbench.models.anthropic", "AnthropicChatModel", (), ""),
    "local": (
        "healthbench.models.local",
        "LocalChatModel",
        ("llama_cpp",),
        "pip install 'healthbench[local]'",
    ),
}


def _require(packages: tuple[str, ...], spec: ModelSpec, hint: str) -> None:
    for package in packages:
        try:
            found = importlib.util.find_spec(package) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            raise ConfigError(f"{spec.name} needs the Python package {package}: {hint}")


def _adapter(spec: ModelSpec) -> tuple[str, str, tuple[str, ...], str]:
    if spec.provider == "vllm":  # executed by healthbench.executors.vllm, never in this process
        raise ConfigError(f"{spec.name} runs on a Ray cluster with vLLM: use --executor ray (docs/scale.md)")
    return _ADAPTERS[spec.provider]


def check_model(spec: ModelSpec, environ: Mapping[str, str] | None = None) -> None:
    """Raise the ConfigError `create_model` would (missing extra, missing key) without creating it,
    so that a run is not stored before its models are known to be usable."""
    _, _, packages, hint = _adapter(spec)
    _require(packages, spec, hint)
    if spec.provider != "local":
        resolve_api_key(spec, environ)


def create_provider(
    spec: ModelSpec,
    settings: ModelSettings,
    *,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
    environ: Mapping[str, str] | None = None,
) -> ProviderModel:
    """The bare provider adapter for `spec` (no retries, no limits): mostly for tests and tools."""
    module_name, class_name, packages, hint = _adapter(spec)
    _require(packages, spec, hint)
    adapter = getattr(importlib.import_module(module_name), class_name)
    if spec.provider == "local":
        return adapter(spec, settings)  # type: ignore[no-any-return]
    api_key = resolve_api_key(spec, environ)
    return adapter(spec, settings, api_key=api_key, max_connections=max_connections)  # type: ignore[no-any-return]


def create_model(
    spec: ModelSpec,
    settings: ModelSettings | None = None,
    *,
    pool: ConnectionPool,
    policy: RetryPolicy | None = None,
    environ: Mapping[str, str] | None = None,
    sleep: Sleep = asyncio.sleep,
    rng: random.Random | None = None,
) -> ManagedModel:
    """A ready `ChatModel`: the provider adapter wrapped in retries, the pool's limits and call stats."""
    settings = settings or ModelSettings()
    limits = pool.limits_for(spec.connection_key)
    provider = create_provider(spec, settings, max_connections=limits.max_connections, environ=environ)
    return ManagedModel(provider, policy or RetryPolicy(), pool, sleep=sleep, rng=rng)
