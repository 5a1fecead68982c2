"""`daari tail`: follow the live tail websocket, one line per decision, reconnecting when daari restarts."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TextIO
from urllib.parse import urlencode, urlsplit, urlunsplit

import trio
from trio_websocket import ConnectionClosed, ConnectionRejected, HandshakeError, open_websocket_url

from daari.observe.tail_line import format_decision

# Close codes after which reconnecting cannot help: refused (policy) or a bad filter.
FINAL_CLOSE_CODES = (1008, 4400, 4401, 4403)


def tail_url(base: str, filters: dict[str, list[str]]) -> str:
    """http(s)://host:port[/...] -> ws(s)://host:port/v1/daari/tail?filters."""
    parts = urlsplit(base if "://" in base else f"http://{base}")
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    query = urlencode({k: ",".join(v) for k, v in filters.items() if v})
    path = parts.path.rstrip("/")
    if not path.endswith("/v1/daari/tail"):
        path += "/v1/daari/tail"
    return urlunsplit((scheme, parts.netloc, path, query, ""))


async def follow(url: str, *, as_json: bool, color: bool, out: TextIO = sys.stdout,
                 token: str | None = None, max_backoff_s: float = 10.0,
                 on_connect: Callable[[], None] | None = None) -> int:
    """Print decisions until cancelled; reconnect with backoff on a restart. Returns an exit status."""
    backoff = 0.5
    headers = [(b"authorization", f"Bearer {token}".encode())] if token else None
    while True:
        try:
            async with open_websocket_url(url, extra_headers=headers) as ws:
                backoff = 0.5
                if on_connect is not None:
                    on_connect()
                while True:
                    received = await ws.get_message()
                    message = received if isinstance(received, str) else received.decode()
                    decision = json.loads(message)
                    out.write((message if as_json else format_decision(decision, color=color)) + "\n")
                    out.flush()
        except ConnectionClosed as closed:
            reason = closed.reason
            if reason is not None and reason.code in FINAL_CLOSE_CODES:
                print(f"daari tail: closed by the server: {reason.code} {reason.reason}", file=sys.stderr)
                return 1
            print(f"daari tail: disconnected ({reason.code if reason else '?'}); reconnecting",
                  file=sys.stderr)
        except ConnectionRejected as exc:
            if exc.status_code in (401, 403, 404):
                print(f"daari tail: refused by the server ({exc.status_code}); check --url and DAARI_TOKEN",
                      file=sys.stderr)
                return 1
            print(f"daari tail: rejected ({exc.status_code}); retrying in {backoff:.1f}s", file=sys.stderr)
        except HandshakeError as exc:
            print(f"daari tail: cannot connect to {url} ({exc}); retrying in {backoff:.1f}s", file=sys.stderr)
        except OSError as exc:
            print(f"daari tail: cannot connect to {url} ({exc.strerror or exc}); retrying in {backoff:.1f}s",
                  file=sys.stderr)
        await trio.sleep(backoff)
        backoff = min(backoff * 2, max_backoff_s)
