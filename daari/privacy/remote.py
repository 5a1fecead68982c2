"""Which tiers are outside the machine, so their requests are redacted: a tier's `remote` setting when given; else
L6 always, the embedded model never, and any other tier whose base_url's host is not this machine (a model server
on another machine of the LAN is outside it too)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from daari.config import TierConfig

LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


def on_this_machine(base_url: str | None) -> bool:
    if not base_url:
        return False
    host = (urlsplit(base_url).hostname or "").lower()
    if host in LOOPBACK_NAMES or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def is_remote(tier: str, config: TierConfig) -> bool:
    if config.remote is not None:
        return config.remote
    if tier == "L6":
        return True
    if config.executor == "embedded":
        return False
    return not on_this_machine(config.base_url)
