"""`python -m bench.calibrate`: what a loopback round trip between two processes costs on this machine.

Every figure in the other parts crosses process boundaries (client -> daari -> upstream); on a virtual
machine, waking a process on another core can cost far more than the work itself. This part measures a
small-message TCP ping-pong on 127.0.0.1 with both processes on the same core and on two different cores.
"""

from __future__ import annotations

import os
import socket
import statistics
import time

from bench.report import Table, print_tables

ROUND_TRIPS = 2000


def _echo(listener: socket.socket, core: int) -> None:
    os.sched_setaffinity(0, {core})
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.settimeout(10)
    while data := conn.recv(256):
        conn.sendall(data)
    os._exit(0)


def ping_pong(client_core: int, server_core: int) -> tuple[float, float]:
    """(median round trip in us, median time inside send() in us) over ROUND_TRIPS 64-byte messages."""
    listener = socket.create_server(("127.0.0.1", 0))
    pid = os.fork()
    if pid == 0:
        _echo(listener, server_core)
    os.sched_setaffinity(0, {client_core})
    sock = socket.create_connection(listener.getsockname(), timeout=10)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    message = b"x" * 64
    round_trips, sends = [], []
    try:
        for _ in range(ROUND_TRIPS):
            start = time.perf_counter()
            sock.sendall(message)
            sent = time.perf_counter()
            received = 0
            while received < len(message):
                received += len(sock.recv(256))
            round_trips.append(time.perf_counter() - start)
            sends.append(sent - start)
    finally:
        sock.close()
        listener.close()
        os.waitpid(pid, 0)
    return statistics.median(round_trips) * 1e6, statistics.median(sends) * 1e6


def run() -> list[Table]:
    original = os.sched_getaffinity(0)
    cores = sorted(original)
    table = Table("Machine calibration: a 64-byte TCP ping-pong between two processes on 127.0.0.1",
                  ["placement", "round trip p50 us", "send() p50 us"])
    try:
        table.add("both on one core", *ping_pong(cores[0], cores[0]))
        if len(cores) > 1:
            table.add("on two cores", *ping_pong(cores[0], cores[1]))
    finally:
        os.sched_setaffinity(0, original)
    table.notes.append(f"{ROUND_TRIPS} round trips each; send() is the time the sender spends waking the receiver")
    return [table]


def main() -> None:
    print_tables(run())


if __name__ == "__main__":
    main()
