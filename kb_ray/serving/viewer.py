"""The browser viewer's static files (docs/viewer.md), served by the ingress under ``/ui``.

``/ui`` and ``/ui/doc/{id}`` are the one page (``ui/index.html``; the script reads the path and
query for deep links), ``/ui/assets/<name>`` its script and style. The files hold no data and
need no key; every ``/v1`` call the script makes sends the key the user typed. Only the files
named in :data:`ASSETS` are served: a name never becomes a path.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import HTTPException
from fastapi.responses import Response

UI_DIR = Path(__file__).with_name("ui")
ASSETS = {"app.js": "text/javascript; charset=utf-8", "app.css": "text/css; charset=utf-8"}
# Everything from this origin; page images arrive as blob: URLs (fetched with the key).
POLICY = ("default-src 'self'; img-src 'self' blob: data:; style-src 'self'; script-src 'self'; "
          "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")


def _read(name: str) -> bytes:
    return (UI_DIR / name).read_bytes()  # a few KB from the package: read per request, never stale


def viewer_page() -> Response:
    return Response(_read("index.html"), media_type="text/html; charset=utf-8",
                    headers={"Content-Security-Policy": POLICY, "Cache-Control": "no-cache"})


def viewer_asset(name: str) -> Response:
    if name not in ASSETS:
        raise HTTPException(404, f"no viewer file {name}")
    return Response(_read(name), media_type=ASSETS[name], headers={"Cache-Control": "no-cache"})
