"""``barecat serve``: archives over HTTP (Starlette on uvicorn), and ``HttpBarecat``,
their client (httpx; ``RemoteBarecat`` is its old name). The ``server`` extra."""
