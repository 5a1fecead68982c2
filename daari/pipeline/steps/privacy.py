"""Secrets on the way to a remote tier (docs/privacy.md): the execute step's last request shaper and answer filter.

Reads: the request as the tier will get it (after session hygiene), which tiers are remote (privacy/remote.py),
`privacy.redact` and `privacy.never_send`. Decides: what a remote tier sees (never-send results withheld, secrets
as placeholders) and how its answer is restored; counts in metrics and daari_meta (`redacted`, `withheld`), never
a secret. It works per tier attempt, not once per request, because a local tier of the same chain gets the request
as sent. It is not in the step list: it acts on what one tier is sent, inside the execute step.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from daari.metrics import Metrics
from daari.pipeline.turn import Turn
from daari.privacy.never_send import withhold
from daari.privacy.redact import Redaction, Redactor
from daari.privacy.restore import Restorer
from daari.protocol.chat import ChatRequest


class PrivacyGuard:
    def __init__(self, remote: Collection[str], mode: str, never_send: Sequence[str], redactor: Redactor,
                 metrics: Metrics) -> None:
        self.remote = frozenset(remote)
        self.mode = mode  # "on" | "report" | "off"
        self.never_send = tuple(never_send)
        self.redactor = redactor
        self.metrics = metrics

    def prepare(self, turn: Turn, tier: str, request: ChatRequest) -> tuple[ChatRequest, Restorer | None]:
        """The request `tier` may see, and the filter its answer goes through (None: nothing to restore)."""
        if tier not in self.remote:
            return request, None
        sent, found, withheld = self._shielded(tier, request)
        if withheld:
            turn.meta.details["withheld"] = withheld
        if found is not None and found.count:
            turn.meta.details["redacted" if self.mode == "on" else "secrets_seen"] = found.count
        return sent, Restorer(found.secrets) if found is not None and found.secrets and sent is not request else None

    def shield(self, tier: str, request: ChatRequest) -> ChatRequest:
        """What a side question or a token count may send `tier` (nothing comes back to restore)."""
        if tier not in self.remote:
            return request
        return self._shielded(tier, request)[0]

    def _shielded(self, tier: str, request: ChatRequest) -> tuple[ChatRequest, Redaction | None, int]:
        request, withheld = withhold(request, self.never_send)
        if withheld:
            self.metrics.inc("privacy_withheld_total", withheld, tier=tier)
        if self.mode == "off":
            return request, None, withheld
        redacted, found = self.redactor.request(request)
        for kind, count in found.kinds.items():
            self.metrics.inc("privacy_secrets_total", count, tier=tier, kind=kind.lower(), action=self.mode)
        return (request if self.mode == "report" else redacted), found, withheld
