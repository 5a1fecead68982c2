"""Budgets in the pipeline (docs/budget.md):

- `ProjectStep` (routed, before execute): the request's project, the git root of X-Daari-Repo or of the working
  directory the client states in its prompt (`daari_meta.project`), looked up on a worker thread once per directory.
- `BudgetPlanner` (an execute planner): the tiers whose estimated cost would cross a cap are left out of the
  chain (`daari_meta.budget: downgraded`, the `X-Daari-Budget` header, attempts `skipped_budget`); with none left,
  a 429 `budget_exceeded` in the client's shape; past the soft ratio, a warning (log, `daari_meta.budget: soft`).
- `SpendRecorder` (the execute step's `on_attempt` hook): each attempt at a tier, once it ended, counted in the
  ledger and written to <data_dir>/spend.sqlite at the price table's price: the served answer, an answer judged
  too weak and escalated past, and one cut off mid-way (the client left, the upstream broke off), each from the
  usage its upstream reported, else from daari's estimates; and, the same way, each side call at a tier (`side`:
  self-check, Phase B classifier question, L1 verifier question, shadow call), with its purpose.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

import trio

from daari.budget.abandoned import usage_so_far
from daari.budget.caps import Cap, Caps, judge, periods, seconds_to_reset
from daari.budget.ledger import SIDE_CLIENT, Ledger, Spend, SpendStore
from daari.budget.payer import Payer
from daari.budget.project import project_of, stated_directory
from daari.config import BudgetConfig, PricingConfig
from daari.errors import DaariError
from daari.metrics import Metrics
from daari.pipeline.meta import Attempt
from daari.pipeline.payer import payer_of
from daari.pipeline.step import Answer
from daari.pipeline.steps.execute import Tiers
from daari.pipeline.turn import Turn
from daari.pricing import estimate_cost, usage_cost
from daari.protocol.chat import ChatRequest
from daari.protocol.events import Event, Finish
from daari.protocol.tokens import estimate_request_tokens
from daari.routing.agent_turn import needs_tool_calls

log = logging.getLogger("daari.budget")
SPEND_WRITE_S = 5.0  # an attempt's spend may be written in shielded cleanup: never hold it up longer
ADJECTIVE = {"day": "daily", "month": "monthly"}


class BudgetExceeded(DaariError):
    """Every tier that could answer would cross a spend cap. 429: the client may retry when the period resets."""

    status = 429
    openai_type = "insufficient_quota"
    anthropic_type = "rate_limit_error"
    code = "budget_exceeded"


class ProjectStep:
    name = "project"

    def __init__(self) -> None:
        self._known: dict[str, str] = {}

    async def __call__(self, turn: Turn) -> Answer | None:
        header = turn.headers.get("x-daari-repo") or stated_directory(turn.request)
        if not header:
            return None
        project = self._known.get(header)
        if project is None:
            project = await trio.to_thread.run_sync(project_of, header)
            if len(self._known) < 4096:
                self._known[header] = project
        if project:
            turn.meta.details["project"] = project
        return None


class BudgetPlanner:
    def __init__(self, config: BudgetConfig, caps: Caps, ledger: Ledger, pricing: PricingConfig,
                 models: Mapping[str, str | None], tiers: Tiers, metrics: Metrics, clock: Callable[[], float]) -> None:
        self.tiers = tiers  # every configured tier: where a request whose whole chain is over goes instead
        self.config = config
        self.caps = caps
        self.ledger = ledger
        self.pricing = pricing
        self.models = models  # tier -> configured model (None: the client's)
        self.metrics = metrics
        self.clock = clock
        self._warned: set[tuple[str, Cap, str]] = set()  # (period key, cap, scope key): one warning each

    def under_soft_caps(self, payer: Payer) -> bool:
        """Whether daari may spend on its own behalf for `payer` (a shadow sample): only while every cap that
        applies stays under its soft mark, so a budget nearly used is left to the user's own requests."""
        now = self.clock()
        caps = self.caps.for_request(payer.project, payer.client)
        return judge(caps, lambda cap: self.ledger.spent(cap, now, payer.project, payer.client), 0.0,
                     self.config.soft_ratio).state == "ok"

    def estimate(self, turn: Turn, tier: str) -> float:
        prompt = turn.classification.tokens if turn.classification is not None else 0
        model = self.models.get(tier) or turn.request.model
        return estimate_cost(self.pricing, tier, model, prompt, self.config.output_tokens)

    def __call__(self, turn: Turn, chain: list[str]) -> list[str]:
        payer = payer_of(turn)
        now, project, client = self.clock(), payer.project, payer.client

        def spent_of(cap: Cap) -> float:
            return self.ledger.spent(cap, now, project, client)

        caps = self.caps.for_request(project, client)  # a named project's or client's own, else the generic ones
        kept: list[str] = []
        refused: Cap | None = None
        for tier in chain:
            verdict = judge(caps, spent_of, self.estimate(turn, tier), self.config.soft_ratio)
            if verdict.state == "over":
                turn.meta.attempts.append(Attempt(tier, "skipped_budget"))
                refused = refused or verdict.cap
                continue
            if verdict.state == "soft" and verdict.cap is not None:
                self._warn(verdict.cap, now, project, client, verdict.spent)
                turn.meta.details.setdefault("budget", "soft")
            kept.append(tier)
        if refused is None:
            return kept
        if not kept:
            kept = self._below(turn, chain, caps, spent_of)
        turn.meta.details["budget"] = "downgraded" if kept else "exceeded"
        self.metrics.inc("budget_downgrades_total" if kept else "budget_refusals_total", scope=refused.scope,
                         period=refused.period)
        if not kept:
            turn.meta.error = "budget_exceeded"
            reset_s = seconds_to_reset(refused, now)
            raise BudgetExceeded(
                f"the {ADJECTIVE[refused.period]} {_scope_name(refused)} budget of ${refused.usd:g} would be crossed "
                f"and no tier under it can answer this request; it resets in {reset_s / 3600:.1f} h "
                "(budget: in daari.yaml)", retry_after=reset_s)
        return kept

    def _below(self, turn: Turn, chain: list[str], caps: list[Cap], spent_of: Callable[[Cap], float]) -> list[str]:
        """The best configured tier outside the chain that is under every cap: the highest, among those that can
        make tool calls when the request needs them and that no planner already left out (context, model names)."""
        skipped = {a.tier for a in turn.meta.attempts if a.outcome != "skipped_budget"}
        needs_tools = needs_tool_calls(turn.request)
        for tier in reversed(self.tiers.configured):
            if tier in chain or tier in skipped or (needs_tools and not self.tiers.tools_capable.get(tier)):
                continue
            if judge(caps, spent_of, self.estimate(turn, tier), self.config.soft_ratio).state != "over":
                return [tier]
        return []

    def _warn(self, cap: Cap, now: float, project: str, client: str, spent: float) -> None:
        key = {"all": "", "project": project, "client": client}[cap.scope]
        mark = (periods(now)[cap.period], cap, key)
        if mark in self._warned:
            return
        self._warned.add(mark)
        log.warning("budget: %s spend $%.4f is past %d%% of the %s cap $%g", _scope_name(cap, key), spent,
                    round(self.config.soft_ratio * 100), ADJECTIVE[cap.period], cap.usd)


def _scope_name(cap: Cap, key: str = "") -> str:
    if cap.scope == "all":
        return "overall"
    key = key or cap.name or ""
    return f"{cap.scope} {key}".strip() if key else f"per-{cap.scope}"


class SpendRecorder:
    """Counts what every attempt at a tier cost, once, where the attempt ends (docs/budget.md, "What is counted")."""

    def __init__(self, ledger: Ledger, store: SpendStore | None, pricing: PricingConfig, metrics: Metrics,
                 clock: Callable[[], float], models: Mapping[str, str | None]) -> None:
        self.ledger = ledger
        self.store = store
        self.pricing = pricing
        self.metrics = metrics
        self.clock = clock
        self.models = models  # tier -> configured model (None: the client's): the price when none is named
        self.limiter = trio.CapacityLimiter(1)  # the store's one connection

    async def attempt(self, turn: Turn, tier: str, events: list[Event]) -> None:
        """An attempt at `tier` ended after `events`: answered (served or escalated past), or cut off (the client
        left: this runs in the cancelled request's shielded cleanup; the upstream broke off). The upstream started
        answering, so it billed the prompt and what it generated: its own usage where it reported one (the final
        count of an answer that completed), else daari's estimates."""
        if self._unpriced(tier):
            return
        prompt = turn.classification.tokens if turn.classification is not None else 0
        await self._priced("answer", payer_of(turn), tier, turn.request.model, prompt, events)

    async def side(self, purpose: str, payer: Payer | None, tier: str, request: ChatRequest,
                   events: list[Event]) -> None:
        """A side call at `tier` (`purpose`: self_check, classifier, verify, shadow, compact) ended after `events`:
        counted like an attempt, to the request it was made for (`payer`), else to daari's own client."""
        if self._unpriced(tier):
            return
        await self._priced(purpose, payer or Payer("", SIDE_CLIENT), tier, request.model,
                           estimate_request_tokens(request), events)

    def _unpriced(self, tier: str) -> bool:
        """No price can apply at `tier` (none for the tier, none for any model): every attempt there costs 0 and
        `_priced` would count nothing. Told before the payer and the usage are worked out: a local or free tier's
        attempt (most pass-through requests) pays for neither."""
        return not self.pricing.models and tier not in self.pricing.tiers

    async def _priced(self, purpose: str, payer: Payer, tier: str, client_model: str, prompt: int,
                      events: list[Event]) -> None:
        usage, source, model = usage_so_far(events, prompt)
        cost = usage_cost(self.pricing, tier, model or self.models.get(tier) or client_model, usage)
        if cost <= 0:
            return
        if not any(isinstance(event, Finish) for event in events):
            if purpose == "answer":
                self.metrics.inc("budget_cut_off_total", source=source, tier=tier)
        elif source != "reported":  # it finished without saying what it used: estimated, not free
            self.metrics.inc("budget_unreported_usage_total", purpose=purpose, tier=tier)
        # Shielded: an attempt cut off by its client leaving is counted in the request's cancelled scope.
        with trio.CancelScope(shield=True), trio.move_on_after(SPEND_WRITE_S):
            await self._count(Spend(self.clock(), payer.project, payer.client, payer.session, tier, cost, purpose))

    async def _count(self, spend: Spend) -> None:
        self.ledger.add(spend)
        if self.store is not None:
            try:
                await trio.to_thread.run_sync(self.store.add, spend, limiter=self.limiter)
            except Exception as exc:  # the disk failing never fails an answer already sent; counted in memory
                log.warning("budget: spend not saved to disk: %s", exc)
                self.metrics.inc("budget_store_failures_total")
