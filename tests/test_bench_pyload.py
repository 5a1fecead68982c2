"""The fallback load client's response framing (bench/pyload.py): a miscount would skew every figure."""

from __future__ import annotations

from bench.pyload import build_request, response_end

HEAD = b"HTTP/1.1 200 \r\ncontent-type: application/json\r\n"


def test_content_length_response_ends_after_its_body() -> None:
    response = HEAD + b"content-length: 5\r\n\r\nhello"
    assert response_end(response) == (len(response), 200, False)
    assert response_end(response[:-1]) is None
    assert response_end(response + b"HTTP/1.1 200 ")[0] == len(response)  # a pipelined next response stays


def test_chunked_response_ends_after_the_zero_chunk() -> None:
    response = HEAD + b"transfer-encoding: chunked\r\n\r\n5\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n"
    assert response_end(response) == (len(response), 200, False)
    assert response_end(response[:-2]) is None
    assert response_end(response[:len(HEAD) + 40]) is None


def test_connection_close_is_reported_so_the_client_reconnects() -> None:
    response = b"HTTP/1.1 503 \r\nconnection: close\r\ncontent-length: 0\r\n\r\n"
    assert response_end(response) == (len(response), 503, True)


def test_request_carries_path_host_and_exact_length() -> None:
    request = build_request("http://127.0.0.1:9/v1/chat/completions", b'{"a":1}', {"X-Daari-No-Cache": "true"})
    head, _, body = request.partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:9\r\n")
    assert b"Content-Length: 7" in head and b"X-Daari-No-Cache: true" in head
    assert body == b'{"a":1}'
