"""What the HTTP providers share: the httpx client they own and the mapping of transport errors."""

from __future__ import annotations

from typing import Any

import httpx

from healthbench.models.base import ModelSettings
from healthbench.models.errors import FailureKind, ProviderError, redact

SHARD_SIZE = 16


class ShardedClient:
    """httpx clients sized together like the endpoint's concurrency budget, used least-busy first.

    httpx's connection pool scans all of its connections for every request, which costs O(n²) CPU with
    hundreds of concurrent requests; several small pools keep that cost flat.
    """

    def __init__(self, timeout: float, max_connections: int, shard_size: int = SHARD_SIZE) -> None:
        count = max(1, -(-max_connections // shard_size))
        per_shard = -(-max_connections // count)
        limits = httpx.Limits(max_connections=per_shard, max_keepalive_connections=per_shard)
        self._clients = [
            httpx.AsyncClient(timeout=httpx.Timeout(timeout), limits=limits) for _ in range(count)
        ]
        self._busy = [0] * count

    async def post(self, url: str, *, json: Any, headers: dict[str, str]) -> httpx.Response:
        index = min(range(len(self._clients)), key=self._busy.__getitem__)
        self._busy[index] += 1
        try:
            return await self._clients[index].post(url, json=json, headers=headers)
        finally:
            self._busy[index] -= 1

    async def aclose(self) -> None:
        for client in self._clients:
            await client.aclose()


def http_client(settings: ModelSettings, max_connections: int) -> ShardedClient:
    """One (sharded) client per model object, sized like the endpoint's concurrency budget."""
    return ShardedClient(settings.timeout, max_connections)


def transport_failure(exc: httpx.HTTPError, timeout: float, api_key: str | None) -> ProviderError:
    """A timeout or connection problem: always worth retrying."""
    if isinstance(exc, httpx.TimeoutException):
        return ProviderError(FailureKind.TRANSIENT, f"timed out after {timeout:g}s ({type(exc).__name__})")
    detail = redact(str(exc), api_key) or type(exc).__name__
    return ProviderError(FailureKind.TRANSIENT, f"connection error: {detail}")
