"""One HTTP request as the routes see it: its ASGI scope and channels, lower-cased headers, and the client
protocol its path implies (which decides the shape of every error it gets)."""

from __future__ import annotations

from daari.protocol.wire import ANTHROPIC, OPENAI, RESPONSES, Wire
from daari.server.asgi_io import Receive, Scope, Send, header_map


def wire_for(path: str) -> Wire:
    if path.startswith("/v1/messages"):
        return ANTHROPIC
    if path.startswith(("/v1/responses", "/responses")):
        return RESPONSES
    return OPENAI


class HttpRequest:
    __slots__ = ("scope", "receive", "send", "headers", "path", "wire", "decision_logged")

    def __init__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scope = scope
        self.receive = receive
        self.send = send
        self.headers = header_map(scope)
        self.path: str = scope["path"]
        self.wire = wire_for(self.path)
        self.decision_logged = False  # a chat request's routing decision already logged its refusal

    @property
    def method(self) -> str:
        return str(self.scope["method"])

    @property
    def query_string(self) -> str:
        return str(self.scope.get("query_string", b"").decode("latin-1"))
