"""What the HTTP providers share: one aiohttp session per model, and transport errors as values.

aiohttp is used for model calls because its per-request CPU cost is several times lower than
httpx's at hundreds of concurrent requests (measured in benchmarks/pipeline.py); a run's client must
keep up with ~1,500 calls/s on one core. Transport problems (timeouts, refused or dropped
connections) become TRANSIENT `ProviderError`s, which the retry policy handles.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import msgspec

from healthbench.defaults import DEFAULT_MAX_CONNECTIONS
from healthbench.models.base import Completion, Messages, ModelSettings, ModelSpec
from healthbench.models.errors import FailureKind, ProviderError, http_failure, redact


class HttpClient:
    """A pooled HTTP client sized like the endpoint's concurrency budget (created on first use, inside
    the event loop that uses it)."""

    def __init__(self, timeout: float, max_connections: int) -> None:
        self._timeout = timeout
        self._client_timeout = aiohttp.ClientTimeout(total=timeout)
        self._max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(
                limit=self._max_connections, limit_per_host=self._max_connections
            )
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=self._client_timeout, trust_env=False
            )
        return self._session

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str],
        json: Any = None,
        data: Any = None,
        api_key: str | None = None,
        key_env: str | None = None,
        timeout: float | None = None,
    ) -> str:
        """One request (a JSON body, form ``data`` or none) and the body of a successful answer: a chat
        call, or what the provider batch APIs need besides (file uploads, polling, result downloads).
        Every failure is a `ProviderError` (key redacted): an HTTP error status classified by
        `http_failure`, a timeout or a dropped connection TRANSIENT, a refused or unresolvable address
        UNREACHABLE. ``timeout`` (seconds) replaces the client's for this request (a batch file is
        large). A JSON body is sent as UTF-8 encoded by msgspec (~10x less CPU than aiohttp's
        ``json=``, which calls `json.dumps`)."""
        waited = timeout if timeout is not None else self._timeout
        limit = self._client_timeout if timeout is None else aiohttp.ClientTimeout(total=timeout)
        if json is not None:
            data, headers = encode_json(json), {**headers, "Content-Type": "application/json"}
        try:
            async with self._open().request(
                method, url, data=data, headers=headers, timeout=limit
            ) as response:
                text = await response.text()
                status, retry_after = response.status, response.headers.get("retry-after")
        except TimeoutError:
            raise ProviderError(FailureKind.TRANSIENT, f"timed out after {waited:g}s") from None
        except aiohttp.ClientConnectorError as exc:
            raise ProviderError(FailureKind.UNREACHABLE, f"cannot connect: {_detail(exc, api_key)}") from None
        except aiohttp.ClientError as exc:
            raise ProviderError(FailureKind.TRANSIENT, f"connection error: {_detail(exc, api_key)}") from None
        if status >= 400:
            raise http_failure(status, text, retry_after_header=retry_after, api_key=api_key, key_env=key_env)
        return text

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def _detail(exc: Exception, api_key: str | None) -> str:
    return redact(" ".join(str(exc).split()), api_key) or type(exc).__name__


def encode_json(value: Any) -> bytes:
    """A request's JSON body (UTF-8, non-ASCII unescaped, as `json.dumps` would send it but for
    spacing and float exponents)."""
    return msgspec.json.encode(value)


def http_client(settings: ModelSettings, max_connections: int) -> HttpClient:
    """One client per model object, sized like the endpoint's concurrency budget."""
    return HttpClient(settings.timeout, max_connections)


class HttpProvider:
    """A `ProviderModel` over HTTP: one POST of a JSON body per call. A provider says where it posts
    (`endpoint`), its headers, its body (`build_body`) and how it reads the answer (`parse`)."""

    def __init__(
        self,
        spec: ModelSpec,
        settings: ModelSettings,
        *,
        api_key: str | None,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
    ) -> None:
        self.check(spec, settings)
        self.spec = spec
        self.settings = settings
        self._api_key = api_key
        self._client = http_client(settings, max_connections)
        self._url = self.endpoint(spec.url)

    def check(self, spec: ModelSpec, settings: ModelSettings) -> None:
        """Refuse settings the provider does not have (a ConfigError), before anything is opened."""

    def endpoint(self, base_url: str) -> str:
        raise NotImplementedError

    def headers(self) -> dict[str, str]:
        raise NotImplementedError

    def build_body(self, messages: Messages, json_schema: dict[str, Any] | None = None) -> dict[str, Any]:
        raise NotImplementedError

    def parse(self, body: str) -> Completion:
        raise NotImplementedError

    async def complete(self, messages: Messages, *, json_schema: dict[str, Any] | None = None) -> Completion:
        return self.parse(await self.post(self.build_body(messages, json_schema)))

    async def post(self, body: Any) -> str:
        """One POST of a built body; the answer's text (failures: `ProviderError`, `HttpClient.request`)."""
        return await self._client.request(
            "POST",
            self._url,
            json=body,
            headers=self.headers(),
            api_key=self._api_key,
            key_env=self.spec.key_env,
        )

    async def send(
        self, method: str, url: str, *, json: Any = None, data: Any = None, timeout: float | None = None
    ) -> str:
        """Another request to this provider's API with its headers and key (the batch APIs)."""
        return await self._client.request(
            method,
            url,
            json=json,
            data=data,
            headers=self.headers(),
            api_key=self._api_key,
            key_env=self.spec.key_env,
            timeout=timeout,
        )

    async def aclose(self) -> None:
        await self._client.aclose()
