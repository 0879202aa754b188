"""The browser fixtures themselves: the pinned Chromium runs a page's script, takes a screenshot
and reports the page's errors."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, expect

from tests.browser.conftest import pinned_chromium_version

PAGES = {
    "/": b"""<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Button</title><link rel="icon" href="data:,"></head>
<body>
  <p id="status">waiting</p>
  <button type="button" onclick="document.getElementById('status').textContent = 'pressed'">
    Press me
  </button>
</body>
</html>
""",
    "/broken": b"""<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Broken</title><link rel="icon" href="data:,"></head>
<body><script>console.error("logged"); undefinedFunction();</script></body>
</html>
""",
}


class PageHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = PAGES.get(self.path)
        if body is None:
            self.send_error(HTTPStatus.NOT_FOUND)
            return
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """No request log in the test output."""


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), PageHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_the_browser_is_the_pinned_chromium(browser: Browser) -> None:
    major = pinned_chromium_version().split(".")[0]
    assert browser.version.startswith(f"{major}."), browser.version


async def test_a_click_runs_the_pages_script(
    page: Page, console_errors: list[str], site: str, tmp_path: Path
) -> None:
    response = await page.goto(f"{site}/")
    assert response is not None
    assert response.ok

    await page.get_by_role("button", name="Press me").click()

    await expect(page.locator("#status")).to_have_text("pressed")
    screenshot = tmp_path / "page.png"
    await page.screenshot(path=screenshot)
    assert screenshot.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    assert console_errors == []


async def test_console_errors_has_what_the_page_logged_and_threw(
    page: Page, console_errors: list[str], site: str
) -> None:
    async with page.expect_event("pageerror"):
        await page.goto(f"{site}/broken")

    assert len(console_errors) == 2, console_errors
    assert console_errors[0].startswith("console error: logged ")
    assert console_errors[1].startswith("uncaught ReferenceError: undefinedFunction")
