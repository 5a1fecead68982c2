"""`python -m bench.bare_app --port N --body-file F`: the floor daari is compared with.

A bare Hypercorn (trio worker) ASGI app that reads the request body and answers a fixed JSON body with fixed
headers (the bytes and headers of a real daari L0 hit, so both send the same), with the same Hypercorn
settings as daari.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import trio

from bench.fake_upstream import serve_until_signalled
from daari.server.asgi_io import answer_lifespan


class FixedJson:
    def __init__(self, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        self.body = body
        self.headers = headers

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            return await answer_lifespan(receive, send)
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        await send({"type": "http.response.start", "status": 200, "headers": self.headers})
        await send({"type": "http.response.body", "body": self.body, "more_body": False})


def fixed_answer_args(doc: str | None) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
    """The command line of a fixed-answer server (this one and bench/bare_h11.py): port, body and headers."""
    parser = argparse.ArgumentParser(description=doc)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--body-file", type=Path, required=True)
    parser.add_argument("--headers-file", type=Path, help='JSON [["name", "value"], ...]')
    args = parser.parse_args()
    pairs = json.loads(args.headers_file.read_text()) if args.headers_file else [["content-type", "application/json"]]
    headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in pairs]
    return args.port, args.body_file.read_bytes(), headers


def main() -> None:
    port, body, headers = fixed_answer_args(__doc__)
    trio.run(serve_until_signalled, FixedJson(body, headers), port)


if __name__ == "__main__":
    main()
