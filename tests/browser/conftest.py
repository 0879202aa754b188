"""A real headless Chromium for the browser tests, driven by Playwright for Python.

The browser is the npm package `@sparticuz/chromium`, pinned in `tools/browser/package-lock.json`
and installed by `make install` (which `make test` runs). It carries Chromium brotli-compressed; its
`executablePath()` decompresses it into the OS temp dir (about 2 s, once per version and machine)
and returns the path. Playwright's own browser download is never used: its bundled driver only
launches that binary.

- `chromium_executable` (session): the path of the decompressed Chromium.
- `browser` (session): one Chromium for the whole session.
- `page` (per test): a page in a fresh browser context, closed after the test.
- `console_errors` (per test): what the page logged as an error, and its uncaught exceptions.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, ConsoleMessage, Error, Page, async_playwright

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "tools" / "browser"
PACKAGE = "@sparticuz/chromium"
RESOLVE = (
    f"const {{ default: chromium }} = await import('{PACKAGE}');"
    "process.stdout.write(await chromium.executablePath());"
)

# Chromium as root in a container without user namespaces (so without its sandbox), without a GPU,
# and with no network but localhost: nothing in the background that would try to reach Google.
CHROMIUM_ARGS = (
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def pinned_chromium_version() -> str:
    """The version of `@sparticuz/chromium` in `tools/browser/package.json`, e.g. "153.0.0" (whose
    Chromium is 153.0.x.y)."""
    manifest = json.loads((PACKAGE_DIR / "package.json").read_text())
    return str(manifest["dependencies"][PACKAGE])


@pytest.fixture(scope="session")
def chromium_executable() -> str:
    version = pinned_chromium_version()
    installed = PACKAGE_DIR / "node_modules" / PACKAGE / "package.json"
    if not installed.is_file() or json.loads(installed.read_text())["version"] != version:
        pytest.fail(
            f"{PACKAGE} {version} is not in {PACKAGE_DIR}: run `make install`", pytrace=False
        )
    node = shutil.which("node")
    if node is None:
        pytest.fail("the browser tests need node on PATH (it comes with npm)", pytrace=False)
    # The package reuses any `chromium` already in the temp dir, whatever its version: each version
    # gets a directory of its own, and one left half-written (by a killed run) is started afresh.
    # The lock keeps two test runs on one machine from decompressing into it at the same time.
    directory = Path(tempfile.gettempdir()) / f"loc-payments-chromium-{version}"
    complete = directory / ".complete"
    with Path(f"{directory}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not complete.exists():
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir()
        resolved = subprocess.run(
            [node, "--input-type=module", "--eval", RESOLVE],
            cwd=PACKAGE_DIR,
            env={**os.environ, "TMPDIR": str(directory)},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if resolved.returncode != 0:
            pytest.fail(f"{PACKAGE}.executablePath() failed:\n{resolved.stderr}", pytrace=False)
        executable = resolved.stdout.strip()
        if not os.access(executable, os.X_OK):
            pytest.fail(
                f"{PACKAGE}.executablePath() gave {executable!r}: no executable", pytrace=False
            )
        complete.touch()
    return executable


@pytest.fixture(scope="session")
async def browser(chromium_executable: str) -> AsyncIterator[Browser]:
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(
            executable_path=chromium_executable, headless=True, args=list(CHROMIUM_ARGS)
        )
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    context = await browser.new_context()
    try:
        yield await context.new_page()
    finally:
        await context.close()


@pytest.fixture
async def console_errors(page: Page) -> list[str]:
    """Filled as the test goes: console errors (a failed request or a CSP violation logs one too)
    and uncaught exceptions. Assert it is empty at the end of the test.

    Async, so that Playwright's subscriptions are made on the running loop: a sync fixture found
    none where an earlier test in the worker had left the main thread without a current one."""
    errors: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            errors.append(f"console error: {message.text} ({message.location})")

    def on_page_error(error: Error) -> None:
        errors.append(f"uncaught {error.name}: {error.message}")

    page.on("console", on_console)
    page.on("pageerror", on_page_error)
    return errors
