"""What every HTTP upstream executor shares: one pooled HTTP client per tier (the lean client for plain-http
upstreams, httpx for the rest: `upstream_http.py`), opened and closed re-entrantly, and reading Retry-After.

Only the connect timeout is the client's: first-byte, idle and total timeouts are the resilience wrapper's
cancel scopes (`executors/resilience.py`), which also cover the time a slow client takes to read.
Every HTTP executor calls `response_started` once an upstream accepted a request (status 200, headers
read, body not yet): from then on the body is under idle/total timeouts and nothing is retried.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from email.utils import parsedate_to_datetime

import httpx
import trio

from daari.executors.base import Emit, Executor
from daari.executors.upstream_http import UpstreamHttp, open_client
from daari.protocol.events import KeepAlive


class HttpUpstream(Executor):
    _client: UpstreamHttp | None = None

    async def start(self, nursery: trio.Nursery | None = None) -> None:
        """Open the connection pool (nothing runs in `nursery`). Re-entrant after `aclose`."""
        self.http()

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    def http(self) -> UpstreamHttp:
        if self._client is None:
            config = self.config
            self._client = open_client(config.base_url or "", connect_timeout_s=config.timeouts.connect_s,
                                       concurrency=config.concurrency(), choice=config.http_client)
        return self._client

    @property
    def started(self) -> bool:
        return self._client is not None


def endpoint(base_url: str, path: str) -> str:
    """`path` appended to the base URL's path; a query string in base_url (some providers want ?key=) stays."""
    url = httpx.URL(base_url)
    return str(url.copy_with(path=url.path.rstrip("/") + path))


@functools.lru_cache(maxsize=64)
def endpoint_url(base_url: str, path: str) -> httpx.URL:
    """`endpoint` parsed once per tier: httpx parses a str URL on every request (three parses, tens of us,
    with `endpoint` itself); an `httpx.URL` it takes as it is."""
    return httpx.URL(endpoint(base_url, path))


def retry_after_seconds(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait: `retry-after-ms` (OpenAI), else Retry-After as seconds or an HTTP date; None if absent."""
    millis = headers.get("retry-after-ms")
    if millis:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - (time.time() if now is None else now))
    except (TypeError, ValueError):
        return None


async def response_started(emit: Emit) -> None:
    """The upstream accepted the request (headers in): it may be generating, so this attempt is now bought."""
    await emit(KeepAlive())


def request_never_arrived(exc: httpx.TransportError) -> bool:
    """Whether a transport failure happened before the upstream had the whole request (safe to retry)."""
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.WriteError | httpx.PoolTimeout)
