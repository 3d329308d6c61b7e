"""Headless Chromium for the browser tests (the dashboard, the documentation site).

Tests that need it skip, saying how to install it, where Chromium or its driver is
missing; ``.ci/run`` installs both.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest


def chromium_paths() -> tuple[str, str]:
    """The Chromium binary and chromedriver, or a skip saying how to install them."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not browser or not driver:
        pytest.skip(
            "Chromium and its driver are not installed "
            "(apt-get install chromium chromium-driver; .ci/run does it)"
        )
    return browser, driver


def headless_chromium(
    profile_dir: Path, *, window: str = "1600,1000", console_log: bool = False
) -> Any:
    """A selenium session of headless Chromium with its profile in ``profile_dir``;
    with ``console_log``, the page's console messages are kept (``get_log('browser')``)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = chromium_paths()
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--window-size={window}",
        f"--user-data-dir={profile_dir}",
    ):
        options.add_argument(flag)
    if console_log:
        options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)
