"""A request to daari's ASGI app called directly, in process (no sockets): for the benches that take one apart."""

from __future__ import annotations

from typing import Any

import trio


def post_scope(url: str, path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    """The ASGI scope of a POST to `path` on the server at `url` (its host header) with `headers` besides."""
    return {"type": "http", "method": "POST", "path": path, "query_string": b"",
            "headers": [(b"host", url.removeprefix("http://").encode()), *headers]}


async def call(app: Any, scope: dict[str, Any], body: bytes) -> None:
    """Send `body` as the whole request and return once the response's last body message is sent; the client
    is seen to leave only after that, as a front end reports it."""
    done, given = trio.Event(), [False]

    async def receive() -> dict[str, Any]:
        if given[0]:
            await done.wait()
            return {"type": "http.disconnect"}
        given[0] = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body" and not message.get("more_body"):
            done.set()

    await app(scope, receive, send)
