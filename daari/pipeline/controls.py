"""Per-request control headers: X-Daari-Tier-Override and X-Daari-No-Cache."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from daari.cache.l0_key import keyed_override
from daari.errors import InvalidRequest
from daari.routing.plan import OVERRIDE_VALUES

TIER_OVERRIDE = "x-daari-tier-override"
NO_CACHE = "x-daari-no-cache"


@dataclass(frozen=True)
class Controls:
    tier_override: str | None = None
    no_cache: bool = False

    @property
    def keyed_override(self) -> str | None:
        """The override as L0 keys (and the key memo) hold it: `L0` reads what an ordinary request stored."""
        return keyed_override(self.tier_override)


NO_CONTROLS = Controls()


def parse_controls(headers: Mapping[str, str]) -> Controls:
    if TIER_OVERRIDE not in headers and NO_CACHE not in headers:
        return NO_CONTROLS  # what nearly every request carries: neither header (Controls is immutable)
    override = headers.get(TIER_OVERRIDE)
    if override is not None:
        override = override.strip().upper()
        if override not in OVERRIDE_VALUES:
            raise InvalidRequest(
                f"X-Daari-Tier-Override must be one of {', '.join(OVERRIDE_VALUES)}, got {override!r}",
                param="X-Daari-Tier-Override",
            )
    no_cache_value = headers.get(NO_CACHE, "").strip().lower()
    if no_cache_value not in ("", "true", "false", "1", "0", "yes", "no"):
        raise InvalidRequest(f"X-Daari-No-Cache must be true or false, got {no_cache_value!r}",
                             param="X-Daari-No-Cache")
    return Controls(tier_override=override, no_cache=no_cache_value in ("true", "1", "yes"))
