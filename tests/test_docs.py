"""The documentation site: it builds with --strict (no broken link or anchor), the settings table
is `Settings`, the transition table is the rules', the README's links land, and the benchmark's
figures in the pages are those of its JSON file."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
from mkdocs.exceptions import PluginError

from bench import figures
from domain.enums import PaymentMethod
from domain.transitions import RULES
from process.settings import Settings
from tests.test_doc_paths import heading_slug

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
    assert set(documented) - fields == set(), "rows naming no field of process.settings.Settings"


def test_the_api_pages_transition_table_is_the_rules() -> None:
    """Each row of docs/api.md's table (a "PENDING, RETRY" row is one per source) says a rule's
    move, methods, presentment and requirements; every rule has its row."""
    page = (DOCS / "api.md").read_text()
    table = page.split("## Status transitions", 1)[1].split("\n\n")[2]
    methods = {"ach": "ach", "pinless": "pinless", "any": "ach pinless"}
    documented = set()
    for line in table.splitlines()[2:]:
        sources, target, _mutation, method, presentment, requires = (
            cell.strip() for cell in line.strip("|").split("|")
        )
        named = frozenset(re.findall(r"\b(confirmationId|applications|returnCode)\b", requires))
        for source in sources.split(", "):
            documented.add((source, target, methods[method], presentment == "yes", named))
    ruled = {
        (
            rule.source.value,
            rule.target.value,
            " ".join(method.value for method in PaymentMethod if method in rule.methods),
            rule.presentment,
            frozenset(requirement.value for requirement in rule.requires),
        )
        for rule in RULES
    }
    assert documented == ruled


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
            assert anchor in {heading_slug(heading) for heading in headings}, link


def test_no_readme_line_is_over_200_characters() -> None:
    """A line a reader must scroll sideways for, on GitHub or in a terminal, is not read: a long
    table cell is a list of wrapped lines instead."""
    lines = (REPO / "README.md").read_text().splitlines()
    long = {number: len(line) for number, line in enumerate(lines, 1) if len(line) > 200}
    assert long == {}, "README.md lines over 200 characters (line: length)"


def test_the_performance_figures_are_the_latest_runs(site: Path) -> None:
    results = json.loads(LATEST.read_text())
    performance = (site / "performance" / "index.html").read_text()

    assert f"at commit <code>{results['commit']}</code>" in performance
    assert "Targets (issues 6, 11 and 31)" in performance
    for cell in results["tracing"]["cells"] + results["documents"]["cells"]:
        assert f"{cell['ratio']:.2f}" in performance


def test_the_pages_hold_the_figures_of_the_latest_run_in_their_markdown() -> None:
    results = figures.latest()
    for page in DOCS.glob("*.md"):
        markdown = page.read_text()
        assert figures.render(markdown, results) == markdown, f"{page}: python -m bench.figures"
    performance = (DOCS / "performance.md").read_text()
    for target in results["targets"]:
        if not target["reference"]:
            verdict = "met" if target["met"] else "NOT met"
            assert re.search(rf"{re.escape(target['name'])}  .*  {verdict}  ", performance)


def test_the_build_refuses_a_page_whose_figures_are_not_the_latest_runs() -> None:
    hook = _bench_figures()
    page = SimpleNamespace(file=SimpleNamespace(src_uri="performance.md"))
    current = figures.render("Run: <!-- bench:run --><!-- /bench:run -->", figures.latest())
    stale = re.sub(r"at commit `[^`]+`", "at commit `0000000`", current)

    assert hook.on_page_markdown(current, page=page) == current
    with pytest.raises(PluginError, match=r"performance.md: its benchmark figures are not those"):
        hook.on_page_markdown(stale, page=page)


def test_an_unknown_marker_fails_the_build() -> None:
    hook = _bench_figures()
    page = SimpleNamespace(file=SimpleNamespace(src_uri="performance.md"))
    with pytest.raises(PluginError, match="unknown marker <!-- bench:tabel -->"):
        hook.on_page_markdown("<!-- bench:tabel --><!-- /bench:tabel -->", page=page)
