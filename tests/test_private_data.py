"""Private data stays private: the data dir lives in the user's data directory, 0700, every file 0600."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

import httpx
import pytest

from daari.cache.l0_store import L0Store
from daari.config import Config, config_from_dict
from daari.datadir import default_data_dir
from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app
from tests.support import daari_server, make_config, upstream_tier


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_default_data_dir_is_the_users_not_the_current_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_data_dir({"XDG_DATA_HOME": "/x/share"}) == "/x/share/daari"
    home = os.path.expanduser("~")
    assert default_data_dir({}) == os.path.join(home, ".local", "share", "daari")
    assert default_data_dir({"XDG_DATA_HOME": "relative/dir"}) == os.path.join(home, ".local", "share", "daari")
    monkeypatch.setenv("XDG_DATA_HOME", "/srv/userdata")
    assert Config().data_dir == "/srv/userdata/daari"
    assert config_from_dict({}).data_dir == "/srv/userdata/daari"


async def test_data_dir_and_every_file_in_it_are_private(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="daari")
    old_umask = os.umask(0o022)  # a usual umask: files would be 0644 unless daari says otherwise
    try:
        fake = FakeOpenAI()
        async with serve_app(fake) as upstream:
            config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
            async with daari_server(config) as server, httpx.AsyncClient(base_url=server.url) as client:
                reply = await client.post("/v1/chat/completions", json={
                    "model": "good", "messages": [{"role": "user", "content": "a private prompt"}]})
                assert reply.status_code == 200
                stored = await client.post("/v1/responses", json={"model": "good", "input": "a private prompt"})
                assert stored.status_code == 200
                data = tmp_path / "data"
                files = sorted(p.name for p in data.iterdir())
                assert {"l0.sqlite", "l0.sqlite-wal", "l0.sqlite-shm", "responses.sqlite"} <= set(files)
                assert mode(data) == 0o700
                for name in files:
                    assert mode(data / name) == 0o600, name
    finally:
        os.umask(old_umask)
    startup = [r.getMessage() for r in caplog.records if "daari listening on" in r.getMessage()]
    assert startup and f"data dir: {tmp_path / 'data'}" in startup[0]


def test_an_older_world_readable_store_is_tightened(tmp_path: Path) -> None:
    data = tmp_path / "old"
    data.mkdir(mode=0o755)
    (data / "l0.sqlite").touch(mode=0o644)
    (data / "l0.sqlite").chmod(0o644)
    data.chmod(0o755)
    L0Store(data / "l0.sqlite").close()
    assert mode(data) == 0o700 and mode(data / "l0.sqlite") == 0o600
