"""A list's page is rendered once per version of what it was built from, and never served for another
version or another page (streams/web/base.py Resource.paged)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from faust.web.drivers.aiohttp import Web

from streams.web.base import Resource


class _Nodes(Resource):
    pass


def _view(renders: list):
    view = _Nodes.__new__(_Nodes)  # no app: only the answering is under test
    view.web = Web.__new__(Web)  # faust's aiohttp driver builds the responses, as in a worker
    view.ctx = SimpleNamespace(settings=SimpleNamespace(page_limit_max=1000), memo={})

    def render(item):
        renders.append(item)
        return {"n": item}

    return view, render


def _get(view, render, items, version, query):
    resp = view.paged(SimpleNamespace(query=query), items, render, version=version)
    return resp.status, resp.content_type, json.loads(resp.text)


def test_a_page_is_rendered_once_per_version():
    renders = []
    view, render = _view(renders)
    first = _get(view, render, [1, 2, 3], ("v", 1), {"limit": "2"})
    assert first == (200, "application/json", {"items": [{"n": 1}, {"n": 2}], "total": 3, "offset": 0, "limit": 2})
    assert _get(view, render, [1, 2, 3], ("v", 1), {"limit": "2"}) == first
    assert renders == [1, 2]  # the second answer was the first one sent again
    # another page of the same version is its own
    assert _get(view, render, [1, 2, 3], ("v", 1), {"offset": "2", "limit": "2"})[2]["items"] == [{"n": 3}]
    # a new version: built again, never the old answer
    assert _get(view, render, [7, 8, 9], ("v", 2), {"limit": "2"})[2]["items"] == [{"n": 7}, {"n": 8}]
    assert renders == [1, 2, 3, 7, 8]


def test_without_a_version_every_answer_is_rendered():
    renders = []
    view, render = _view(renders)
    _get(view, render, [1], None, {})
    _get(view, render, [1], None, {})
    assert renders == [1, 1]
    assert _get(view, render, [1], None, {"limit": "0"})[0] == 400  # bad paging is still refused
