"""Debian's chromium for the chat page's browser tests and its screenshot script.

Playwright's own browser download does not work here; Playwright drives ``/usr/bin/chromium``
(.ci/run installs the Debian package) with flags that keep it off the network and out of a
sandbox it cannot have as root."""

from __future__ import annotations

import shutil

from playwright.sync_api import Browser, Playwright

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def launch_chromium(playwright: Playwright) -> Browser:
    """Debian's chromium, headless; an error naming the package when it is missing."""
    if shutil.which(CHROMIUM) is None:
        raise RuntimeError(f"{CHROMIUM} is missing: install Debian's chromium (.ci/run does)")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
