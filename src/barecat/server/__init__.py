"""``barecat serve``: archives over HTTP (Starlette on uvicorn), and ``RemoteBarecat``,
their client (httpx). The ``server`` extra."""
