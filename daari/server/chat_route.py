"""The chat routes (POST /v1/chat/completions, /v1/messages; the Responses route through `serve`): read the body,
walk the pipeline, and publish exactly one routing decision however the request ends."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import partial

import trio

from actors.hub import Hub
from daari.errors import DaariError
from daari.pipeline.decision import RoutingDecision
from daari.pipeline.record import DecisionRecorder, PromptDescriber
from daari.pipeline.sink import Sink
from daari.pipeline.step import Pipeline
from daari.pipeline.turn import Prepare, Turn
from daari.protocol.wire import Wire
from daari.server.asgi_io import AsgiSink, ClientDisconnected, Receive, read_body, watch_disconnect
from daari.server.http_request import HttpRequest
from daari.server.limits import RequestLimits

log = logging.getLogger(__name__)


def client_watch(receive: Receive) -> Callable[[], AbstractAsyncContextManager[None]]:
    """From the first step that waits outside daari, a client that leaves cancels the request: Hypercorn does not
    raise in the app when a client goes away, so a task waits for `http.disconnect` and cancels the scope."""
    return partial(_watching, receive)  # built for every request, entered only by routed ones: keep it cheap


@asynccontextmanager
async def _watching(receive: Receive) -> AsyncIterator[None]:
    # The watcher is a system task, not a child of a nursery opened here: a nursery's opening, closing and the
    # cancel that ended it were ~10% of a pass-through request's CPU. It needs no stopping either: Hypercorn puts
    # `http.disconnect` on the request's queue whenever its stream closes, the response complete or the client
    # gone, and the watcher then cancels this scope (a no-op once the request is over) and ends.
    with trio.CancelScope() as request_scope:
        trio.lowlevel.spawn_system_task(_watch, receive, request_scope, name="client watch")
        yield


async def _watch(receive: Receive, request_scope: trio.CancelScope) -> None:
    try:
        await watch_disconnect(receive, request_scope)
    except Exception:  # a system task must not raise; the request goes on unwatched
        log.debug("the client watch ended early", exc_info=True)


class ChatRoute:
    def __init__(self, pipeline: Pipeline, decisions: Hub[RoutingDecision], describe_prompt: PromptDescriber | None,
                 limits: RequestLimits) -> None:
        self.pipeline = pipeline
        self.decisions = decisions
        self.describe_prompt = describe_prompt  # log.prompts: nothing, a keyed hash, or the text
        self.limits = limits  # the body's size (decompressed too) and deadline

    async def __call__(self, req: HttpRequest) -> None:
        await self.serve(req, req.wire, AsgiSink(req.send))

    async def serve(self, req: HttpRequest, wire: Wire, out: Sink, prepare: Prepare | None = None) -> None:
        """Answer `req` in `wire`'s protocol through `out`; `prepare` may rewrite the decoded body first."""
        recorder = DecisionRecorder(self.decisions, wire.name, req.headers, self.describe_prompt)
        try:
            raw = await read_body(req.receive, req.headers, self.limits)
        except DaariError as err:
            self._refused(req, recorder, wire, err)
            raise
        except ClientDisconnected:
            recorder.abandoned()
            raise
        turn = Turn(wire, req.headers, raw, recorder.sink(out), query_string=req.query_string, prepare=prepare,
                    watch_client=client_watch(req.receive))
        try:
            await self.pipeline.run(turn)
        except DaariError as err:  # refused before routing (bad headers or body): the app answers it
            self._refused(req, recorder, wire, err)
            raise
        except Exception:  # a fault before the request was parsed: the app answers 500; still one decision
            recorder.refused(DaariError("internal error in daari"), 500)
            raise
        finally:
            recorder.finished(turn)

    @staticmethod
    def _refused(req: HttpRequest, recorder: DecisionRecorder, wire: Wire, err: DaariError) -> None:
        recorder.refused(err, wire.render_error(err)[0])
        req.decision_logged = True  # the decision's log line is this refusal's
