"""The chat routes (POST /v1/chat/completions, /v1/messages; the Responses route through `serve`): read the body,
walk the pipeline, and publish exactly one routing decision however the request ends."""

from __future__ import annotations

from actors.hub import Hub
from daari.errors import DaariError
from daari.pipeline.decision import RoutingDecision
from daari.pipeline.record import DecisionRecorder, PromptDescriber
from daari.pipeline.sink import Sink
from daari.pipeline.step import Pipeline
from daari.pipeline.turn import Prepare, Turn
from daari.protocol.wire import Wire
from daari.server.asgi_io import AsgiSink, ClientDisconnected, read_body
from daari.server.client_watch import ClientWatches
from daari.server.http_request import HttpRequest
from daari.server.limits import RequestLimits


class ChatRoute:
    def __init__(self, pipeline: Pipeline, decisions: Hub[RoutingDecision], describe_prompt: PromptDescriber | None,
                 limits: RequestLimits) -> None:
        self.pipeline = pipeline
        self.decisions = decisions
        self.describe_prompt = describe_prompt  # log.prompts: nothing, a keyed hash, or the text
        self.limits = limits  # the body's size (decompressed too) and deadline
        self.client_watches = ClientWatches()  # in the server's nursery once `run_server` starts it

    async def serve(self, req: HttpRequest, wire: Wire | None = None, out: Sink | None = None,
                    prepare: Prepare | None = None) -> None:
        """Answer `req` in `wire`'s protocol (its path's by default) through `out`; `prepare` may rewrite the decoded
        body first. Without `out` (the chat routes themselves), a JSON answer is held and sent from here once the
        pipeline is done, two frames below the server's task instead of ten: each of the ~9 times Hypercorn's send
        yields, every frame between is suspended and resumed (asgi_io.AsgiSink). One method, not a route that
        calls it, for the same reason: the upstream call's yields resume every frame above it too."""
        held: AsgiSink | None = None
        if out is None:
            out = held = AsgiSink(req.send, hold_json=True)
        if wire is None:
            wire = req.wire
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
                    watch_client=self.client_watches(req.receive))
        try:
            await self.pipeline.run(turn)
        except DaariError as err:  # refused before routing (bad headers or body): the app answers it
            self._refused(req, recorder, wire, err)
            raise
        except Exception:  # a fault before the request was parsed: the app answers 500; still one decision
            recorder.refused(DaariError("internal error in daari"), 500)
            raise
        finally:
            # The held answer goes out before the decision is recorded: the record, its publish and the hub's
            # handlers (the metrics, the decision's INFO log line) then run while the client reads the answer,
            # not before it is written. The decision's latency includes that write.
            try:
                if held is not None:
                    messages = held.take_held()
                    if messages is not None:
                        await req.send(messages[0])
                        await req.send(messages[1])
            finally:
                recorder.finished(turn)

    __call__ = serve  # the chat routes' handler: `serve(req)`

    @staticmethod
    def _refused(req: HttpRequest, recorder: DecisionRecorder, wire: Wire, err: DaariError) -> None:
        recorder.refused(err, wire.render_error(err)[0])
        req.decision_logged = True  # the decision's log line is this refusal's
