"""GET /ui in a real browser (Debian's headless Chromium through selenium): rows appear for requests made
while the page is open, the tier mix and the hour's latency table fill in, and a screenshot is taken."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app_in_thread
from tests.support import daari_in_thread, make_config, upstream_tier
from tests.test_l1_server import ORIGINAL, PARAPHRASE

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

# .ci/run installs Debian's chromium and chromium-driver; without them this module cannot run a browser.
pytestmark = pytest.mark.skipif(not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)),
                                reason="Debian's chromium and chromium-driver are not installed "
                                       "(apt-get install chromium chromium-driver; .ci/run does)")


def wait_for_l1(server: Any) -> None:
    """The L1 tier once its embedding model has loaded (it loads in the background at start; until then L1 is
    skipped)."""
    from daari.pipeline.steps.l1 import SemanticTier

    l1 = server.parts.shortcuts["L1"]
    assert isinstance(l1, SemanticTier)
    deadline = time.monotonic() + 120
    while not l1.status.ready and time.monotonic() < deadline:
        time.sleep(0.2)
    assert l1.status.ready, l1.health()


@pytest.fixture
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1400,900"):
        options.add_argument(argument)
    options.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def test_the_page_shows_decisions_live(tmp_path: Path, browser: Any) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    fake = FakeOpenAI()
    with serve_app_in_thread(fake) as upstream:
        config = make_config(tmp_path, tiers={"L3": upstream_tier("openai", upstream + "/v1")})
        with daari_in_thread(config) as server, httpx.Client(base_url=server.url, timeout=30) as client:
            wait_for_l1(server)
            browser.get(server.url + "/ui")
            wait = WebDriverWait(browser, 30)
            wait.until(lambda b: b.find_element(By.ID, "status").text == "live")
            asked = ["what is a rebase?", "what is a rebase?", "Format as JSON: {a: 1}", "what is a merge?",
                     ORIGINAL, PARAPHRASE]
            for content in asked:
                client.post("/v1/chat/completions", json={"model": "good",
                                                          "messages": [{"role": "user", "content": content}]})
            client.post("/v1/chat/completions", json={"model": "good", "messages": "not a list"})
            wait.until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "#rows tr")) == 7)
            cells = [[td.text for td in row.find_elements(By.TAG_NAME, "td")]
                     for row in browser.find_elements(By.CSS_SELECTOR, "#rows tr")]
            tiers, caches = [row[1] for row in cells], [row[2] for row in cells]
            mix = browser.find_element(By.ID, "mix").text
            l0_rate = browser.find_element(By.ID, "l0rate").text
            l1_rate = browser.find_element(By.ID, "l1rate").text
            errors = browser.find_element(By.ID, "errors").text
            # The hour's latency table refreshes from /v1/daari/report every few seconds.
            WebDriverWait(browser, 30).until(lambda b: "L3" in b.find_element(By.ID, "latency").text)
            shot = Path(os.environ.get("DAARI_UI_SCREENSHOT", str(tmp_path / "ui.png")))
            browser.save_screenshot(str(shot))
    assert tiers == ["-", "L1", "L3", "L3", "L2", "L0", "L3"]  # newest first; the refused request has no tier
    assert caches == ["none", "hit", "miss", "miss", "miss", "hit", "miss"]  # the L1 hit is a cache hit too
    assert "L0" in mix and "L2" in mix and "L3" in mix
    assert l0_rate == "16.7% (1/6)" and errors == "1"  # the refused request never reached the cache
    # L1 looked up all but the L0 hit: no entry (rebase), two misses, a rejection or miss (merge), one hit
    assert l1_rate == "20.0% (1/5)"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_cache_trust_panel(tmp_path: Path, browser: Any) -> None:
    """Shadow samples of L0 and L1 hits and of L3 answers (asked of L4) fill the "Cache trust" panel: the false-hit
    rates with their intervals, a learned bar raised by an L1 false hit, a demoted entry, diversity per task type
    and the tier agreement; the screenshot is docs/ui-trust.png (DAARI_UI_TRUST_SCREENSHOT)."""
    import json

    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.fakes.drifting_upstream import DriftingOpenAI

    root = Path(__file__).resolve().parents[1]
    rows = {r["id"]: r for r in map(json.loads, (root / "evals/cache/verification.jsonl").read_text().splitlines())}
    pairs = [(rows[i]["a"], rows[i]["b"]) for i in ("T-001", "T-006", "T-009", "T-012")]
    fake = DriftingOpenAI(drift_rate=0.25, seed=11)
    for a, b in pairs:
        fake.topics[a] = fake.topics[b] = a
    fake.drifted.add(pairs[0][0])
    with serve_app_in_thread(fake) as upstream:
        tier = upstream_tier("openai", upstream + "/v1")
        config = make_config(tmp_path, tiers={"L3": tier, "L4": tier},
                             trust={"shadow": {"rate": 1.0, "tier_rate": 1.0, "max_per_minute": 1000}})
        with daari_in_thread(config) as server, httpx.Client(base_url=server.url, timeout=60) as client:
            def ask(content: str) -> str:
                response = client.post("/v1/chat/completions", headers={"user-agent": "claude-cli/2.0"},
                                       json={"model": "good", "messages": [{"role": "user", "content": content}]})
                return response.headers["x-daari-tier"]

            wait_for_l1(server)
            for i in range(12):
                ask(f"Write a function that sorts list {i}")  # L3, asked again of L4 (tier eval)
                ask(f"Write a function that sorts list {i}")  # L0 hit, asked again of L3
            for a, b in pairs:
                ask(a)
                ask(b)  # L1 hits; the first pair's answer changed upstream
            drifted_l1 = sum(1 for a, _ in pairs if a in fake.drifted)  # the first pair's, and any drawn
            browser.get(server.url + "/ui")
            wait = WebDriverWait(browser, 60)
            try:
                wait.until(lambda b: "L3 > L4" in b.find_element(By.ID, "tiers").text
                           and "raised" in b.find_element(By.ID, "bars").text
                           and b.find_element(By.ID, "demoted").text == str(drifted_l1)
                           and "/12)" in b.find_element(By.ID, "shadow-L0").text
                           and "/4)" in b.find_element(By.ID, "shadow-L1").text)
            except TimeoutException:
                raise AssertionError(browser.find_element(By.ID, "trust").text) from None
            panel = browser.find_element(By.ID, "trust")
            browser.execute_script("arguments[0].scrollIntoView()", panel)
            texts = {name: browser.find_element(By.ID, name).text
                     for name in ("shadow-L0", "shadow-L1", "demoted", "bars", "diversity", "tiers")}
            shot = Path(os.environ.get("DAARI_UI_TRUST_SCREENSHOT", str(tmp_path / "ui-trust.png")))
            browser.save_screenshot(str(shot))
    drifted_l0 = sum(1 for t in fake.drifted if t.startswith("Write a function"))
    assert f"{drifted_l0}/12)" in texts["shadow-L0"]  # e.g. "25.0% (95% 8.9-53.2%; 3/12)"
    assert f"{drifted_l1}/4)" in texts["shadow-L1"] and texts["demoted"] == str(drifted_l1)
    assert "generate_small" in texts["diversity"] and "L3 > L4" in texts["tiers"]
    # the L1 pairs' first askings were answered by L3 and asked again of L4, where drifted topics changed
    assert f"({4 - drifted_l1}/4)" in texts["tiers"]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
