"""P0, the HTTP floor: the bytes another peer answered, looked up by the request body.

The answers are read from their file at the first request, so this server can start before
they exist.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route


def create_app(responses_file: Path) -> Starlette:
    responses: dict[bytes, bytes] = {}

    async def graphql(request: Request) -> Response:
        if not responses:
            pairs = json.loads(await asyncio.to_thread(responses_file.read_text))
            responses.update({query.encode(): answer.encode() for query, answer in pairs})
        return Response(responses[await request.body()], media_type="application/json")

    return Starlette(routes=[Route("/graphql", graphql, methods=["POST"])])
