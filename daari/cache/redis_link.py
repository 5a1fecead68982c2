"""A link to one Redis: its client (coredis, on anyio: runs under Trio), whether Redis answers now, and reconnection.

Every command runs under a bounded timeout (`timeout_s`). A command that fails on the connection or runs past its
timeout marks the link down: from then on every command fails at once with `StoreUnavailable`, so requests bypass
the cache without waiting, while a background task PINGs Redis after `reconnect_initial_s`, doubling up to
`reconnect_max_s`, until it answers and the link is up again. An error Redis answers with (NOPERM from an ACL, a
script error) fails that command only: Redis is there. Nothing here logs a key or a value.
"""

from __future__ import annotations

import logging
import os
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit

import coredis
import trio
from coredis.exceptions import AuthenticationError, ConnectionError, ResponseError
from coredis.retry import NoRetryPolicy
from coredis.typing import RedisError

from daari.cache.store import StoreUnavailable
from daari.config import RedisConfig
from daari.errors import StartupError
from daari.metrics import Metrics, Sample
from daari.redact import redact_url

log = logging.getLogger("daari.redis")

T = TypeVar("T")
Client = coredis.Redis[bytes]
State = Literal["connecting", "up", "down"]


@dataclass(frozen=True)
class LinkSettings:
    """How to reach one Redis, credentials resolved (the password from its environment variable)."""

    url: str
    username: str | None = None
    password: str | None = None
    tls_ca_file: str | None = None
    timeout_s: float = 0.25
    connect_timeout_s: float = 1.0
    reconnect_initial_s: float = 0.25
    reconnect_max_s: float = 10.0

    @classmethod
    def from_config(cls, config: RedisConfig, environ: Mapping[str, str] | None = None) -> LinkSettings:
        env = os.environ if environ is None else environ
        password = None
        if config.password_env:
            password = env.get(config.password_env)
            if not password:
                raise StartupError(f"cache.redis.password_env names {config.password_env}, which is not set")
        if config.tls_ca_file and not os.path.isfile(config.tls_ca_file):
            raise StartupError(f"cache.redis.tls_ca_file: no such file {config.tls_ca_file}")
        return cls(config.url, config.username, password, config.tls_ca_file, config.timeout_s,
                   config.connect_timeout_s, config.reconnect_initial_s, config.reconnect_max_s)

    @property
    def shown(self) -> str:
        """The URL as logs and /healthz show it: no credentials."""
        return redact_url(self.url)

    def tls_context(self) -> ssl.SSLContext:
        """rediss://: the server's certificate must be valid for the URL's host and signed by `tls_ca_file` (or a CA
        the system trusts). Built here because coredis's own context for rediss:// skips the host name check."""
        context = ssl.create_default_context(cafile=self.tls_ca_file)
        context.check_hostname = True
        context.verify_mode = ssl.CERT_REQUIRED
        return context

    def client(self, *, blocking: bool = False) -> Client:
        """A client; `blocking`: for commands that wait on the server (XREAD BLOCK), without coredis's read
        timeout (the caller bounds them), since a blocked command holds its connection until it answers."""
        parts = urlsplit(self.url)
        kwargs: dict[str, Any] = {}
        if parts.scheme == "rediss":
            kwargs["ssl_context"] = self.tls_context()
        username = self.username or parts.username
        if username:
            kwargs["username"] = username
        if self.password:
            kwargs["password"] = self.password
        return coredis.Redis.from_url(
            self.url, decode_responses=False, retry_policy=NoRetryPolicy(),  # a retry is a bypass, then a PING
            stream_timeout=None if blocking else self.timeout_s * 4, connect_timeout=self.connect_timeout_s, **kwargs)


class RedisLink:
    def __init__(self, settings: LinkSettings, metrics: Metrics | None = None, name: str = "cache") -> None:
        self.settings = settings
        self.metrics = metrics or Metrics()
        self.name = name  # which link, in metrics and logs (`link` label): "cache" for cache.backend: redis
        self.state: State = "connecting"
        self.since = time.time()
        self.last_error: str | None = None
        self.reconnects = 0
        self._client: Client | None = None
        self._blocking: Client | None = None  # its own connections: a blocked XREAD would hold up other commands
        self._down = trio.Event()  # set when the link goes down: the reconnect task wakes
        self._up = trio.Event()  # set while the link is up: followers wait on it
        self._tried = trio.Event()  # set once the first PING answered or failed

    @property
    def up(self) -> bool:
        return self.state == "up"

    def health(self) -> dict[str, Any]:
        return {"state": self.state, "url": self.settings.shown, "since": round(self.since, 3),
                "last_error": self.last_error, "reconnects": self.reconnects}

    def samples(self) -> list[Sample]:
        """Scrape-time gauges for /metrics."""
        return [Sample("redis_up", 1.0 if self.up else 0.0, {"link": self.name})]

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The client open and the reconnect task running, for the life of the block (an actor's lifespan)."""
        client = self.settings.client()
        blocking = self.settings.client(blocking=True)
        async with client, blocking:
            self._client, self._blocking = client, blocking
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._keep_up)
                    # Ready once Redis answered (or failed to) a first time: daari listens with the cache up when
                    # Redis is; a Redis that is down does not hold up the start (its requests bypass the cache).
                    await self._tried.wait()
                    try:
                        yield
                    finally:
                        nursery.cancel_scope.cancel()
            finally:
                self._client = self._blocking = None
                self._set("down", "stopped")

    async def wait_up(self) -> None:
        await self._up.wait()

    async def run(self, op: Callable[[Client], Awaitable[T]], *, timeout_s: float | None = None,
                  blocking: bool = False) -> T:
        """`op` on the client within the timeout; StoreUnavailable at once while Redis is down. `blocking`: `op`
        waits on the server (XREAD BLOCK): it runs on the link's second client, and `timeout_s` must cover the wait."""
        client = self._blocking if blocking else self._client
        if client is None or self.state != "up":
            raise StoreUnavailable(f"Redis at {self.settings.shown} is {self.state}")
        try:
            with trio.fail_after(timeout_s if timeout_s is not None else self.settings.timeout_s):
                return await op(client)
        except trio.TooSlowError:
            self._failed("timed out")
            raise StoreUnavailable(f"Redis at {self.settings.shown} timed out") from None
        except (ConnectionError, TimeoutError, OSError, AuthenticationError) as exc:
            self._failed(f"{type(exc).__name__}: {exc}")
            raise StoreUnavailable(f"Redis at {self.settings.shown}: {type(exc).__name__}") from None
        except (ResponseError, RedisError) as exc:
            self.metrics.inc("redis_errors_total", link=self.name, kind=type(exc).__name__)
            raise StoreUnavailable(f"Redis at {self.settings.shown} refused: {_first_line(exc)}") from None

    def _failed(self, reason: str) -> None:
        self.metrics.inc("redis_errors_total", link=self.name, kind="unavailable")
        if self.state == "up":
            self._set("down", reason)
            log.warning("Redis %s (%s) is unavailable: %s; the cache is bypassed until it answers again",
                        self.settings.shown, self.name, reason)

    def _set(self, state: State, error: str | None) -> None:
        if state != self.state:
            self.since = time.time()
        self.state = state
        if state == "up":
            self._up.set()
            self._down = trio.Event()
        else:
            self.last_error = error
            self._down.set()
            if self._up.is_set():
                self._up = trio.Event()

    async def _keep_up(self) -> None:
        """PING until Redis answers, with backoff; then wait for the next failure."""
        delay = self.settings.reconnect_initial_s
        first = True
        while True:
            if self.state == "up":
                await self._down.wait()
                delay = self.settings.reconnect_initial_s
                await trio.sleep(delay)  # a failure is often a restart: give it a moment before the first PING
            error = await self._ping()
            self._tried.set()
            if error is None:
                if not first:
                    self.reconnects += 1
                    self.metrics.inc("redis_reconnects_total", link=self.name)
                    log.warning("Redis %s (%s) answers again: the cache is back", self.settings.shown, self.name)
                else:
                    log.info("Redis %s (%s) answers: the cache is shared there", self.settings.shown, self.name)
                first = False
                self._set("up", None)
                continue
            if first or self.state == "connecting":
                log.warning("Redis %s (%s) does not answer (%s); the cache is bypassed until it does, retrying "
                            "with backoff", self.settings.shown, self.name, error)
            first = False
            self._set("down", error)
            await trio.sleep(delay)
            delay = min(delay * 2, self.settings.reconnect_max_s)

    async def _ping(self) -> str | None:
        client = self._client
        if client is None:
            return "not open"
        try:
            with trio.fail_after(self.settings.connect_timeout_s + self.settings.timeout_s):
                await client.ping()
        except trio.TooSlowError:
            return "PING timed out"
        except (RedisError, OSError, TimeoutError) as exc:
            return f"{type(exc).__name__}: {_first_line(exc)}"
        return None


PIPELINE_ERROR = " of pipeline caused error: "


def _first_line(exc: BaseException) -> str:
    """The error's first line, without the command: coredis prefixes an error in a pipeline with the failed
    command and its arguments ("Command # 1 (SET key value) of pipeline caused error: ..."), which are keys and
    entries, never to be logged."""
    text = str(exc)
    if PIPELINE_ERROR in text:
        text = text.rpartition(PIPELINE_ERROR)[2]
    return text.splitlines()[0][:200] if text.strip() else type(exc).__name__
