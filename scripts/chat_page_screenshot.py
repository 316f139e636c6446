"""Regenerate docs/images/chat-page.png: the chat page answering the README's question on the
embedded model, its task tree open. Needs Debian's chromium and the model's cores to itself:

    flock /tmp/toolwire-model.lock .venv/bin/python scripts/chat_page_screenshot.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from playwright.sync_api import expect, sync_playwright

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the browser tests' launcher

from server_support.browser import launch_chromium  # noqa: E402

TARGET = ROOT / "docs" / "images" / "chat-page.png"
QUESTION = "Can I take ibuprofen together with warfarin?"


def serve(workdir: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    """``toolwire serve`` on a free port with the bundled plugins and the embedded model."""
    log = workdir / "serve.log"
    env = {key: value for key, value in os.environ.items() if not key.startswith("TOOLWIRE_LLM")}
    env.pop("OPENAI_API_KEY", None)
    env.update(TOOLWIRE_PLUGINS="pharma,pydocs", TOOLWIRE_API_TOKEN="screenshot-token-0123456789")
    (workdir / "toolwire.yaml").write_text("default_domain: pharma\nsessions: {store: memory}\n")
    command = [str(Path(sys.executable).with_name("toolwire")), "serve", "--port", "0"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, cwd=workdir, env=env, stdout=out, stderr=out)
    for _ in range(600):
        match = re.search(r'"url": "(http://[^"]+)"', log.read_text(errors="replace"))
        if match:
            url = match.group(1)
            try:
                if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                    return process, url, log
            except httpx.HTTPError:
                pass
        time.sleep(0.2)
    process.terminate()
    raise RuntimeError(f"toolwire serve did not start:\n{log.read_text()}")


def main() -> None:
    with tempfile.TemporaryDirectory() as directory:
        process, url, _ = serve(Path(directory))
        try:
            with sync_playwright() as playwright:
                browser = launch_chromium(playwright)
                page = browser.new_page(viewport={"width": 1200, "height": 1000})
                page.goto(url)
                page.fill("#token", "screenshot-token-0123456789")
                page.click("#token-form button")
                page.select_option("#domain", "pharma")
                page.fill("#message", QUESTION)
                page.click("#send")
                turn = page.locator(".turn").last
                expect(turn.locator(".tree")).to_be_visible(timeout=600_000)
                if turn.locator("form.reply").count():  # a clarifying question: answer it
                    turn.locator("form.reply input").fill("the tablets, 400 mg")
                    turn.locator("form.reply button").click()
                    turn = page.locator(".turn").last
                    expect(turn.locator(".tree")).to_be_visible(timeout=600_000)
                turn.locator(".tree > summary").click()
                for summary in turn.locator(".tree details > summary").all():
                    summary.evaluate("node => node.parentElement.open = true")
                TARGET.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(TARGET), full_page=True)
                answer = turn.locator(".text").inner_text()
                browser.close()
        finally:
            process.terminate()
            process.wait(timeout=30)
    print(json.dumps({"screenshot": str(TARGET.relative_to(ROOT)), "answer": answer[:200]}))


if __name__ == "__main__":
    main()
