"""Headless Chromium for the browser tests (the audit page, the review workbench).

Debian's chromium and chromium-driver with selenium; a test skips with the install command when
any of them is missing. Each driver gets its own throwaway profile under the test's tmp folder.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

__all__ = ["headless_chromium"]


def headless_chromium(tmp_path: Path, *, window: str) -> Any:
    """A selenium Chrome driver on headless Debian chromium (the caller quits it)."""
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not browser or not driver:
        pytest.skip("Debian chromium/chromium-driver not installed (apt-get install -y chromium chromium-driver)")
    pytest.importorskip("selenium", reason="selenium is not installed (pip install selenium)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=tmp_path)
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={profile}", f"--window-size={window}"):
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=driver), options=opts)
