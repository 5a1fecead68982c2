"""The text of a tool answer: the command, its exit code and output in a fenced block, where the log is."""

from __future__ import annotations

import re

from daari.tools.plan import CommandPlan

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07]*\x07|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def clean_output(text: str) -> str:
    """Terminal colours and control characters out; a fence inside the output cannot close ours."""
    return _ANSI.sub("", text).replace("```", "`\u200b``")


def fence(text: str) -> str:
    body = clean_output(text).rstrip("\n")
    return f"```text\n{body}\n```" if body else "_(no output)_"


def status_line(exit_code: int | None, duration_ms: float, timed_out: bool) -> str:
    if timed_out:
        return f"timed out after {duration_ms / 1000:.1f} s (the whole process group was killed)"
    return f"exit code {exit_code}, {duration_ms / 1000:.2f} s"


def render_run(display: str, repo_root: str, exit_code: int | None, duration_ms: float, timed_out: bool,
               summary: str, log_path: str) -> str:
    return (f"$ {display}\n({status_line(exit_code, duration_ms, timed_out)}, in {repo_root})\n\n"
            f"{fence(summary)}\n\nFull log: {log_path}")


def render_cached(display: str, repo_root: str, exit_code: int | None, age_s: float, duration_ms: float,
                  summary: str, log_path: str) -> str:
    return (f"$ {display}\n(from the command context store: ran {age_s:.0f} s ago, exit code {exit_code}, "
            f"{duration_ms / 1000:.2f} s, in {repo_root}; say \"run it again\" or send "
            f"X-Daari-ReRun-Command: true for a fresh run)\n\n{fence(summary)}\n\nFull log: {log_path}")


def render_confirmation(plan: CommandPlan) -> str:
    return (f"This would run a command that changes files:\n\n    {plan.display}\n\nin {plan.cwd}. Nothing was "
            "run. To run it, send the same request again with the header X-Daari-Confirm-Tool: true "
            "(or set tools.auto_confirm: true).")


def render_no_context(display: str, repo_root: str, ttl_s: float) -> str:
    return (f"There is no recent result of `{display}` in {repo_root} (results are kept {ttl_s:.0f} s). "
            "Ask daari to run it (for example \"run the tests\") and ask again.")
