"""GET /ui: the operator's dashboard, a static page (streams/web/ui/) that reads the JSON API.

Plain DOM and SVG drawn by the page's own script, no charting library and nothing loaded from
elsewhere (clusters are often offline; nothing to vendor or build). The files carry no data, so
they need no token; the page sends the token given as ``/ui#token=...`` with its API calls.
"""

from __future__ import annotations

import functools
from importlib import resources

from faust.web import Request, Response

from schemas.api import ErrorBody
from streams.web.base import Resource

TYPES = {"index.html": "text/html", "app.js": "text/javascript", "style.css": "text/css"}
PATHS = frozenset({"/ui", *(f"/ui/{name}" for name in TYPES if name != "index.html")})  # open: no data in them
# the page's own files only: no inline script, no other origin
POLICY = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'"


ASSETS = tuple(n for n in TYPES if n != "index.html")  # what /ui/{name} serves (the page is /ui)


@functools.lru_cache(maxsize=len(TYPES))
def asset(name: str) -> bytes:
    return resources.files("streams.web").joinpath("ui", name).read_bytes()


def answer(view: Resource, name: str) -> Response:
    return view.bytes(asset(name), content_type=TYPES[name],
                      headers={"Content-Security-Policy": POLICY, "X-Content-Type-Options": "nosniff",
                               "Cache-Control": "no-cache"})


class Page(Resource):
    async def get(self, request: Request) -> Response:
        return answer(self, "index.html")


class Asset(Resource):
    async def get(self, request: Request, name: str) -> Response:
        if name not in ASSETS:
            return self.answer(ErrorBody(error="not found", detail=f"the dashboard's files are {', '.join(ASSETS)}"),
                               404)
        return answer(self, name)
