"""`read_body` over a Trio memory channel, as Hypercorn hands the app its `receive`: a body already there is taken
at once, and one that is still arriving keeps every limit and the deadline."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from daari.errors import PayloadTooLarge, RequestTimeout
from daari.server.asgi_io import ClientDisconnected, read_body
from daari.server.limits import RequestLimits

LIMITS = RequestLimits(max_header_bytes=16_384, max_headers=100, max_body_bytes=1_000, max_expansion_ratio=100.0,
                       body_timeout_s=10.0)


def channel(*messages: dict[str, Any]) -> tuple[trio.MemorySendChannel[dict[str, Any]], Any]:
    send, receive = trio.open_memory_channel[dict[str, Any]](10)
    for message in messages:
        send.send_nowait(message)
    return send, receive.receive


async def test_a_body_that_has_arrived_is_read_whole() -> None:
    _, receive = channel({"type": "http.request", "body": b'{"a": 1}', "more_body": False})
    assert await read_body(receive, {}, LIMITS) == b'{"a": 1}'


async def test_a_body_in_parts_is_joined() -> None:
    _, receive = channel({"type": "http.request", "body": b'{"a"', "more_body": True},
                         {"type": "http.request", "body": b": 1}", "more_body": False})
    assert await read_body(receive, {}, LIMITS) == b'{"a": 1}'


async def test_an_arrived_body_over_the_limit_is_refused() -> None:
    _, receive = channel({"type": "http.request", "body": b"x" * 1_001, "more_body": False})
    with pytest.raises(PayloadTooLarge):
        await read_body(receive, {}, LIMITS)


async def test_a_client_gone_before_its_body_is_a_disconnect() -> None:
    _, receive = channel({"type": "http.disconnect"})
    with pytest.raises(ClientDisconnected):
        await read_body(receive, {}, LIMITS)


@pytest.mark.parametrize("first", [None, {"type": "http.request", "body": b"{", "more_body": True}])
async def test_a_body_that_stops_arriving_times_out(first: dict[str, Any] | None,
                                                     autojump_clock: trio.testing.MockClock) -> None:
    """Nothing yet, or a first part and then nothing: the deadline still holds (408)."""
    send, receive = channel(*([first] if first else []))
    start = trio.current_time()
    with pytest.raises(RequestTimeout):
        await read_body(receive, {}, LIMITS)
    assert trio.current_time() - start == pytest.approx(LIMITS.body_timeout_s)
    await send.aclose()


async def test_a_part_that_arrives_later_is_waited_for(autojump_clock: trio.testing.MockClock) -> None:
    send, receive = channel({"type": "http.request", "body": b"[1,", "more_body": True})

    async def rest() -> None:
        await trio.sleep(3)
        await send.send({"type": "http.request", "body": b"2]", "more_body": False})

    async with trio.open_nursery() as nursery:
        nursery.start_soon(rest)
        assert await read_body(receive, {}, LIMITS) == b"[1,2]"


async def test_a_body_with_all_its_declared_bytes_is_whole_before_its_end_message(
        autojump_clock: trio.testing.MockClock) -> None:
    """Hypercorn sends the body with `more_body` set and its (empty) end a scheduling round later: a body that
    already holds its Content-Length is answered at once, not after waiting for the end."""
    send, receive = channel({"type": "http.request", "body": b'{"a": 1}', "more_body": True})
    start = trio.current_time()
    assert await read_body(receive, {"content-length": "8"}, LIMITS) == b'{"a": 1}'
    assert trio.current_time() == start  # no wait: the end message never came, and was not needed
    await send.aclose()


@pytest.mark.parametrize("declared", ["9", "x", None])
async def test_a_body_short_of_its_declared_length_is_still_waited_for(
        declared: str | None, autojump_clock: trio.testing.MockClock) -> None:
    send, receive = channel({"type": "http.request", "body": b'{"a": 1}', "more_body": True})
    with pytest.raises(RequestTimeout):
        await read_body(receive, {"content-length": declared} if declared else {}, LIMITS)
    await send.aclose()


def test_check_head_counts_fields_and_bytes_as_on_the_wire() -> None:
    """Each field is its name, ": ", its value and CRLF; at the limits it passes, one past them it is refused."""
    from daari.errors import HeadersTooLarge
    from daari.server.limits import check_head

    fields = [(b"host", b"x"), (b"content-type", b"application/json"), (b"x-a", b"")]
    size = sum(len(name) + len(value) + 4 for name, value in fields)
    exact = RequestLimits(max_header_bytes=size, max_headers=3, max_body_bytes=1, max_expansion_ratio=1.0,
                          body_timeout_s=1.0)
    check_head(fields, exact)
    check_head(iter(fields), exact)  # any iterable of pairs, not only Hypercorn's list
    for limits in (RequestLimits(size - 1, 3, 1, 1.0, 1.0), RequestLimits(size, 2, 1, 1.0, 1.0)):
        with pytest.raises(HeadersTooLarge):
            check_head(fields, limits)
