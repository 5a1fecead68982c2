"""`DAARI_BARE_LOAD=model|daari|both|orjson|busy|spread python -m bench.bare_heavy --port N --body-file F`: heavier.

A diagnostic for the L0 hit's wall time: bench/bare_app.py, but in a process that first loaded what daari's holds
(`model`: L1's embedding model, ~440 MB and ~300,000 frozen objects; `daari`: every module of daari's server
imported; `both`), so the same requests are served with a heap or a code footprint like daari's; or (`orjson`) the
bare app serializing its answer with orjson on every request, as daari's render does (orjson's AVX-512 string code);
or (`busy`) the bare app running a small arithmetic loop per request, `DAARI_BARE_BUSY` iterations (550: ~270,000
instructions under callgrind, daari's excess over the bare app) with next to no memory touched; or (`spread`) about
as many instructions spread over 150 small distinct functions, each touching its own dict, run once a request.
"""

from __future__ import annotations

import gc
import os
from typing import Any

import trio

from bench.bare_app import FixedJson, fixed_answer_args
from bench.fake_upstream import serve_until_signalled


def main() -> None:
    load = os.environ.get("DAARI_BARE_LOAD", "model")
    if load in ("model", "both"):
        from daari.semantic.minilm import load_minilm
        load_minilm()
    if load in ("daari", "both"):
        import daari.server.serve  # noqa: F401
    port, body, headers = fixed_answer_args(__doc__)
    app = FixedJson(body, headers)
    if load == "orjson":  # the answer's body serialized by orjson on every request, as daari's render does
        import orjson
        doc = orjson.loads(body)

        class Rendered(FixedJson):
            async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
                if scope["type"] == "http":
                    self.body = orjson.dumps(doc)
                await super().__call__(scope, receive, send)

        app = Rendered(body, headers)
    if load == "busy":  # daari's extra instructions a hit, as arithmetic in one small loop: its work, not its footprint
        iterations = int(os.environ.get("DAARI_BARE_BUSY", "550"))

        def busy(n: int) -> int:
            total = 0
            for i in range(n):
                total += i
            return total

        class Busy(FixedJson):
            async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
                if scope["type"] == "http":
                    busy(iterations)
                await super().__call__(scope, receive, send)

        app = Busy(body, headers)
    if load == "spread":  # as many instructions, spread over 150 small functions each run once a request
        functions, objects = spread_functions(int(os.environ.get("DAARI_BARE_SPREAD", "150")))

        class Spread(FixedJson):
            async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
                if scope["type"] == "http":
                    for function in functions:
                        function(objects)
                await super().__call__(scope, receive, send)

        app = Spread(body, headers)
    gc.collect()
    gc.freeze()
    trio.run(serve_until_signalled, app, port)


SPREAD_SOURCE = """
def f{i}(objects):
    own = objects[{i}]
    own['a{i}'] = own.get('b{i}', {i}) + 1
    pair = (own, {i})
    return len(pair)
"""


def spread_functions(count: int) -> tuple[list[Any], list[dict[str, int]]]:
    """`count` distinct small functions (own code object, own dict to touch): 150 of them run ~267,000
    instructions (callgrind), about daari's excess over the bare app a hit, but over as many places as daari's."""
    namespace: dict[str, Any] = {}
    for i in range(count):
        exec(SPREAD_SOURCE.format(i=i), namespace)  # noqa: S102 - our own constant source
    return [namespace[f"f{i}"] for i in range(count)], [{} for _ in range(count)]


if __name__ == "__main__":
    main()
