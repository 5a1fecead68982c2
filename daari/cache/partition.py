"""Cache partitions: an answer paid for with one credential is never served to another.

The partition is an HMAC of the caller's credential under the data dir's secret: stable across restarts,
useless to anyone who reads the cache, and never the key itself. "" is the shared partition.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping

from daari.config import Config

CREDENTIAL_HEADERS = ("x-api-key", "authorization")  # in this order: the first one present counts


def forwards_client_keys(config: Config) -> bool:
    """Whether any active tier spends the client's own key: then the cache is partitioned by credential."""
    return any(config.tiers[t].forward_client_key for t in config.configured_tiers())


def client_credential(headers: Mapping[str, str]) -> str | None:
    """The provider credential a client sent (daari's own token is removed before this is asked)."""
    for name in CREDENTIAL_HEADERS:
        value = headers.get(name, "").strip()
        if value:
            return value
    return None


def cache_partition(secret: bytes | None, headers: Mapping[str, str]) -> str:
    """The request's partition: "" when the cache is shared (no secret) or the request has no credential."""
    if secret is None:
        return ""
    credential = client_credential(headers)
    if credential is None:
        return ""
    return hmac.new(secret, credential.encode(), hashlib.sha256).hexdigest()[:32]
