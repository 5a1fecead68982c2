"""What the property tests share: a scripted upstream that streams whatever bytes a test hands it, the shape
every error must have in each protocol, and what a running daari holds (tasks on its loop, open files)."""

from __future__ import annotations

import json
import os
import socket
from collections import Counter, deque
from typing import Any

import httpx
import trio
import trio.lowlevel

from daari.server.asgi_io import answer_lifespan, read_all


class ScriptedUpstream:
    """An upstream for any executor: each POST pops the next (content type, chunks) from `script` and sends the
    chunks as the body, one write each (an empty script: a plain OpenAI error 500). GETs list no models."""

    def __init__(self) -> None:
        self.script: deque[tuple[str, list[bytes]]] = deque()
        self.posts = 0
        self.port: int | None = None  # where it listens, once serving

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await answer_lifespan(receive, send)
            return
        await read_all(receive)
        if scope["method"] != "POST":
            await _send(send, 200, "application/json", [b'{"object": "list", "data": []}'])
            return
        self.posts += 1
        content_type, chunks = self.script.popleft() if self.script else (
            "application/json", [b'{"error": {"message": "nothing scripted", "type": "server_error"}}'])
        await _send(send, 200, content_type, chunks)


async def _send(send: Any, status: int, content_type: str, chunks: list[bytes]) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", content_type.encode())]})
    for chunk in chunks:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await trio.lowlevel.checkpoint()
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def anthropic_path(path: str) -> bool:
    return path.startswith("/v1/messages")


def check_shaped(path: str, response: httpx.Response) -> None:
    """An error answer is in the path's protocol's shape, never a 500 nor a traceback. 5xx from an upstream's
    fault (502, 503, 504, 529) are allowed: they are the upstream's, said in the client's shape."""
    problem = shape_problem(path, response.status_code, response.text)
    assert problem is None, problem


def shape_problem(path: str, status: int, text: str) -> str | None:
    """What is wrong with an answer (`check_shaped`'s rule), or None: shared with `make fuzz`'s schemathesis
    check (bench/fuzz_checks.py)."""
    if status == 500:
        return f"500 on {path}: {text[:500]}"
    if "Traceback" in text:
        return f"a traceback on {path}: {text[:500]}"
    if status < 400:
        return None
    try:
        body = json.loads(text)
    except ValueError:
        return f"{status} on {path} is not JSON: {text[:300]}"
    error = body.get("error") if isinstance(body, dict) else None
    if anthropic_path(path) and body.get("type") != "error":
        return f"{status} on {path} is not an Anthropic error: {text[:300]}"
    if not isinstance(error, dict) or not isinstance(error.get("message"), str) \
            or not isinstance(error.get("type"), str):
        return f"{status} on {path} has no error object with a type and a message: {text[:300]}"
    return None


def check_stream(path: str, response: httpx.Response) -> None:
    """A 200 event stream ends either normally or with an explicit error event, in the path's protocol."""
    text = response.text
    assert "Traceback" not in text
    if anthropic_path(path):
        assert "event: message_stop" in text or "event: error" in text, text[-500:]
    elif path.startswith(("/v1/responses", "/responses")):
        assert any(end in text for end in ("response.completed", "response.failed", "response.incomplete",
                                           "event: error")), text[-500:]
    else:
        assert text.rstrip().endswith("data: [DONE]") or '"error"' in text, text[-500:]


def loop_tasks(token: trio.lowlevel.TrioToken) -> Counter[str]:
    """The tasks running on daari's loop, by name (called from the test's thread)."""

    def names() -> Counter[str]:
        found: Counter[str] = Counter()

        def walk(task: trio.lowlevel.Task) -> None:
            found[task.name] += 1
            for nursery in task.child_nurseries:
                for child in nursery.child_tasks:
                    walk(child)

        root = trio.lowlevel.current_root_task()
        assert root is not None
        walk(root)
        return found

    return trio.from_thread.run_sync(names, trio_token=token)


def open_fds(upstream_port: int | None = None) -> int:
    """This process's open files, less the sockets of a fake upstream served in this process on `upstream_port`:
    its server-side sockets (it closes those whose client left on its keep-alive timer; one its client reset has
    left the TCP table, so its own address is asked too) and daari's kept-alive connections to it, which
    `upstream_connections` bounds instead."""
    on_port = _tcp_inodes(upstream_port)[0] if upstream_port is not None else set()

    def upstreams(fd: int, target: str) -> bool:
        return upstream_port is not None and (
            target.removeprefix("socket:[").removesuffix("]") in on_port
            or (target.startswith("socket:") and _local_port(fd) == upstream_port))

    return sum(1 for fd, target in _fd_targets().items() if not upstreams(fd, target))


def upstream_connections(upstream_port: int) -> int:
    """Open connections from this process to `upstream_port` (daari's upstream pools' kept-alive connections)."""
    outgoing = _tcp_inodes(upstream_port)[1]
    return sum(1 for target in _fd_targets().values() if target.removeprefix("socket:[").removesuffix("]") in outgoing)


def _fd_targets() -> dict[int, str]:
    targets = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            targets[int(fd)] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the listing's own descriptor, closed since
            continue
    return targets


def _local_port(fd: int) -> int | None:
    """The local port of the internet socket `fd`, else None (a Unix socket, closed since)."""
    try:
        copy = os.dup(fd)
    except OSError:
        return None
    try:
        sock = socket.socket(fileno=copy)
    except OSError:
        os.close(copy)
        return None
    with sock:
        try:
            name = sock.getsockname()
        except OSError:
            return None
    return name[1] if isinstance(name, tuple) else None


def _tcp_inodes(port: int | None) -> tuple[set[str], set[str]]:
    """The inodes of TCP sockets with either end on `port`, and of those whose remote end is on it."""
    either: set[str] = set()
    outgoing: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as rows:
                next(rows)
                for row in rows:
                    fields = row.split()
                    local, remote = (int(end.rsplit(":", 1)[1], 16) for end in fields[1:3])
                    if port in (local, remote):
                        either.add(fields[9])
                    if remote == port:
                        outgoing.add(fields[9])
        except OSError:
            continue
    return either, outgoing
