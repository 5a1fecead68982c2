"""What shadow sampling and the trust figures are built from (compose.py calls `build_trust` once): the shared
budget, learned bars, diversity tracker and skip counts, the outcome store, the ShadowActor's dependencies, and
the routes that read them (GET /v1/daari/cache/diversity, the `shadow`/`trust` part of GET /v1/daari/report)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from actors.runtime import ActorTable
from actors.shadow import ShadowDeps
from daari.budget.payer import SideSpend
from daari.config import Config
from daari.executors.base import Executor
from daari.metrics import Metrics
from daari.server.actor_table import Shared
from daari.server.asgi_io import send_json
from daari.server.http_request import HttpRequest
from daari.trust.bars import LearnedBars
from daari.trust.diversity import COLLAPSED_AT, MIN_QUESTIONS, DiversityTracker
from daari.trust.plan import TierFacts
from daari.trust.report import summarize_trust
from daari.trust.sampling import ShadowBudget
from daari.trust.store import ShadowArchive, shadow_path


@dataclass
class Trust:
    config: Config
    budget: ShadowBudget
    bars: LearnedBars
    diversity: DiversityTracker
    archive: ShadowArchive
    skips: Counter[str] = field(default_factory=Counter)

    @property
    def sampling(self) -> bool:
        shadow = self.config.trust.shadow
        return (shadow.rate > 0 or shadow.tier_rate > 0) and shadow.daily_tokens > 0

    def deps(self, executors: dict[str, Executor], shared: Shared, metrics: Metrics, secret: bytes | None,
             spend: SideSpend | None = None) -> Callable[[ActorTable], ShadowDeps]:
        """The ShadowActor's dependencies, from the table's addresses once it exists."""
        config = self.config
        facts = {t: TierFacts(ex.kind, config.tiers[t].forward_client_key) for t, ex in executors.items()}
        configured = [t for t in config.configured_tiers() if t in executors]
        l1_on = config.cache.l1.enabled

        def make(table: ActorTable) -> ShadowDeps:
            return ShadowDeps(config.trust.shadow, shared.generations, configured, facts, self.archive,
                              self.budget, self.bars, self.diversity, metrics, self.skips,
                              l1=table.address("l1") if l1_on else None,
                              embedder=table.address("embedder") if l1_on else None,
                              embedder_status=shared.embedder_status if l1_on else None,
                              keep_texts=config.log.prompts == "full", keep_days=config.log.retention_days,
                              secret=secret, spend=spend)

        return make

    async def figures(self, since: float) -> dict[str, Any]:
        """The `shadow` and `trust` parts of GET /v1/daari/report: outcomes since `since`, the bars in force."""
        rows, skips = await self.archive.run(lambda s: (s.rows(since), s.skips()))
        for reason, count in self.skips.items():  # not yet written by the actor's snapshot
            skips[reason] = skips.get(reason, 0) + count
        return summarize_trust(rows, skips, self.diversity_rows(), self.bars.to_json())

    def diversity_rows(self) -> list[dict[str, Any]]:
        return [d.to_json() for d in self.diversity.summary()]

    async def diversity_route(self, req: HttpRequest) -> None:
        """GET /v1/daari/cache/diversity: per task type, distinct answers among the distinct questions that hit."""
        await send_json(req.send, 200, {"object": "daari.cache.diversity", "since": "start",
                                        "collapsed_at": COLLAPSED_AT, "min_questions": MIN_QUESTIONS,
                                        "data": self.diversity_rows()})


def build_trust(config: Config) -> Trust:
    shadow = config.trust.shadow
    l1 = config.cache.l1
    return Trust(config, ShadowBudget(shadow.rate, shadow.tier_rate, shadow.max_per_minute, shadow.daily_tokens),
                 LearnedBars(l1.similarity_threshold, l1.error_bound), DiversityTracker(),
                 ShadowArchive(shadow_path(config.data_dir)))
