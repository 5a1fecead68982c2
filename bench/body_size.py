"""`python -m bench.body_size`: daari's CPU and instructions per pass-through request, by request body size.

An agent's turn on a miss carries its whole history: Claude Code sends 30 KB on a session's first turn and
300 KB - 1 MB on every turn of a long one. This measures what each size costs daari with the cache off
(`X-Daari-No-Cache: true`), Claude Code's Anthropic `/v1/messages` body (billing block, long system prompt,
eight tools, adaptive thinking, then turn after turn of thinking, text, a Read `tool_use` and its file in a
`tool_result`; tests/claude_session.py's shape) grown to 1 KB (a bare question: the small body), 30, 110, 300 and
1024 KB, every request new, against tests/fakes' Anthropic upstream in its own process on loopback.

The measured process runs a real daari (actors, Hypercorn on 127.0.0.1; L1 off, as no request reaches it) and a
minimal HTTP/1.1 client on a raw socket (one `send` of head and body, the answer read by Content-Length). Each
size is measured twice, in windows: the client calling the upstream directly (the client's own share), and the
client calling daari; daari's share is the difference. Two load-independent figures per window:

- CPU: `time.process_time()` (every thread of the process; bodies from `server.thread_parse_bytes` up are
  parsed on a worker thread);
- instructions (`--instructions`, needs valgrind): the process runs under callgrind and the parent dumps its
  counters (`callgrind_control -d PID`) at the start and end of each window while the process waits.

The upstream's own CPU per request (Hypercorn receiving the body and `json.loads` of it, in its process) is
printed beside as a yardstick: what the least a Python server does with such a body costs.

    python -m bench.body_size                        # CPU, 30 requests per size
    python -m bench.body_size --instructions         # instructions under callgrind (minutes), 4 per size
    python -m bench.body_size --profile 300          # cProfile of daari's process on 300 KB requests
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import pstats
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.step_timer import time_steps

ROOT = Path(__file__).resolve().parents[1]
SIZES_KB = (1, 30, 110, 300, 1024)
WARM = 3


def code(seed: int, lines: int) -> str:
    """A file as Claude Code's Read tool returns it: numbered lines of Python, different for every seed."""
    words = ("parse", "token", "buffer", "stream", "module", "config", "request", "answer", "session", "cache")
    def line(i: int) -> str:
        if i % 2 == 0:
            return f"def {words[(seed + i) % 10]}_{seed}_{i}(event, context):"
        return f"    return {{'status': {200 + i % 7}, 'body': event['{words[i % 10]}']}}"

    return "\n".join(f"{i + 1:>6}\t{line(i)}" for i in range(lines))


def claude_body(salt: int, size_kb: int) -> bytes:
    """One request body of about `size_kb` KB: a bare question for 1 KB, else a Claude Code turn with tool history."""
    from tests.claude_session import ClaudeCodeSession

    if size_kb <= 2:
        return json.dumps({"model": "claude-sonnet-4-6", "max_tokens": 1024, "messages": [
            {"role": "user", "content": f"Request {salt}: what does `git rebase -i HEAD~3` do? " + "Explain. " * 90}]},
            separators=(",", ":")).encode()
    session = ClaudeCodeSession(session_id=f"0b6c1f3e-5a2d-4c7e-9f10-{salt:012d}")
    session.requests = salt
    session.messages = [{"role": "user", "content": [{"type": "text", "text": f"Request {salt}: the parser tests "
                                                                                "fail; find why and fix it."}]}]
    target = size_kb * 1024
    size = len(json.dumps(session.body(), separators=(",", ":")))
    turn = 0
    while size < target:  # sized as it grows (one encoding of the whole body at the end: O(n), not O(n^2))
        tool_id = f"toolu_{salt:08d}{turn:06d}"
        lines = max(2, min(120, (target - size) // 60))
        added = [{"role": "assistant", "content": [
            {"type": "thinking", "thinking": f"I should read module {turn} to see what the test exercises.",
             "signature": "Eq" + "x" * 300},
            {"type": "text", "text": f"Let me read src/module_{turn}.py."},
            {"type": "tool_use", "id": tool_id, "name": "Read",
             "input": {"file_path": f"/repo/src/module_{turn}.py"}}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": tool_id, "content": code(salt * 1000 + turn, lines)}]}]
        session.messages.extend(added)
        size += sum(len(json.dumps(m, separators=(",", ":"))) + 1 for m in added)
        turn += 1
    body = session.body()
    body["stream"] = False  # a constant, small answer: only the request's size varies
    return json.dumps(body, separators=(",", ":")).encode()


def request_bytes(host: str, path: str, body: bytes) -> bytes:
    from tests.claude_session import ClaudeCodeSession

    headers = {**ClaudeCodeSession().headers(), "host": host, "content-type": "application/json",
               "content-length": str(len(body)), "x-daari-no-cache": "true"}
    return (f"POST {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode() + body


class RawClient:
    """Keep-alive HTTP/1.1 on one socket: a request in one send, the answer read by its Content-Length."""

    def __init__(self, stream: Any) -> None:
        self.stream = stream
        self.buffer = b""

    async def post(self, data: bytes) -> int:
        await self.stream.send_all(data)
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += await self._more()
        head, _, rest = self.buffer.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length = int(re.search(rb"(?im)^content-length:\s*(\d+)", head).group(1))  # type: ignore[union-attr]
        while len(rest) < length:
            rest += await self._more()
        self.buffer = rest[length:]
        if status != 200:
            raise RuntimeError(f"HTTP {status}: {rest[:300]!r}")
        return status

    async def _more(self) -> bytes:
        chunk: bytes = await self.stream.receive_some(1 << 16)
        if not chunk:
            raise RuntimeError("connection closed")
        return chunk


async def child(upstream: str, body_dir: Path, sizes: list[int], calls: int, profile_kb: int | None, steps: bool,
                inline: bool) -> None:
    """The measured process: windows announced on stdout, each started by a line on stdin."""
    import trio

    from tests.support import daari_server, make_config, upstream_tier

    def say(**event: Any) -> None:
        print(json.dumps(event), flush=True)

    tmp = Path(tempfile.mkdtemp(prefix="daari-body-size-"))
    config = make_config(tmp, tiers={"L3": upstream_tier("anthropic", upstream)}, cache={"l1": {"enabled": False}},
                         **({"server": {"port": 0, "grace_period_s": 2, "thread_parse_bytes": 0}} if inline else {}))
    async with daari_server(config) as server:
        spent: dict[str, float] = {}
        if steps:
            time_steps(server.parts.pipeline, spent, time.process_time)  # every thread's: large bodies parse on one
        targets = {"direct": upstream, "daari": server.url}

        async def connect(url: str) -> RawClient:
            host, port = url.removeprefix("http://").split(":")
            return RawClient(await trio.open_tcp_stream(host, int(port)))

        def bodies(size: int, name: str) -> list[bytes]:
            """The bodies the parent made (every one different), each with its request head."""
            files = sorted(body_dir.glob(f"{size}-{name}-*.json"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
            return [request_bytes(targets[name].removeprefix("http://"), "/v1/messages?beta=true", f.read_bytes())
                    for f in files]

        made = {(size, name): bodies(size, name) for size in sizes for name in targets}
        for size in sizes:  # every size once through both first: lazy imports and first-use caches are not measured
            for name, url in targets.items():
                client = await connect(url)
                await client.post(made[(size, name)][0])
                await client.stream.aclose()
        for size in sizes:
            for name in ("direct", "daari"):
                client = await connect(targets[name])  # a fresh connection: the last may have idled out
                window = made.pop((size, name))[1:]
                for data in window[:WARM]:
                    await client.post(data)
                say(event="ready", size_kb=size, path=name, body_bytes=len(window[-1]))
                sys.stdin.readline()  # the parent dumps callgrind's counters meanwhile (the loop waits)
                spent.clear()
                profiler = cProfile.Profile(time.thread_time) if profile_kb == size and name == "daari" else None
                started = time.process_time()
                if profiler is not None:
                    profiler.enable()
                for data in window[WARM:]:
                    await client.post(data)
                await trio.sleep(0.05)  # what a request left for the hub's subscribers runs inside the window
                if profiler is not None:
                    profiler.disable()
                cpu = time.process_time() - started
                say(event="done", size_kb=size, path=name, cpu_s=cpu, calls=calls, steps=spent)
                await client.stream.aclose()
                sys.stdin.readline()
                if profiler is not None:
                    out = io.StringIO()
                    stats = pstats.Stats(profiler, stream=out)
                    stats.sort_stats("tottime").print_stats(30)
                    stats.sort_stats("cumulative").print_stats(r"/daari/|/actors/", 45)
                    sys.stderr.write(out.getvalue())
        server.shutdown.set()


def _dump(pid: int, out: Path, keep: Path | None = None) -> int:
    """Dump callgrind's counters of `pid` (since its last dump) and return their total (the dump copied to
    `keep`, if given)."""
    before = set(out.parent.glob(out.name + ".*"))
    subprocess.run(["callgrind_control", "-d", str(pid)], check=True, capture_output=True)
    new = sorted(set(out.parent.glob(out.name + ".*")) - before, key=lambda p: int(p.suffix[1:]))
    if not new:
        raise RuntimeError("callgrind wrote no dump")
    text = new[-1].read_text(errors="replace")
    match = re.search(r"^summary:\s*(\d+)", text, re.M) or re.search(r"^totals:\s*(\d+)", text, re.M)
    if match is None:
        raise RuntimeError("callgrind's dump has no total")
    if keep is not None:
        keep.write_text(text)
    for path in new:
        path.unlink()
    return int(match.group(1))


Results = dict[tuple[int, str], dict[str, float]]


def run(sizes: list[int], calls: int, instructions: bool, profile_kb: int | None, steps: bool,
        inline: bool, tree: Path | None = None, keep: Path | None = None) -> Results:
    """`tree`: daari (and tests/, whose fakes and helpers the measured process uses) from there, this bench from
    here. `keep`: where to copy callgrind's dump of the largest body's daari window (for callgrind_annotate)."""
    import psutil

    from bench.servers import fake_upstream, workdir

    results: Results = {}
    with workdir() as tmp, fake_upstream("anthropic", tmp) as upstream:
        upstream_ps = psutil.Process(upstream.process.pid)
        out = tmp / "cg.out"
        body_dir = tmp / "bodies"  # made here: under valgrind, 1 MB bodies would take the measured process minutes
        body_dir.mkdir()
        salt = 0
        for size in sizes:
            for name in ("direct", "daari"):
                for index in range(1 + WARM + calls):
                    salt += 1
                    (body_dir / f"{size}-{name}-{index}.json").write_bytes(claude_body(salt, size))
        argv = [sys.executable, str(Path(__file__).resolve()), "--child", upstream.url, "--bodies", str(body_dir),
                "--calls", str(calls),
                "--sizes", *map(str, sizes), *(["--profile", str(profile_kb)] if profile_kb else []),
                *(["--steps"] if steps else []), *(["--inline-parse"] if inline else [])]
        if instructions:
            argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", *argv]
        env = {**os.environ, "HF_HUB_OFFLINE": "1",
               "PYTHONPATH": str(ROOT) if tree is None else f"{tree}{os.pathsep}{ROOT}"}
        log = tmp / "measured.log"
        with log.open("w") as stderr, subprocess.Popen(argv, cwd=ROOT, env=env, stdin=subprocess.PIPE,
                                                      stdout=subprocess.PIPE, stderr=stderr, text=True) as process:
            assert process.stdin is not None and process.stdout is not None
            upstream_cpu = 0.0
            for line in process.stdout:
                event = json.loads(line)
                key = (int(event["size_kb"]), str(event["path"]))
                if event["event"] == "ready":
                    results[key] = {"body_bytes": float(event["body_bytes"])}
                    if instructions:
                        _dump(process.pid, out)
                    times = upstream_ps.cpu_times()
                    upstream_cpu = times.user + times.system
                else:
                    times = upstream_ps.cpu_times()
                    results[key]["upstream_cpu_s"] = (times.user + times.system - upstream_cpu) / event["calls"]
                    results[key]["cpu_s"] = float(event["cpu_s"]) / event["calls"]
                    for step, cpu in event["steps"].items():
                        results[key]["step:" + step] = cpu / event["calls"]
                    if instructions:
                        kept = keep if key == (sizes[-1], "daari") else None
                        results[key]["instructions"] = _dump(process.pid, out, kept) / event["calls"]
                process.stdin.write("go\n")
                process.stdin.flush()
            if process.wait() != 0:
                raise RuntimeError(f"the measured process failed ({process.returncode}):\n"
                                   + "\n".join(log.read_text(errors="replace").splitlines()[-40:]))
        if profile_kb:
            sys.stderr.write(log.read_text(errors="replace"))
    return results


def slope(points: list[tuple[float, float]]) -> float:
    """Least-squares slope of (x, y) points."""
    n = len(points)
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    return sum((x - mx) * (y - my) for x, y in points) / sum((x - mx) ** 2 for x, _ in points)


def tables(results: Results, sizes: list[int], instructions: bool) -> list[Any]:
    from bench.report import Table, ratio

    def share(size: int, field: str) -> float:
        return results[(size, "daari")][field] - results[(size, "direct")][field]

    small = sizes[0]
    cpu_table = Table("daari's CPU per pass-through request by body size (process CPU; daari minus the direct call)",
                      ["body", "daari ms", "vs smallest", "client alone ms", "upstream's own ms",
                       "daari / upstream's own"])
    for size in sizes:
        kb = results[(size, "daari")]["body_bytes"] / 1024
        cpu_table.add(f"{kb:,.0f} KB", share(size, "cpu_s") * 1e3, ratio(share(size, "cpu_s"), share(small, "cpu_s")),
                      results[(size, "direct")]["cpu_s"] * 1e3, results[(size, "daari")]["upstream_cpu_s"] * 1e3,
                      ratio(share(size, "cpu_s"), results[(size, "daari")]["upstream_cpu_s"]))
    kbs = {size: results[(size, "daari")]["body_bytes"] / 1024 for size in sizes}
    per_kb = slope([(kbs[s], share(s, "cpu_s") * 1e3) for s in sizes])
    up_kb = slope([(kbs[s], results[(s, "daari")]["upstream_cpu_s"] * 1e3) for s in sizes])
    cpu_table.notes.append(f"slope: {per_kb * 1e3:.1f} us of daari's CPU per KB (least squares over the sizes); "
                           f"the upstream's own: {up_kb * 1e3:.1f} us per KB ({ratio(per_kb, up_kb)})")
    if 110 in sizes:
        cpu_table.notes.append(f"110 KB minus {small} KB: {(share(110, 'cpu_s') - share(small, 'cpu_s')) * 1e3:.2f} ms "
                               "of daari's CPU (issue 23's target: <= 2 ms added)")
    out = [] if instructions else [cpu_table]  # under valgrind CPU time measures valgrind
    if instructions:
        table = Table("daari's instructions per pass-through request by body size (callgrind; daari minus the direct "
                      "call)", ["body", "daari instructions", "vs smallest", "client alone"])
        for size in sizes:
            table.add(f"{kbs[size]:,.0f} KB", f"{share(size, 'instructions'):,.0f}",
                      ratio(share(size, "instructions"), share(small, "instructions")),
                      f"{results[(size, 'direct')]['instructions']:,.0f}")
        per_kb_i = slope([(kbs[s], share(s, "instructions")) for s in sizes])
        table.notes.append(f"slope: {per_kb_i:,.0f} instructions per KB (least squares over the sizes)")
        if 110 in sizes:
            more = share(110, "instructions") - share(small, "instructions")
            table.notes.append(f"110 KB minus {small} KB: {more:,.0f} instructions "
                               f"({ratio(more, share(small, 'instructions'))} of the small body's)")
        out.append(table)
    names = [k for k in results[(small, "daari")] if k.startswith("step:")]
    if names and not instructions:
        table = Table("Process CPU per request in each pipeline step, ms (await included)",
                      ["step", *(f"{kbs[s]:,.0f} KB" for s in sizes), "us per KB"])
        for name in sorted(names, key=lambda n: -results[(sizes[-1], "daari")].get(n, 0.0)):
            per_size = [results[(s, "daari")].get(name, 0.0) * 1e3 for s in sizes]
            table.add(name.removeprefix("step:"), *per_size,
                      slope(list(zip([kbs[s] for s in sizes], per_size, strict=True))) * 1e3)
        outside = [(share(s, "cpu_s") - sum(results[(s, "daari")][n] for n in names)) * 1e3 for s in sizes]
        table.add("outside the steps (server, route, client watch)", *outside,
                  slope(list(zip([kbs[s] for s in sizes], outside, strict=True))) * 1e3)
        out.append(table)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, help="requests per size and path (default 30; 4 with --instructions)")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES_KB), help="body sizes in KB")
    parser.add_argument("--instructions", action="store_true", help="count instructions under callgrind")
    parser.add_argument("--profile", type=int, metavar="KB", help="cProfile daari on this size (to stderr)")
    parser.add_argument("--steps", action="store_true", help="also time each pipeline step (process CPU)")
    parser.add_argument("--inline-parse", action="store_true",
                        help="parse every body on the event loop (server.thread_parse_bytes: 0)")
    parser.add_argument("--rev", help="measure daari as of this git revision instead (e.g. 28bb03e)")
    parser.add_argument("--keep", type=Path, help="with --instructions: copy the largest body's callgrind dump here "
                        "(a dump taken through callgrind_control named no functions on this VM)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--bodies", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    calls = args.calls or (4 if args.instructions else 30)
    if args.child:
        import trio

        trio.run(child, args.child, args.bodies, args.sizes, calls, args.profile, args.steps, args.inline_parse)
        return
    from bench.report import machine, print_tables

    if len(args.sizes) < 2:
        parser.error("give at least two sizes (the slope is taken between them)")
    if args.rev:
        from bench.versus import exported, has_revision

        if not has_revision(args.rev):
            raise SystemExit(f"revision {args.rev} is not in this repository")
        with exported(args.rev) as tree:
            results = run(args.sizes, calls, args.instructions, args.profile, args.steps, args.inline_parse, tree,
                          args.keep)
    else:
        results = run(args.sizes, calls, args.instructions, args.profile, args.steps, args.inline_parse, None,
                      args.keep)
    print(f"{machine()}; daari {'as of ' + args.rev if args.rev else 'of this tree'}; {calls} requests per size "
          f"and path, load average {os.getloadavg()[0]:.1f}\n")
    print_tables(tables(results, args.sizes, args.instructions))


if __name__ == "__main__":
    main()
