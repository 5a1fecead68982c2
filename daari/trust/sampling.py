"""Whether to shadow-sample an answer, and what the samples may spend: the rate, the cap per minute and the
daily token budget (`trust.shadow.*`). Pure bookkeeping with an injected clock and random source.

The finishing step draws for each candidate answer (`drawn`, a random number), then asks `admit` (the minute's
count and what is left of the day); the ShadowActor `reserve`s a call's worst case before starting it and
`settle`s what it spent.
A call starts only when its reservation fits in what is left of the day, so the budget holds as long as the
upstream's count of the prompt is within the reservation's margin of daari's estimate.
"""

from __future__ import annotations

import math
import random
import time
from collections import deque
from collections.abc import Callable

DAY_S = 86_400.0
PROMPT_MARGIN = 1.25  # daari's token estimate is ~4 characters a token; an upstream may count more


class ShadowBudget:
    def __init__(self, rate: float, tier_rate: float, max_per_minute: int, daily_tokens: int, *,
                 clock: Callable[[], float] = time.time, draw: Callable[[], float] = random.random) -> None:
        self.rate = rate  # of cache hits (L0, L1)
        self.tier_rate = tier_rate  # of answers from a low tier (L2, L3, L4): the tier shadow evals
        self.max_per_minute = max_per_minute
        self.daily_tokens = daily_tokens
        self.clock = clock
        self.draw = draw
        self._admitted: deque[float] = deque()
        self._full_until = 0.0
        self._day = -1
        self.spent = 0  # tokens spent today (reported usage)
        self.reserved = 0  # tokens held by calls in flight

    def drawn(self, kind: str) -> bool:
        """The rate's draw: whether this answer is a candidate sample at all."""
        rate = self.rate if kind == "cache" else self.tier_rate
        return rate > 0 and self.draw() < rate

    def admit(self) -> str | None:
        """A drawn sample passes the caps: None, and it counts toward this minute; else why not."""
        now = self.clock()
        if now < self._full_until:  # the minute's samples are taken: one comparison per hit until it has passed
            return "minute_cap"
        admitted = self._admitted
        while admitted and admitted[0] <= now - 60.0:
            admitted.popleft()
        if len(admitted) >= self.max_per_minute:
            self._full_until = admitted[0] + 60.0
            return "minute_cap"
        if self.left(now) <= 0:
            return "daily_budget"
        admitted.append(now)
        return None

    def _roll(self, now: float) -> None:
        day = int(now // DAY_S)
        if day != self._day:
            self._day, self.spent = day, 0

    def left(self, now: float | None = None) -> int:
        self._roll(self.clock() if now is None else now)
        return self.daily_tokens - self.spent - self.reserved

    def reserve(self, prompt_estimate: int, max_answer_tokens: int) -> int | None:
        """Hold a call's worst case; None when it does not fit in what is left today."""
        need = math.ceil(prompt_estimate * PROMPT_MARGIN) + max_answer_tokens
        if need > self.left():
            return None
        self.reserved += need
        return need

    def settle(self, reserved: int, spent: int) -> None:
        """A call ended: release its reservation and count what it spent."""
        self.reserved = max(0, self.reserved - reserved)
        self._roll(self.clock())
        self.spent += max(0, spent)

    def restore(self, spent_today: int) -> None:
        """At start: what the outcome store says was spent today."""
        self._roll(self.clock())
        self.spent = spent_today
