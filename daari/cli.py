"""The `daari` command: `daari serve`, `daari code`, `daari eval routing|cache|judge`, `daari tail`, `daari report`,
`daari org-cache serve`."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any

from daari.errors import ConfigError, DaariError, StartupError
from daari.observe.commands import add_parsers as add_observe_parsers
from daari.observe.commands import run_report, run_tail


def _serve(args: argparse.Namespace) -> int:
    import trio

    from daari.config import load_config
    from daari.server.serve import run_server

    overrides: dict[str, Any] = {}
    if args.host is not None:
        overrides["server.host"] = args.host
    if args.port is not None:
        overrides["server.port"] = args.port
    if args.data_dir is not None:
        overrides["data_dir"] = args.data_dir
    if args.front_end is not None:
        overrides["server.front_end"] = args.front_end
    config_path = args.config
    if config_path is None and os.path.exists("daari.yaml"):
        config_path = "daari.yaml"
    try:
        config = load_config(config_path, overrides)
    except ConfigError as exc:
        print(f"daari: config error: {exc}", file=sys.stderr)
        return 2
    try:
        trio.run(lambda: run_server(config, handle_signals=True))
    except BaseException as exc:  # sorted below; anything unexpected is re-raised
        cause = _root_cause(exc)
        if isinstance(cause, KeyboardInterrupt):
            return 130
        if isinstance(cause, DaariError | StartupError):
            print(f"daari: {cause}", file=sys.stderr)
            return 1
        if isinstance(cause, OSError):  # e.g. the port is taken
            print(f"daari: cannot start: {cause}", file=sys.stderr)
            return 1
        raise
    return 0


def _org_cache(args: argparse.Namespace) -> int:
    import trio

    from daari.org_service.config import load_service_config
    from daari.org_service.service import run_org_service

    try:
        config = load_service_config(args.config)
    except ConfigError as exc:
        print(f"daari: config error: {exc}", file=sys.stderr)
        return 2
    if args.host is not None:
        config.host = args.host
    if args.port is not None:
        config.port = args.port
    try:
        trio.run(lambda: run_org_service(config, handle_signals=True))
    except BaseException as exc:
        cause = _root_cause(exc)
        if isinstance(cause, KeyboardInterrupt):
            return 130
        if isinstance(cause, DaariError | StartupError | OSError):
            print(f"daari: cannot start the org cache: {cause}", file=sys.stderr)
            return 1
        raise
    return 0


def _root_cause(exc: BaseException) -> BaseException:
    """The one exception inside nested nursery exception groups, or the group itself."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _eval(args: argparse.Namespace, rest: list[str]) -> int:
    if args.suite == "cache":
        from daari.eval.cache_eval import main as cache_main

        return cache_main(rest)
    if args.suite == "judge":
        from daari.eval.judge_eval import main as judge_main

        return judge_main(rest)
    if args.suite == "trust":
        from daari.eval.trust_eval import main as trust_main

        return trust_main(rest)
    if args.suite == "draft":
        from daari.eval.draft_eval import main as draft_main

        return draft_main(rest)
    if args.suite != "routing":
        print(f"daari: unknown eval suite {args.suite!r} (available: routing, cache, judge, trust, draft)",
              file=sys.stderr)
        return 2
    from daari.eval.routing_eval import main as routing_main

    return routing_main(rest)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="daari", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the proxy")
    serve.add_argument("--host", default=None, help="listen address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="listen port (default 8787)")
    serve.add_argument("--config", default=None, help="daari.yaml path (default ./daari.yaml if present)")
    serve.add_argument("--front-end", choices=("hypercorn", "h11"), default=None,
                       help="HTTP server: hypercorn (default) or h11 (daari's own, leaner; server.front_end)")
    serve.add_argument("--data-dir", default=None,
                       help="where the cache lives (default $XDG_DATA_HOME/daari, else ~/.local/share/daari)")
    # No -h of its own: `daari eval routing --help` reaches the suite's parser, which lists its options.
    # Parsed by daari.launch.command (its own -h): everything after `--` belongs to the agent.
    sub.add_parser("code", help="run a coding agent (claude, codex, opencode, aider) through daari",
                   add_help=False)
    evals = sub.add_parser("eval", help="run an evaluation against a running daari", add_help=False)
    evals.add_argument("suite", help="routing (against a running daari), cache (offline, L1 verifier), judge "
                                     "(offline, the answer judge on evals/judge), trust (offline, L1's learned bars "
                                     "against cache.l1.error_bound) or draft (offline, draft injection's token "
                                     "saving and agreement)")
    org = sub.add_parser("org-cache", help="the org cache's token service (docs/redis.md, \"Org cache\")")
    org_sub = org.add_subparsers(dest="org_command", required=True)
    org_serve = org_sub.add_parser("serve", help="check instance tokens and hand out tenants' Redis users")
    org_serve.add_argument("--config", default=None, help="org-cache.yaml path")
    org_serve.add_argument("--host", default=None, help="listen address (default 127.0.0.1)")
    org_serve.add_argument("--port", type=int, default=None, help="listen port (default 8790)")
    add_observe_parsers(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=os.environ.get("DAARI_LOG_LEVEL", "INFO"),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is noise in a table
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    # Before torch is imported: idle OpenMP threads must not spin on a small machine shared with clients.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["code"]:
        from daari.launch.command import main as code_main

        return code_main(argv[1:])
    parser = build_parser()
    args, rest = parser.parse_known_args(argv)
    if args.command == "serve":
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        return _serve(args)
    if args.command == "org-cache":
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        return _org_cache(args)
    if args.command in ("tail", "report"):
        if rest:
            parser.error(f"unrecognized arguments: {' '.join(rest)}")
        return run_tail(args) if args.command == "tail" else run_report(args)
    return _eval(args, rest)


if __name__ == "__main__":
    sys.exit(main())
