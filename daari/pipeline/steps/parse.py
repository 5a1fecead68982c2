"""Routing spec step 1: the body decoded and validated into the protocol-neutral `ChatRequest`.

Reads: the body bytes, the wire, the route's `prepare` (the Responses route folds in stored history). Decides:
`turn.request`; a body that is not a valid request is refused in the client's shape. It runs where a step
first needs the request: the L0 step for its key (unless the bytes are a remembered hit), else its own place
in the list. Large bodies are decoded and validated on a worker thread (pipeline/body_work.py).
"""

from __future__ import annotations

from daari.pipeline.body_work import BodyWork, decode_json
from daari.pipeline.step import Answer
from daari.pipeline.turn import Turn


class ParseStep:
    name = "parse"

    def __init__(self, body_work: BodyWork) -> None:
        self.body_work = body_work

    async def __call__(self, turn: Turn) -> Answer | None:
        if turn.parsed:
            return None
        work, raw, wire = self.body_work, turn.raw, turn.wire
        heavy = work.heavy(len(raw))  # a large body is decoded and validated off the event loop
        body = await work.run(decode_json, raw) if heavy else decode_json(raw)
        if turn.prepare is not None:
            body = await turn.prepare(body)
        request = await work.run(wire.parse, body, turn.headers) if heavy else wire.parse(body, turn.headers)
        request.query_string = turn.query_string
        turn.request = request
        return None
