"""The documentation site: it builds with --strict (no broken link or anchor), the settings table
is `Settings`, the README's links land, and the benchmark's figures come from its JSON file."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from mkdocs.exceptions import PluginError

from server.settings import Settings

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
LATEST = REPO / "bench" / "results" / "latest.json"
HOOK = DOCS / "hooks" / "bench_figures.py"
SETTINGS_ROW = re.compile(r"^\| (`LOC_[^|]*) \|", re.MULTILINE)
LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as `make lint` builds it (never with --quiet: it hides the warnings that
    --strict counts, and the build passes with broken links)."""
    site_dir = tmp_path_factory.mktemp("site")
    mkdocs = Path(sys.executable).parent / "mkdocs"
    built = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(site_dir)],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    return site_dir


def _bench_figures() -> ModuleType:
    """The mkdocs hook, loaded from its file as mkdocs loads it."""
    spec = importlib.util.spec_from_file_location(HOOK.stem, HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _slug(heading: str) -> str:
    """Python-Markdown's toc slug, for the headings a README link names."""
    text = re.sub(r"[^\w\s-]", "", heading.replace("`", "")).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def test_the_site_builds_strict_with_every_page_in_its_nav(site: Path) -> None:
    pages = {path.stem for path in DOCS.glob("*.md")}
    built = {path.parent.name for path in site.glob("*/index.html")}
    assert built == pages - {"index"}
    assert not (site / "hooks").exists()


def test_every_setting_is_in_the_configuration_table_and_nothing_else() -> None:
    table = SETTINGS_ROW.findall((DOCS / "configuration.md").read_text())
    documented = [name for row in table for name in re.findall(r"`(LOC_\w+)`", row)]
    fields = {f"LOC_{name.upper()}" for name in Settings.model_fields}

    assert len(documented) == len(set(documented)), "a variable in two rows"
    assert fields - set(documented) == set(), "settings missing from docs/configuration.md"
    assert set(documented) - fields == set(), "rows naming no field of server.settings.Settings"


def test_the_readme_links_to_pages_and_headings_that_exist() -> None:
    links = LINK.findall((REPO / "README.md").read_text())
    docs = [link for link in links if link.startswith("docs/")]
    assert {"docs/index.md", "docs/configuration.md", "docs/performance.md"} <= {
        link.partition("#")[0] for link in docs
    }
    for link in docs:
        path, _, anchor = link.partition("#")
        target = REPO / path
        assert target.is_file(), link
        if anchor:
            headings = re.findall(r"^#+ (.+)$", target.read_text(), re.MULTILINE)
            assert anchor in {_slug(heading) for heading in headings}, link


def test_the_performance_figures_are_the_latest_runs(site: Path) -> None:
    results = json.loads(LATEST.read_text())
    performance = (site / "performance" / "index.html").read_text()

    assert f"at commit <code>{results['commit']}</code>" in performance
    assert "Targets (issues 6, 11 and 31)" in performance
    for cell in results["tracing"]["cells"] + results["documents"]["cells"]:
        assert f"{cell['ratio']:.2f}" in performance
    for page in site.glob("*/index.html"):
        assert "<!-- bench:" not in page.read_text(), page


def test_a_pass_the_run_did_not_make_is_said_so_and_one_it_made_is_a_table() -> None:
    hook = _bench_figures()
    results: dict[str, Any] = json.loads(LATEST.read_text())
    without = {key: value for key, value in results.items() if key != "documents"}
    made = without | {
        "documents": {
            "cells": [
                {
                    "workload": "payment",
                    "in_flight": 16,
                    "text_cpu_ms": 0.611,
                    "id_cpu_ms": 0.584,
                    "ratio": 0.93,
                }
            ]
        }
    }

    absent = hook.render_markers("<!-- bench:documents -->", without)
    table = hook.render_markers("<!-- bench:documents -->", made)

    assert absent.startswith("*`bench/results/latest.json` holds no trusted-documents figures")
    assert table.splitlines()[-1] == "| payment | 16 | 0.611 | 0.584 | 0.93 |"


def test_an_unknown_marker_fails_the_build() -> None:
    hook = _bench_figures()
    with pytest.raises(PluginError, match="unknown marker <!-- bench:tabel -->"):
        hook.render_markers("<!-- bench:tabel -->", json.loads(LATEST.read_text()))
