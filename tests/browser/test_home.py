"""Browser: an operator logs in and sees the inventory summary (Playwright on Debian's Chromium)."""

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
ARTIFACTS = Path(os.environ.get("CLUSTERTWIN_ARTIFACTS", "test-artifacts"))

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not shutil.which(CHROMIUM), reason="Debian's chromium is not installed"),
]


@pytest.fixture
def page():
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=[
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"])
        yield browser.new_page()
        browser.close()


@pytest.mark.django_db(transaction=True)
def test_operator_logs_in_and_sees_the_gpu_count(live_server, page, small_plan):
    from twin.config.demo import demo_accounts_seed
    from twin.inventory.adapter import cluster_plan_write

    demo_accounts_seed(password="browser-pass")
    cluster_plan_write(small_plan)
    page.goto(live_server.url + "/")
    assert "/accounts/login/" in page.url
    page.fill("input[name=username]", "operator")
    page.fill("input[name=password]", "browser-pass")
    page.click("button[type=submit]")
    page.wait_for_selector("#gpus")
    assert page.inner_text("#gpus") == "96"
    assert page.locator("a[href='/admin/']").count() == 0
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "home.png"), full_page=True)
