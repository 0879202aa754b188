"""GraphiQL, served whole by the service: it works offline and under a strict policy.

Every file the page loads comes from `/graphiql-assets/<digest>/<name>`: GraphiQL, its explorer
plugin, React and ReactDOM from `graphiql/node_modules` (pinned by `graphiql/package-lock.json`,
installed by `make install` like DynamoDB Local), and the page's own script and style from
`server/static`. The digest is the file's, so a file never changes under its address and may be
cached for a year. The page's settings travel as a JSON block, not as a script: the
Content-Security-Policy allows scripts from the service alone, and nothing inline but styles
(GraphiQL's components set `style` attributes).

In `local` the page opens with the README's first query and the development service token in
its Headers tab: press Run and see payments. `prod` serves no GraphiQL and none of these files.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

__all__ = ["ASSETS_PATH", "CONTENT_SECURITY_POLICY", "FILES", "FIRST_QUERY", "GraphiQLPage"]

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ROOT / "graphiql" / "node_modules"
STATIC = Path(__file__).resolve().parent / "static"
ASSETS_PATH = "/graphiql-assets"

# Name served -> file; the page loads them in this order.
FILES = {
    "react.js": PACKAGES / "react/umd/react.production.min.js",
    "react-dom.js": PACKAGES / "react-dom/umd/react-dom.production.min.js",
    "graphiql.css": PACKAGES / "graphiql/graphiql.min.css",
    "explorer.css": PACKAGES / "@graphiql/plugin-explorer/dist/style.css",
    "page.css": STATIC / "graphiql-page.css",
    "graphiql.js": PACKAGES / "graphiql/graphiql.min.js",
    "explorer.js": PACKAGES / "@graphiql/plugin-explorer/dist/index.umd.js",
    "page.js": STATIC / "graphiql-page.js",
}
MEDIA_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}

# The README's first query (`tests/api/test_readme.py` keeps the two the same).
FIRST_QUERY = """query LoanPayments($userId: ID!, $loanId: ID!) {
  loan(userId: $userId, loanId: $loanId) {
    payments(first: 3) {
      edges { node { paymentId status amountCents method attempts confirmationId } }
      pageInfo { hasNextPage endCursor }
    }
  }
}
"""
FIRST_VARIABLES = {"userId": "user-1", "loanId": "loan-1"}

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        # Queries over HTTP, subscriptions over WebSocket, both to this origin.
        "connect-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
CACHE_FOREVER = "public, max-age=31536000, immutable"


@dataclass(frozen=True, slots=True)
class Asset:
    content: bytes
    digest: str
    media_type: str


class GraphiQLPage:
    """The page and its files; `headers` gives the Headers tab's text for a new page (None:
    empty)."""

    def __init__(self, *, endpoint: str, headers: Callable[[], str | None]) -> None:
        self._endpoint = endpoint
        self._headers = headers
        self._assets: dict[str, Asset] | None = None

    def assets(self) -> dict[str, Asset] | None:
        """The files, read once; None while they are not installed."""
        if self._assets is None:
            if not all(path.is_file() for path in FILES.values()):
                return None
            self._assets = {name: _asset(path) for name, path in FILES.items()}
        return self._assets

    def page(self) -> Response:
        assets = self.assets()
        if assets is None:
            return HTMLResponse(
                "<!doctype html><title>GraphiQL</title><p>GraphiQL's files are not installed "
                "here: run <code>make install</code> (or <code>make run</code>).</p>",
                status_code=503,
                headers=SECURITY_HEADERS,
            )
        settings = {
            "endpoint": self._endpoint,
            "query": FIRST_QUERY,
            "variables": json.dumps(FIRST_VARIABLES, indent=2),
            "headers": self._headers(),
        }
        # `<` escaped: nothing in the block can close it.
        block = json.dumps(settings).replace("<", "\\u003c")
        styles = "".join(
            f'<link rel="stylesheet" href="{_address(name, asset)}">'
            for name, asset in assets.items()
            if name.endswith(".css")
        )
        scripts = "".join(
            f'<script src="{_address(name, asset)}"></script>'
            for name, asset in assets.items()
            if name.endswith(".js")
        )
        html = (
            '<!doctype html><html lang="en"><head><meta charset="utf-8">'
            "<title>loc-payments GraphiQL</title>"
            '<link rel="icon" href="data:,">'
            f"{styles}</head><body>"
            '<div id="graphiql">Loading…</div>'
            f'<script type="application/json" id="graphiql-settings">{block}</script>'
            f"{scripts}</body></html>"
        )
        return HTMLResponse(html, headers=SECURITY_HEADERS)

    async def asset(self, request: Request) -> Response:
        """One file, by its name and digest: anything else is not found."""
        assets = self.assets() or {}
        found = assets.get(request.path_params["name"])
        if found is None or found.digest != request.path_params["digest"]:
            return Response("not found", status_code=404, media_type="text/plain")
        return Response(
            found.content,
            media_type=found.media_type,
            headers={"Cache-Control": CACHE_FOREVER, "X-Content-Type-Options": "nosniff"},
        )


def _asset(path: Path) -> Asset:
    content = path.read_bytes()
    return Asset(content, hashlib.sha256(content).hexdigest()[:16], MEDIA_TYPES[path.suffix])


def _address(name: str, asset: Asset) -> str:
    return f"{ASSETS_PATH}/{asset.digest}/{name}"
