"""daari's own HTTP/1.1 and websocket front end (h11 and wsproto over Trio sockets), the opt-in alternative to
Hypercorn (`server.front_end: "h11"`): it serves the same ASGI app. docs/configuration.md, "Front end"."""

from daari.server.h11_front.server import serve

__all__ = ["serve"]
