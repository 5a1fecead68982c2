"""org-cache.yaml: what `daari org-cache serve` listens on, the Redis it administers, and the tokens it accepts.

Loaded strictly like daari.yaml (an unknown key is an error naming it). Tokens are listed by their SHA-256, so the
file holds nothing an instance could authenticate with; the Redis admin password comes from an environment variable.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit, urlunsplit

from annotated_types import Ge, Le

from daari.config import RedisConfig, _build, check_redis_url, read_yaml
from daari.datadir import default_data_dir
from daari.errors import ConfigError
from daari.tenant import valid_tenant


@dataclass
class OrgToken:
    """One instance token: who holds it (for logs), its SHA-256, and the tenants it may ask a Redis user for."""

    name: str
    sha256: str
    tenants: list[str] = field(default_factory=list)  # team tenants (cache.org.team on the instance)
    key_tenants: bool = False  # may ask for callers' key tenants ("k" + credential partition)

    def __post_init__(self) -> None:
        if len(self.sha256) != 64 or any(c not in "0123456789abcdef" for c in self.sha256):
            raise ConfigError(f"tokens[{self.name}].sha256: expected 64 lower-case hex digits (sha256sum of the token)")
        for tenant in self.tenants:
            if not valid_tenant(tenant) or tenant.startswith("k"):
                raise ConfigError(f"tokens[{self.name}].tenants: {tenant!r} is not a team id (a-z 0-9 _ -, not "
                                  "starting with 'k')")

    def allows(self, tenant: str) -> bool:
        return tenant in self.tenants or (self.key_tenants and tenant.startswith("k"))


@dataclass
class OrgServiceConfig:
    host: str = "127.0.0.1"
    port: Annotated[int, Ge(0), Le(65535)] = 8790  # 0: any free port
    data_dir: str = field(default_factory=default_data_dir)  # holds the secret tenants' Redis passwords derive from
    redis: RedisConfig = field(default_factory=RedisConfig)  # an admin user (ACL SETUSER); key_prefix is unused
    instance_redis_url: str | None = None  # the URL instances reach Redis by (None: redis.url)
    allowed_hosts: list[str] = field(default_factory=list)  # Host names besides loopback and the bind address
    tokens: list[OrgToken] = field(default_factory=list)
    # Tenants that opted in to sharing (off for every other): their users may read the entries any of them chose
    # to share, and the service copies an entry a daari of theirs marks shareable to where they read them.
    sharing: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        for tenant in self.sharing:
            if not valid_tenant(tenant):
                raise ConfigError(f"sharing: {tenant!r} is not a tenant")
        if self.instance_redis_url is not None:
            check_redis_url(self.instance_redis_url, "instance_redis_url")
        names = [t.name for t in self.tokens]
        if len(set(names)) != len(names):
            raise ConfigError("tokens: two tokens have the same name")

    def redis_url_for_instances(self) -> str:
        """The URL an instance connects by, without any user in it (the instance gets its tenant's user)."""
        parts = urlsplit(self.instance_redis_url or self.redis.url)
        host = parts.netloc.rsplit("@", 1)[-1]
        return urlunsplit((parts.scheme, host, parts.path, parts.query, ""))


def load_service_config(path: str | Path | None) -> OrgServiceConfig:
    data: Any = read_yaml(path) if path is not None else {}
    config: OrgServiceConfig = _build(OrgServiceConfig, data, "")
    config.data_dir = os.path.expanduser(config.data_dir)
    return config
