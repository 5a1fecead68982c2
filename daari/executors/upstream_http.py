"""Which HTTP client an upstream tier holds, and the interface both kinds offer its executor.

The lean client (`lean_http.py`) for a plain `http://` upstream reached without a proxy: local model servers,
where daari's own CPU per request is most of the hop's cost. httpx as shipped for everything else: `https`
(its TLS settings and certificate stores), proxies from the environment (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY,
NO_PROXY), and whatever else an upstream across a network needs. A tier's `http_client: httpx` keeps httpx for
a plain-http upstream too (a server the lean client does not get along with).
"""

from __future__ import annotations

import urllib.request
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

from daari.executors.lean_http import LeanClient


class UpstreamResponse(Protocol):
    """What executors read of a response: httpx.Response and lean_http.LeanResponse both have it."""

    @property
    def status_code(self) -> int: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    @property
    def reason_phrase(self) -> str: ...

    @property
    def content(self) -> bytes: ...

    @property
    def text(self) -> str: ...

    def json(self, **kwargs: Any) -> Any: ...

    def raise_for_status(self) -> Any: ...

    async def aread(self) -> bytes: ...

    def aiter_bytes(self) -> AsyncIterator[bytes]: ...

    def aiter_lines(self) -> AsyncIterator[str]: ...


class UpstreamHttp(Protocol):
    """What executors call on their client: httpx.AsyncClient and lean_http.LeanClient both have it."""

    def stream(self, method: str, url: str | httpx.URL, *, content: bytes | None = None, json: Any = None,
               headers: Mapping[str, str] | None = None) -> AbstractAsyncContextManager[UpstreamResponse]: ...

    # (the `timeout` parameters are httpx's interface, hence the noqa)
    async def post(self, url: str | httpx.URL, *, content: bytes | None = None, json: Any = None,
                   headers: Mapping[str, str] | None = None, timeout: httpx.Timeout | float | None = None,  # noqa: ASYNC109
                   ) -> UpstreamResponse: ...

    async def get(self, url: str | httpx.URL, *, headers: Mapping[str, str] | None = None,
                  timeout: httpx.Timeout | float | None = None) -> UpstreamResponse: ...  # noqa: ASYNC109

    async def aclose(self) -> None: ...


def lean_applies(base_url: str) -> bool:
    """A plain-http URL that no proxy from the environment applies to."""
    parts = urlsplit(base_url)
    if parts.scheme != "http" or not parts.hostname:
        return False
    proxies = urllib.request.getproxies_environment()
    if not (proxies.get("http") or proxies.get("all")):
        return True
    return bool(urllib.request.proxy_bypass(parts.hostname))  # NO_PROXY


def open_client(base_url: str, *, connect_timeout_s: float, concurrency: int, choice: str = "auto") -> UpstreamHttp:
    """One client per tier. `choice`: "auto" (the lean client where `lean_applies`) or "httpx"."""
    if choice == "auto" and lean_applies(base_url):
        return LeanClient(connect_timeout_s=connect_timeout_s, max_idle=max(2, concurrency))
    return httpx.AsyncClient(
        timeout=httpx.Timeout(connect=connect_timeout_s, read=None, write=None, pool=None),
        limits=httpx.Limits(max_connections=concurrency * 2, max_keepalive_connections=concurrency),
    )
