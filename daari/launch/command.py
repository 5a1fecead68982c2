"""`daari code AGENT [--config FILE] [--port N] [-- AGENT ARGS...]`: find or start daari, point the agent at
it, run the agent, and stop daari afterwards only when this command started it."""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from daari.config import Config, load_config
from daari.errors import ConfigError
from daari.launch import child, server
from daari.launch.agents import AGENTS, LaunchError
from daari.launch.target import Target, agent_tier_window, connect_host

NOT_FOUND = 127  # the shell's status for a command it cannot find


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="daari code", description=__doc__,
        epilog="Examples: daari code claude;  daari code codex -- exec 'fix the failing test';  "
               "daari code aider --port 8800 -- --model openai/gpt-4.1")
    parser.add_argument("agent", choices=sorted(AGENTS), help="the coding agent to run")
    parser.add_argument("--config", default=None, help="daari.yaml path (default ./daari.yaml if present)")
    parser.add_argument("--port", type=int, default=None, help="daari's port (default: the config's, 8787)")
    return parser


def split_args(argv: list[str]) -> tuple[list[str], list[str]]:
    """daari code's own arguments, and the agent's (everything after the first `--`)."""
    if "--" in argv:
        at = argv.index("--")
        return argv[:at], argv[at + 1:]
    return argv, []


def _say(message: str) -> None:
    print(f"daari code: {message}", file=sys.stderr, flush=True)


def _load(config_arg: str | None, port: int | None) -> tuple[Config, str | None]:
    path = config_arg
    if path is None and os.path.exists("daari.yaml"):
        path = "daari.yaml"
    if path is not None:
        path = os.path.abspath(path)  # the background daari is started with it, whatever its cwd
    overrides = {"server.port": port} if port is not None else {}
    return load_config(path, overrides), path


def main(argv: list[str]) -> int:
    parser = build_parser()
    own, agent_args = split_args(argv)
    args, unknown = parser.parse_known_args(own)
    if unknown:
        parser.error(f"unrecognized arguments: {' '.join(unknown)} (the agent's own arguments go after --: "
                     f"daari code {args.agent} -- {' '.join(unknown)})")
    agent = AGENTS[args.agent]
    binary = shutil.which(agent.binary)
    if binary is None:
        _say(f"{agent.binary} is not installed (or not on PATH): {agent.install}")
        return NOT_FOUND
    try:
        config, config_path = _load(args.config, args.port)
    except ConfigError as exc:
        _say(f"config error: {exc}")
        return 2
    port = config.server.port
    if port == 0:
        _say("server.port is 0 (any free port): give daari code a port with --port")
        return 2
    url = f"http://{connect_host(config.server.host)}:{port}"
    token = os.environ.get(config.server.token_env) or None
    target = Target(url, token, config.server.token_env, agent_tier_window(config), Path(config.data_dir))

    found = server.probe(url, token)
    if found is server.Found.OTHER:
        _say(f"something other than daari listens on {url}: choose another port with --port")
        return 1
    if found is server.Found.LOCKED:
        state = "refuses the token in" if token else "needs its token: set"
        _say(f"the daari on {url} {state} {config.server.token_env}")
        return 1
    started: server.Started | None = None
    # Until the agent runs (it then gets these signals itself), SIGINT, SIGTERM and SIGHUP end daari code
    # through `finally`, so a daari it started is stopped, not left behind.
    quit_on = QuitOnSignal()
    previous = {sig: signal.signal(sig, quit_on) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    try:
        if found is server.Found.DAARI:
            _say(f"using the daari serving on {url}")
        else:
            _say(f"starting daari on {url} (log: {Path(config.data_dir) / server.LOG_FILE})")
            with quit_on.held():  # no exit between daari's start and `started` knowing it
                started = server.start(port, config_path, Path(config.data_dir), config.server.grace_period_s)
            if not server.wait_ready(url, token, started):
                _say(f"another daari started on {url} meanwhile: using it")
                started = None
        launch = agent.prepare(target, binary, agent_args, os.environ)
        return child.run(launch.argv, launch.env)
    except server.StartError as exc:
        _say(str(exc))
        return 1
    except LaunchError as exc:
        _say(str(exc))
        return 2
    finally:
        try:
            if started is not None:
                with quit_on.held():  # a signal now waits until daari is stopped
                    started.stop()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


class QuitOnSignal:
    """A signal handler that exits (SystemExit, 128 + the signal), except inside `held()`, after which a signal
    that came meanwhile exits."""

    def __init__(self) -> None:
        self.holding = False
        self.pending: int | None = None

    def __call__(self, signum: int, _frame: FrameType | None) -> None:
        self.pending = signum
        if not self.holding:
            raise SystemExit(128 + signum)

    @contextmanager
    def held(self) -> Iterator[None]:
        self.holding = True
        try:
            yield
        finally:
            self.holding = False
        if self.pending is not None:
            raise SystemExit(128 + self.pending)
