"""The HTTP stack every daemon serves on -- nimbus's and local mode's web app (squall.ui),
the DRPC server, the supervisors' logviewers: uvicorn in a thread of its own with TLS
(server), the connection limits (connections), who may (auth, and loopback for local mode's
browser), at most so many requests at once (budget), the Guard in front of the routes
(guard), and the answers every route writes (answers).

It knows no daemon: what a request asks is the routes' business.  Its one notion of a page
is where the UI's static files are (``/``, ``/ui/...``), which the Guard lets through
unauthenticated on every server."""
