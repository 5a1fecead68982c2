"""`python -m bench.bare_h11 --port N --body-file F`: what a Python HTTP/1.1 server on Trio costs without Hypercorn.

The same fixed answer as bench/bare_app.py (daari's L0 hit bytes and headers) from h11 over Trio sockets, one task
per connection, no ASGI: the floor under the bare Hypercorn app, so `bench.peers` can show how much of a hit's
cost is the front end's (issue 23's ">= 20x LiteLLM cached" asks more of daari than the bare Hypercorn app does).
"""

from __future__ import annotations

import contextlib

import h11
import trio

from bench.bare_app import fixed_answer_args


class FixedAnswer:
    def __init__(self, body: bytes, headers: list[tuple[bytes, bytes]]) -> None:
        self.body = body
        self.headers = [*headers, (b"content-length", str(len(body)).encode())]

    async def serve(self, stream: trio.SocketStream) -> None:
        # A client that resets its connection (wrk at the end of a run) ends that connection, not the server.
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError, OSError):
            await self._answer(stream)

    async def _answer(self, stream: trio.SocketStream) -> None:
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
    port, body, headers = fixed_answer_args(__doc__)
    answer = FixedAnswer(body, [(name, value) for name, value in headers if name.lower() != b"content-length"])

    async def serve() -> None:
        await trio.serve_tcp(answer.serve, port, host="127.0.0.1")

    trio.run(serve)


if __name__ == "__main__":
    main()
