"""A small client for the worker's HTTP API (used by `cnsched submit`, `cnsched query`, the demo
and the tests): (status, JSON body); connection problems raise OSError."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request


def base_url(host: str, port: int) -> str:
    host = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    return f"http://{host}:{port}"


def call(base: str, method: str, path: str, body: dict | None = None, timeout: float = 30.0,
         token: str | None = None) -> tuple[int, dict]:
    """``token``: a bearer token for the API (default: $CNSCHED_API_TOKEN, when set)."""
    data = None if body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    token = token or os.environ.get("CNSCHED_API_TOKEN")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(base.rstrip("/") + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw)
        except ValueError:
            return e.code, {"raw": raw.decode(errors="replace")}
