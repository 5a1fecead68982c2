"""The org cache service's HTTP paths: what the service (daari/org_service/) serves and an instance's client asks."""

from __future__ import annotations

CREDENTIALS_PATH = "/v1/org/credentials"
SHARE_PATH = "/v1/org/share"
