"""The docs build refuses a page whose benchmark figures are not those of
`bench/results/latest.json`.

The figures are in the Markdown itself, between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->`,
written by `make bench` and by `python -m bench.figures` (`bench/figures.py`, which renders them);
this hook only checks that the page holds what the file renders now, so that a figure edited by
hand, or a run committed without its pages, fails `mkdocs build --strict`.
"""

from __future__ import annotations

from mkdocs.exceptions import PluginError
from mkdocs.structure.pages import Page

from bench import figures
from bench.errors import MarkerError


def on_page_markdown(markdown: str, *, page: Page, **_: object) -> str:
    if figures.MARKER.search(markdown) is None:
        return markdown
    try:
        rendered = figures.render(markdown, figures.latest())
    except MarkerError as error:
        raise PluginError(f"{page.file.src_uri}: {error}") from error
    if rendered != markdown:
        raise PluginError(
            f"{page.file.src_uri}: its benchmark figures are not those of "
            "bench/results/latest.json; `python -m bench.figures` writes them into the page"
        )
    return markdown
