"""Config values are checked for range, not only type: each mistake is one line naming its dotted key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from daari import cli
from daari.config import config_from_dict, redacted
from daari.errors import ConfigError


@pytest.mark.parametrize(("data", "key"), [
    ({"tiers": {"L3": {"max_queue": -1}}}, "tiers.L3.max_queue"),
    ({"tiers": {"L3": {"max_concurrency": 0}}}, "tiers.L3.max_concurrency"),
    ({"tiers": {"L3": {"max_tokens": 0}}}, "tiers.L3.max_tokens"),
    ({"tiers": {"L3": {"timeouts": {"first_byte_s": -1}}}}, "tiers.L3.timeouts.first_byte_s"),
    ({"tiers": {"L3": {"timeouts": {"total_s": 0}}}}, "tiers.L3.timeouts.total_s"),
    ({"tiers": {"L3": {"retry": {"max_retries": -2}}}}, "tiers.L3.retry.max_retries"),
    ({"tiers": {"L3": {"breaker": {"failure_threshold": 0}}}}, "tiers.L3.breaker.failure_threshold"),
    ({"server": {"port": 70000}}, "server.port"),
    ({"server": {"grace_period_s": -0.5}}, "server.grace_period_s"),
    ({"server": {"idle_trim_s": -1}}, "server.idle_trim_s"),
    ({"server": {"gc_young_threshold": -1}}, "server.gc_young_threshold"),
    ({"server": {"gc_middle_threshold": -1}}, "server.gc_middle_threshold"),
    ({"server": {"max_body_bytes": 0}}, "server.max_body_bytes"),
    ({"server": {"allowed_hosts": ["ok", 3]}}, "server.allowed_hosts[1]"),
    ({"server": {"allowed_origins": "https://one.example"}}, "server.allowed_origins"),
    ({"actors": {"mailbox_size": 0}}, "actors.mailbox_size"),
    ({"cache": {"l0": {"memory_mb": -5}}}, "cache.l0.memory_mb"),
    ({"confidence": {"l3_min": 1.5}}, "confidence.l3_min"),
    ({"confidence": {"logprob_floor": 1}}, "confidence.logprob_floor"),
])
def test_out_of_range_values_name_their_key(data: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_dict(data)
    message = str(info.value)
    assert message.startswith(f"{key}: ") and len(message.splitlines()) == 1


def test_values_in_range_load() -> None:
    config = config_from_dict({"server": {"port": 0, "allowed_hosts": ["daari.lan"]},
                               "confidence": {"logprob_floor": -4},
                               "tiers": {"L3": {"max_queue": 0, "max_concurrency": None}}})
    assert config.server.port == 0 and config.confidence.logprob_floor == -4.0
    assert config.tiers["L3"].max_queue == 0


def test_unknown_keys_are_still_rejected_with_their_path() -> None:
    with pytest.raises(ConfigError, match="unknown config key 'tiers.L3.timeouts.first_bite_s'"):
        config_from_dict({"tiers": {"L3": {"timeouts": {"first_bite_s": 1}}}})


def test_cli_prints_a_range_error_on_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "daari.yaml"
    config.write_text("tiers:\n  L3: {executor: embedded, max_queue: -1}\n")
    assert cli.main(["serve", "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "tiers.L3.max_queue" in err and "-1" in err


def test_redaction_hides_secrets_but_not_ordinary_fields() -> None:
    config = config_from_dict({"tiers": {"L3": {
        "executor": "openai", "base_url": "https://user:hunter2pw@gw.example/v1?key=QUERYSECRET&v=2",
        "api_key_env": "MY_KEY", "max_tokens": 300}}})
    shown = redacted(config)
    tier = shown["tiers"]["L3"]
    assert tier["max_tokens"] == 300
    assert tier["api_key_env"] == "MY_KEY" and shown["server"]["token_env"] == "DAARI_TOKEN"
    assert tier["base_url"] == "https://***@gw.example/v1?key=***&v=***"
    assert "hunter2pw" not in repr(shown) and "QUERYSECRET" not in repr(shown)
