"""Every answer the tests receive from a worker, checked against the worker's OpenAPI document."""

from __future__ import annotations

import functools
import re
from urllib.parse import urlsplit

from jsonschema import Draft202012Validator

from streams.web.openapi import document


@functools.lru_cache(maxsize=1)
def _templates() -> list[tuple[re.Pattern, str]]:
    """Spec paths as regexes, literal paths first (``/network/nodes`` before ``/network/nodes/{node}``)."""
    out = [(re.compile("^" + re.sub(r"\{[^/]+\}", "[^/]+", t) + "$"), t) for t in document()["paths"]]
    return sorted(out, key=lambda x: x[1].count("{"))


def template_of(path: str) -> str | None:
    bare = urlsplit(path).path
    return next((t for rx, t in _templates() if rx.match(bare)), None)


def check_answer(method: str, path: str, status: int, body) -> None:
    """Raise AssertionError unless the document describes this answer and the body validates."""
    doc = document()
    template = template_of(path)
    assert template is not None, f"{method} {path}: no such path in /openapi.json"
    op = doc["paths"][template].get(method.lower())
    assert op is not None, f"{method} {path}: method not in /openapi.json"
    answer = op["responses"].get(str(status))
    assert answer is not None, f"{method} {path}: status {status} not in /openapi.json ({body})"
    schema = answer.get("content", {}).get("application/json", {}).get("schema")
    if schema is None:
        return
    errors = sorted(Draft202012Validator({**schema, "components": doc["components"]}).iter_errors(body),
                    key=lambda e: list(e.path))
    assert not errors, f"{method} {path} {status}: " + "; ".join(
        f"{'/'.join(map(str, e.path)) or 'body'}: {e.message[:200]}" for e in errors[:5])
