"""Requests daari refuses before routing (unknown route, wrong method, guard, bad count_tokens body...): one
log line each (reason, status in the client's protocol, never content) and the `refused_total` counter.

Chat requests refused while parsing are logged by their routing decision already (`pipeline/record.py`);
they are counted here too, so `refused_total` holds every refusal."""

from __future__ import annotations

import logging

from daari.errors import DaariError
from daari.metrics import Metrics

log = logging.getLogger("daari.server")


def refusal_reason(err: DaariError) -> str:
    """The error's code (or class) and the field it names: no message text, which may quote the request."""
    reason = err.code or type(err).__name__
    return f"{reason} param={err.param}" if err.param else reason


def record_refusal(metrics: Metrics, method: str, path: str, protocol: str, err: DaariError, status: int, *,
                   logged: bool = False) -> None:
    """Count a refusal; log its line unless the request's routing decision did (`logged`)."""
    metrics.inc("refused_total", code=err.code or type(err).__name__, status=str(status))
    if not logged:
        log.warning("refused %s %s protocol=%s status=%d reason=%s", method, path, protocol, status,
                    refusal_reason(err))
