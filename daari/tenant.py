"""Tenants of the org cache: who a tenant is, the key prefix it owns, and the Redis ACL user that confines it there.

Pure rules shared by the service (which creates the ACL users) and the instances (which use them). A tenant is a
configured team id, or "k" + the caller's credential partition (daari/cache/partition.py: an HMAC of the API key).
Its keys all start with `t:<tenant>:`, and its ACL user may touch no other key: Redis refuses (NOPERM) what a bug
in daari might try.
"""

from __future__ import annotations

import hashlib
import hmac
import re

from daari.errors import ConfigError

TENANT_PATTERN = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")  # no glob character, no ':': it is a key prefix


def valid_tenant(tenant: str) -> bool:
    return TENANT_PATTERN.fullmatch(tenant) is not None


def team_tenant(team: str) -> str:
    if not valid_tenant(team) or team.startswith("k"):
        # "k..." is where key-derived tenants live: a team named like one could meet a caller's partition.
        raise ConfigError(f"cache.org.team: {team!r} must be 1-64 of a-z 0-9 _ -, starting with a letter or a "
                          "digit other than 'k'")
    return team


def key_tenant(partition: str) -> str | None:
    """The tenant of a caller's credential partition; None for the shared partition (no credential)."""
    return "k" + partition if partition else None


# Commands the categories above allow that name no key, so key patterns do not confine them, and that would let
# one tenant see or disturb the others: list key names (SCAN, RANDOMKEY), count them (DBSIZE), flush or kill the
# scripts other daari run (SCRIPT FLUSH, SCRIPT KILL), load or delete functions (FUNCTION), and pub/sub listings.
KEYLESS_DENIED = ("-scan", "-randomkey", "-dbsize", "-script|flush", "-script|kill", "-function", "-@pubsub")
SHARED_PREFIX = "s:"  # entries tenants chose to share: written by the service only, read by tenants that opted in
L0_KEY = re.compile(r"^[0-9a-f]{64}$")  # an L0 key (hex SHA-256)


def tenant_prefix(tenant: str) -> str:
    return f"t:{tenant}:"


def acl_username(tenant: str) -> str:
    return f"daari-t-{tenant}"


def tenant_password(secret: bytes, tenant: str) -> str:
    """The tenant's Redis password: derived, so the service stores none and hands out the same one every time."""
    return hmac.new(secret, f"org-tenant:{tenant}".encode(), hashlib.sha256).hexdigest()


def acl_rules(tenant: str, password: str, *, shared: bool = False) -> list[str]:
    """ACL SETUSER rules for the tenant's user: its own keys and channels, the commands the L0 and L1 stores run,
    nothing dangerous; `shared` (the tenant opted in to sharing): also read, never write, the shared entries.
    `reset` first: the rules are exactly these, whatever the user had before."""
    prefix = tenant_prefix(tenant)
    return ["reset", "on", f">{password}", f"~{prefix}*", *([f"%R~{SHARED_PREFIX}*"] if shared else []),
            f"&{prefix}*", "+@read", "+@write", "+@stream", "+@scripting", "+@connection",
            "+time",  # the L1 put script seeds its ids from Redis's clock
            "-@dangerous", *KEYLESS_DENIED]


def token_digest(token: str) -> str:
    """How the service config names a token: its SHA-256, so the config file holds no usable secret."""
    return hashlib.sha256(token.encode()).hexdigest()
