"""GET /ui in a real browser (Debian's headless Chromium through selenium): rows appear for requests made
while the page is open, the tier mix and the hour's latency table fill in, and a screenshot is taken."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fakes.openai_upstream import FakeOpenAI
from tests.fakes.serving import serve_app_in_thread
from tests.support import daari_in_thread, make_config, upstream_tier

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
DRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

# .ci/run installs Debian's chromium and chromium-driver; without them this module cannot run a browser.
pytestmark = pytest.mark.skipif(not (os.path.exists(CHROMIUM) and os.path.exists(DRIVER)),
                                reason="Debian's chromium and chromium-driver are not installed "
                                       "(apt-get install chromium chromium-driver; .ci/run does)")


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
            browser.get(server.url + "/ui")
            wait = WebDriverWait(browser, 30)
            wait.until(lambda b: b.find_element(By.ID, "status").text == "live")
            asked = ["what is a rebase?", "what is a rebase?", "Format as JSON: {a: 1}", "what is a merge?"]
            for content in asked:
                client.post("/v1/chat/completions", json={"model": "good",
                                                          "messages": [{"role": "user", "content": content}]})
            client.post("/v1/chat/completions", json={"model": "good", "messages": "not a list"})
            wait.until(lambda b: len(b.find_elements(By.CSS_SELECTOR, "#rows tr")) == 5)
            tiers = [row.find_elements(By.TAG_NAME, "td")[1].text
                     for row in browser.find_elements(By.CSS_SELECTOR, "#rows tr")]
            mix = browser.find_element(By.ID, "mix").text
            l0_rate = browser.find_element(By.ID, "l0rate").text
            errors = browser.find_element(By.ID, "errors").text
            # The hour's latency table refreshes from /v1/daari/report every few seconds.
            WebDriverWait(browser, 30).until(lambda b: "L3" in b.find_element(By.ID, "latency").text)
            shot = Path(os.environ.get("DAARI_UI_SCREENSHOT", str(tmp_path / "ui.png")))
            browser.save_screenshot(str(shot))
    assert tiers == ["-", "L3", "L2", "L0", "L3"]  # newest first; the refused request has no tier
    assert "L0" in mix and "L2" in mix and "L3" in mix
    assert l0_rate == "25.0% (1/4)" and errors == "1"  # the refused request never reached the cache
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
