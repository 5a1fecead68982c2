"""`python -m bench.bare_h11 --port N --body-file F`: what a Python HTTP/1.1 server on Trio costs without Hypercorn.

The same fixed answer as bench/bare_app.py (daari's L0 hit bytes and headers) from h11 over Trio sockets, one task
per connection, no ASGI: the floor under the bare Hypercorn app, so `bench.peers` can show how much of a hit's
cost is the front end's (issue 23's ">= 20x LiteLLM cached" asks more of daari than the bare Hypercorn app does).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import h11
import trio


class FixedAnswer:
    def __init__(self, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        self.body = body
        self.headers = [*headers, (b"content-length", str(len(body)).encode())]

    async def serve(self, stream: trio.SocketStream) -> None:
        connection = h11.Connection(h11.SERVER)
        async with stream:
            while True:
                event = connection.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    connection.receive_data(data)
                elif isinstance(event, h11.EndOfMessage):
                    await stream.send_all(connection.send(h11.Response(status_code=200, headers=self.headers))
                                          + (connection.send(h11.Data(data=self.body)) or b"")
                                          + (connection.send(h11.EndOfMessage()) or b""))
                    connection.start_next_cycle()
                elif isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                    return


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--body-file", type=Path, required=True)
    parser.add_argument("--headers-file", type=Path, help='JSON [["name", "value"], ...]')
    args = parser.parse_args()
    pairs = json.loads(args.headers_file.read_text()) if args.headers_file else [["content-type", "application/json"]]
    headers = [(name.encode("latin-1"), value.encode("latin-1")) for name, value in pairs
               if name.lower() != "content-length"]
    answer = FixedAnswer(args.body_file.read_bytes(), headers)

    async def serve() -> None:
        await trio.serve_tcp(answer.serve, args.port, host="127.0.0.1")

    trio.run(serve)


if __name__ == "__main__":
    main()
