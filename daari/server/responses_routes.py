"""The Responses API routes: POST /v1/responses (through the same pipeline as chat), and stored responses
(GET and DELETE /v1/responses/{id}, GET /v1/responses/{id}/input_items).

A response with `store` true (OpenAI's default) is written to the archive before its last bytes go out, so a
client that chains with `previous_response_id` right after `response.completed` always finds it. It is stored
in the caller's credential partition (the cache's, daari/cache/partition.py), and only a caller of the same
partition finds it again: to any other it is an unknown id, so not even its existence shows.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any
from urllib.parse import parse_qs

from daari.cache.partition import cache_partition
from daari.errors import NotFound
from daari.protocol.wire import make_responses_wire
from daari.responses.history import input_items, previous_not_found, with_history
from daari.responses.input_items import input_items_page
from daari.responses.store import ResponseArchive, StoredResponse
from daari.server.asgi_io import AsgiSink, send_json
from daari.server.chat_route import ChatRoute
from daari.server.http_request import HttpRequest

log = logging.getLogger("daari.server")


class StoringSink:
    """A `Sink` that stores the final response object (handed over by the renderer) before writing it."""

    def __init__(self, inner: AsgiSink, archive: ResponseArchive | None, partition: str,
                 input_items: list[dict[str, Any]], store: bool) -> None:
        self.inner = inner
        self.archive = archive
        self.partition = partition
        self.input_items = input_items
        self.store = store
        self.previous_id: str | None = None  # the stored response this one continues; its history comes first
        self.own_from = 0  # where this request's own items start in `input_items`
        self.final: list[dict[str, Any]] = []  # the renderer appends the final response here

    @property
    def stream_opened(self) -> bool:
        return self.inner.stream_opened

    async def _store(self) -> None:
        if not self.final or self.archive is None:
            return
        response = self.final.pop()
        if not self.store or not isinstance(response.get("id"), str):
            return
        try:
            await self.archive.put(response["id"], StoredResponse(response, self.input_items, self.previous_id,
                                                                  self.own_from), self.partition)
        except Exception:  # a full disk must not fail an answer that is ready
            log.exception("storing response %s failed", response["id"])

    async def send_json(self, status: int, body: dict[str, Any], headers: dict[str, str]) -> None:
        if status == 200:
            await self._store()
        await self.inner.send_json(status, body, headers)

    async def open_stream(self, headers: dict[str, str]) -> None:
        await self.inner.open_stream(headers)

    async def write(self, chunks: list[bytes]) -> None:
        await self._store()
        await self.inner.write(chunks)

    async def close_stream(self, chunks: Sequence[bytes] = ()) -> None:
        if chunks:
            await self._store()  # as before a write: the final response is complete once its last events are
        await self.inner.close_stream(chunks)


class ResponsesRoutes:
    def __init__(self, chat: ChatRoute, archive: ResponseArchive | None, partition_secret: bytes | None) -> None:
        self.chat = chat
        self.archive = archive
        self.partition_secret = partition_secret

    async def create(self, req: HttpRequest) -> None:
        archive = self.archive
        partition = self._partition(req)
        sink = StoringSink(AsgiSink(req.send), archive, partition, [], store=True)

        async def prepare(body: Any) -> Any:
            """Fold in the previous response's history; note what to store with this one."""
            if not isinstance(body, dict):
                return body
            previous_id = body.get("previous_response_id")
            if isinstance(previous_id, str):
                previous = await archive.get(previous_id, partition) if archive is not None else None
                if previous is None:
                    raise previous_not_found(previous_id)
                body = with_history(body, previous)
                sink.previous_id = previous_id  # stored by reference: only this request's own items are new
                sink.own_from = len(previous.input_items) + len(previous.output_items)
            sink.input_items = input_items(body.get("input"))
            sink.store = body.get("store") is not False
            return body

        await self.chat.serve(req, make_responses_wire(sink.final.append), sink, prepare)

    def _partition(self, req: HttpRequest) -> str:
        """The caller's partition of stored responses: the cache's, "" when no tier forwards client keys."""
        return cache_partition(self.partition_secret, req.headers)

    async def get(self, req: HttpRequest) -> None:
        """A stored response, or its input items (`/v1/responses/{id}/input_items`)."""
        response_id, _, rest = _response_id(req).partition("/")
        archive = self.archive
        stored = await archive.get(response_id, self._partition(req)) if archive is not None else None
        if stored is None or rest not in ("", "input_items"):
            raise NotFound(f"Response with id '{response_id}' not found.", param="response_id")
        if rest == "input_items":
            query = {k: v[-1] for k, v in parse_qs(req.query_string).items()}
            await send_json(req.send, 200, input_items_page(stored.input_items, response_id, query))
            return
        await send_json(req.send, 200, stored.response)

    async def delete(self, req: HttpRequest) -> None:
        response_id = _response_id(req)
        if self.archive is None or not await self.archive.delete(response_id, self._partition(req)):
            raise NotFound(f"Response with id '{response_id}' not found.", param="response_id")
        await send_json(req.send, 200, {"id": response_id, "object": "response.deleted", "deleted": True})


def _response_id(req: HttpRequest) -> str:
    return req.path.rstrip("/").removeprefix("/v1").removeprefix("/responses/")
