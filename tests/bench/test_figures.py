"""`bench.figures`: a run's figures written into the Markdown between their markers, a table on
lines of its own, a sentence in its paragraph; a pass the run did not make said so; written again,
the same page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import figures
from bench.errors import MarkerError

DOCUMENTS = {
    "cells": [
        {"workload": "payment", "in_flight": 16, "text_cpu_ms": 0.611, "id_cpu_ms": 0.584,
         "ratio": 0.93},
    ]
}  # fmt: skip


@pytest.fixture(scope="module")
def results() -> dict[str, Any]:
    return figures.latest()


def test_a_table_goes_on_lines_of_its_own_between_its_markers(results: dict[str, Any]) -> None:
    page = "Medians:\n\n<!-- bench:documents --><!-- /bench:documents -->\n\nAfter.\n"

    rendered = figures.render(page, results | {"documents": DOCUMENTS})

    assert rendered == (
        "Medians:\n\n<!-- bench:documents -->\n\n"
        "| workload | in flight | by text, CPU ms / request | by id | id / text |\n"
        "| --- | --- | --- | --- | --- |\n"
        "| payment | 16 | 0.611 | 0.584 | 0.93 |\n\n"
        "<!-- /bench:documents -->\n\nAfter.\n"
    )


def test_a_sentence_within_a_line_stays_in_its_paragraph(results: dict[str, Any]) -> None:
    page = "- **Measured**: <!-- bench:live -->old figures<!-- /bench:live --> Each message…\n"

    rendered = figures.render(page, results)

    assert rendered.startswith("- **Measured**: <!-- bench:live -->")
    assert rendered.endswith("<!-- /bench:live --> Each message…\n")
    assert "old figures" not in rendered
    assert f"(commit `{results['commit']}`)." in rendered
    assert rendered.count("\n") == 1


def test_rendering_a_rendered_page_changes_nothing(results: dict[str, Any]) -> None:
    page = "Run: <!-- bench:run --><!-- /bench:run -->\n\n<!-- bench:table --><!-- /bench:table -->"

    once = figures.render(page, results)

    assert figures.render(once, results) == once


def test_the_run_says_which_targets_it_missed(results: dict[str, Any]) -> None:
    targets = [
        {"name": "P3 / P1 req/s", "reference": False, "met": True},
        {"name": "  for reference", "reference": True, "met": False},
        {"name": "Node peer / service CPU", "reference": False, "met": False},
    ]

    run = figures.render("<!-- bench:run --><!-- /bench:run -->", results | {"targets": targets})

    assert "1 of its 2 targets met, 1 NOT met: Node peer / service CPU." in run


def test_a_pass_the_run_did_not_make_is_said_so(results: dict[str, Any]) -> None:
    without = {key: value for key, value in results.items() if key != "documents"}

    rendered = figures.render("<!-- bench:documents --><!-- /bench:documents -->", without)

    assert "*`bench/results/latest.json` holds no trusted-documents figures" in rendered


@pytest.mark.parametrize(
    ("page", "refusal"),
    [
        ("<!-- bench:tabel --><!-- /bench:tabel -->", "unknown marker <!-- bench:tabel -->"),
        ("<!-- bench:table -->", "<!-- bench:table --> has no pair"),
        ("<!-- bench:run --><!-- /bench:table -->", "<!-- bench:run --> has no pair"),
        ("Runs: <!-- bench:table --><!-- /bench:table -->", "renders a block"),
    ],
)
def test_a_marker_it_cannot_fill_is_refused(
    results: dict[str, Any], page: str, refusal: str
) -> None:
    with pytest.raises(MarkerError, match=refusal):
        figures.render(page, results)


def test_write_pages_rewrites_only_the_pages_whose_figures_changed(
    results: dict[str, Any], tmp_path: Path
) -> None:
    current = figures.render("<!-- bench:run --><!-- /bench:run -->\n", results)
    (tmp_path / "current.md").write_text(current)
    (tmp_path / "stale.md").write_text("<!-- bench:run -->an old run<!-- /bench:run -->\n")
    (tmp_path / "plain.md").write_text("No figures.\n")

    changed = figures.write_pages(results, docs=tmp_path)

    assert changed == [tmp_path / "stale.md"]
    assert (tmp_path / "stale.md").read_text() == current
    assert (tmp_path / "plain.md").read_text() == "No figures.\n"
