"""What one client may make daari hold: the size and number of header fields, the body's size (decompressed
too) and how long its head and body may take. The Hypercorn settings that enforce part of it are set here too.

See docs/operations.md, "Limits": Hypercorn bounds a head that arrives across reads and the time a connection
may go without a whole head; daari's own checks bound a head that arrived in one read, and the body.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain

from hypercorn.config import Config as HypercornConfig

from daari.config import ServerConfig
from daari.errors import HeadersTooLarge

REQUEST_LINE_BYTES = 8 * 1024  # what Hypercorn's parser allows beyond the header fields: the request line


@dataclass(frozen=True)
class RequestLimits:
    max_header_bytes: int
    max_headers: int
    max_body_bytes: int
    max_expansion_ratio: float
    body_timeout_s: float

    @classmethod
    def from_config(cls, server: ServerConfig) -> RequestLimits:
        return cls(server.max_header_bytes, server.max_headers, server.max_body_bytes, server.max_expansion_ratio,
                   server.body_timeout_s)


def check_head(headers: Iterable[tuple[bytes, bytes]], limits: RequestLimits) -> None:
    """Refuse a head with too many fields or too many bytes of them (431), however it arrived."""
    pairs = headers if isinstance(headers, list | tuple) else list(headers)
    count = len(pairs)
    # Each field's name and value, ": " and CRLF as on the wire, summed in C (no bytecode per field).
    size = sum(map(len, chain.from_iterable(pairs))) + 4 * count
    if count > limits.max_headers:
        raise HeadersTooLarge(f"the request has {count} header fields; daari takes at most {limits.max_headers} "
                              "(server.max_headers)")
    if size > limits.max_header_bytes:
        raise HeadersTooLarge(f"the request's header fields take {size} bytes; daari takes at most "
                              f"{limits.max_header_bytes} (server.max_header_bytes)")


def apply_to_hypercorn(hc: HypercornConfig, server: ServerConfig) -> None:
    """Hypercorn's own limits, from daari's settings (why each: docs/operations.md, "Limits")."""
    # Hypercorn's idle timer runs from a connection's start (or its previous answer) until a whole request head
    # has arrived: it is both the keep-alive idle time and the head's deadline (a slowloris is closed by it).
    hc.keep_alive_timeout = server.header_timeout_s
    # The HTTP/1.1 parser refuses (431, then closes) a head that grows past this while incomplete; a head that
    # arrives whole in one read is measured by `check_head` instead.
    hc.h11_max_incomplete_size = server.max_header_bytes + REQUEST_LINE_BYTES
    hc.h2_max_header_list_size = server.max_header_bytes  # the same bound for HTTP/2 (h2c) clients
