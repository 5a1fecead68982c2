"""Tier plans: start at the ceiling, climb the configured tiers; overrides pin one."""

import pytest

from daari.errors import InvalidRequest
from daari.pipeline.controls import parse_controls
from daari.routing.plan import plan_tiers


def test_chain_starts_at_ceiling_and_climbs() -> None:
    assert plan_tiers("L3", ["L3", "L4", "L6"], None, True) == ["L3", "L4", "L6"]
    assert plan_tiers("L4", ["L3", "L4", "L6"], None, True) == ["L4", "L6"]
    assert plan_tiers("L5", ["L3", "L4", "L6"], None, True) == ["L6"]


def test_ceiling_above_every_tier_uses_the_highest_configured() -> None:
    assert plan_tiers("L6", ["L3"], None, True) == ["L3"]
    assert plan_tiers("L4", ["L3"], None, True) == ["L3"]


def test_without_escalation_only_the_first_tier() -> None:
    assert plan_tiers("L3", ["L3", "L4"], None, False) == ["L3"]


def test_override_pins_one_configured_tier() -> None:
    assert plan_tiers("L3", ["L3", "L4"], "L4", True) == ["L4"]
    with pytest.raises(InvalidRequest, match="not configured"):
        plan_tiers("L3", ["L3"], "L5", True)


def test_control_headers() -> None:
    assert parse_controls({}).tier_override is None
    assert parse_controls({"x-daari-tier-override": "l3"}).tier_override == "L3"
    assert parse_controls({"x-daari-no-cache": "true"}).no_cache
    with pytest.raises(InvalidRequest) as info:
        parse_controls({"x-daari-tier-override": "L9"})
    assert info.value.param == "X-Daari-Tier-Override"
    with pytest.raises(InvalidRequest):
        parse_controls({"x-daari-no-cache": "maybe"})
