"""server.backlog reaches the listening socket: the kernel holds that many connections before daari accepts them
(Hypercorn's own default of 100 reset clients that opened hundreds of streams at once)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from daari.config import ServerConfig
from tests.support import daari_server, make_config, upstream_tier


def listen_backlog(port: str) -> int:
    """The backlog of the socket listening on 127.0.0.1:`port`, as the kernel reports it (`ss`'s Send-Q)."""
    listed = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True)
    rows = [line.split() for line in listed.stdout.splitlines() if line.strip()]
    assert len(rows) == 1, listed.stdout
    return int(rows[0][2])


@pytest.mark.parametrize("backlog", [None, 37])
async def test_the_listen_backlog_is_the_configured_one(tmp_path: Path, backlog: int | None) -> None:
    server = {"backlog": backlog} if backlog is not None else {}
    config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", "http://127.0.0.1:9/v1")}, server=server)
    async with daari_server(config) as running:
        port = running.url.rsplit(":", 1)[1]
        assert listen_backlog(port) == (backlog or ServerConfig().backlog)
    assert ServerConfig().backlog == 1024  # the documented default (docs/configuration.md), not Hypercorn's 100
