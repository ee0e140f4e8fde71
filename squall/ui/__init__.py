"""Squall's web UI and HTTP API: one ASGI app (squall.ui.app) that nimbus and local mode's
``--ui`` serve on the daemons' HTTP stack (squall.httpd: the server, connection limits,
authentication and the Guard).  The pages are static HTML, JavaScript and
CSS (``static/``, served at ``/`` and ``/ui/...``) that read only the REST API
(``/api/v1/...``); uPlot (MIT, in ``static/vendor``) draws the live plots.

This package imports neither nimbus nor local mode: they hand the app a backend
(squall.ui.backend) that answers its calls."""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).resolve().parent / "static"
