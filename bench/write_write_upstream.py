"""`python -m bench.write_write_upstream --port N`: an OpenAI-style upstream on Python's http.server (own process).

It answers every POST with the same chat.completion the way many small servers do: the head flushed in one
write, the body in a second, Nagle left on (no TCP_NODELAY). The body's segment then waits until the head is
ACKed, so a client in delayed-ACK mode waits up to 40 ms for it (issue 23; docs/performance.md, "The upstream
hop"). GET answers a model list (the benchmark's readiness check).
"""

from __future__ import annotations

import argparse
import http.server
import json
import signal
import threading
from typing import Any

ANSWER = json.dumps({
    "id": "chatcmpl-ww", "object": "chat.completion", "created": 1_700_000_000, "model": "good",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {
        "role": "assistant", "content": "`git rebase -i HEAD~3` opens the last three commits for editing."}}],
    "usage": {"prompt_tokens": 30, "completion_tokens": 14, "total_tokens": 44}}).encode()
MODELS = json.dumps({"object": "list", "data": [{"id": "good", "object": "model"}]}).encode()


class WriteWriteHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the upstream call expects

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self._answer(ANSWER)

    def do_GET(self) -> None:  # noqa: N802
        self._answer(MODELS)

    def _answer(self, body: bytes) -> None:
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()  # the first write: status line and headers
        self.wfile.write(body)  # the second

    def log_message(self, *args: Any) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), WriteWriteHandler)
    server.daemon_threads = True
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.shutdown).start())
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    server.server_close()


if __name__ == "__main__":
    main()
