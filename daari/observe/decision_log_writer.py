"""The decision log's writer process: `python -m daari.observe.decision_log_writer PATH --retention-s S --max-rows N`.

daari starts it (actors/decision_log.py) so that SQLite's work never shares the event loop's process: measured,
an in-process writer thread cost every request ~15-25 us of the event loop's time (docs/performance.md).

The protocol, over the child's stdin and stdout:
- it opens the log, then prints `ready` (or an error on stderr and exits with status 3);
- each frame on stdin is a 4-byte little-endian length and a JSON array of rows (each an array of values in
  `COLUMNS` order); each is written in one transaction and answered with one line, the number of rows stored
  (0 when the write failed: the reason goes to stderr);
- at end of input it closes the log and exits 0.
It prunes by age and count when it starts and every `PRUNE_EVERY_S`.
"""

from __future__ import annotations

import argparse
import signal
import sqlite3
import struct
import sys
import time
from pathlib import Path
from typing import BinaryIO

import orjson

from daari.observe.decision_log import DecisionLogStore, Values

PRUNE_EVERY_S = 600.0
OPEN_FAILED = 3
FRAME_HEADER = struct.Struct("<I")


def frame(rows: list[Values]) -> bytes:
    """Rows as one frame of the writer's input."""
    payload = orjson.dumps(rows)
    return FRAME_HEADER.pack(len(payload)) + payload


def read_frame(stream: BinaryIO) -> list[Values] | None:
    """The next frame's rows; None at a clean end of input."""
    header = stream.read(FRAME_HEADER.size)
    if len(header) < FRAME_HEADER.size:
        return None
    (size,) = FRAME_HEADER.unpack(header)
    payload = stream.read(size)
    if len(payload) < size:
        return None  # the parent died mid-frame: nothing whole to write
    return [tuple(row) for row in orjson.loads(payload)]


def serve(store: DecisionLogStore, source: BinaryIO, answers: BinaryIO, *, retention_s: float, max_rows: int) -> None:
    last_prune = -PRUNE_EVERY_S
    while True:
        now = time.monotonic()
        if now - last_prune >= PRUNE_EVERY_S:
            last_prune = now
            try:
                store.prune(retention_s, max_rows)
            except sqlite3.Error as exc:
                print(f"decision log pruning failed: {exc}", file=sys.stderr, flush=True)
        rows = read_frame(source)
        if rows is None:
            return
        try:
            written = store.insert_values(rows)
        except (sqlite3.Error, OSError) as exc:  # disk full, read-only: these rows are lost, the next may not be
            print(f"decision log write failed; {len(rows)} rows lost: {exc}", file=sys.stderr, flush=True)
            written = 0
        answers.write(b"%d\n" % written)
        answers.flush()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="daari.observe.decision_log_writer", description=__doc__)
    parser.add_argument("path", type=Path)
    parser.add_argument("--retention-s", type=float, required=True)
    parser.add_argument("--max-rows", type=int, required=True)
    args = parser.parse_args(argv)
    # Ctrl-C in daari's terminal reaches this process too: it ends when daari closes its input instead, after
    # writing what daari handed over as it shut down.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        store = DecisionLogStore(args.path)
    except (OSError, sqlite3.Error) as exc:
        print(f"cannot open {args.path}: {exc}", file=sys.stderr, flush=True)
        return OPEN_FAILED
    try:
        sys.stdout.buffer.write(b"ready\n")
        sys.stdout.buffer.flush()
        serve(store, sys.stdin.buffer, sys.stdout.buffer, retention_s=args.retention_s, max_rows=args.max_rows)
    except BrokenPipeError:  # daari went away: what was written stays written
        pass
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
