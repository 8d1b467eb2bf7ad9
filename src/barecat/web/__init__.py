"""Everything barecat serves over HTTP: ``server/`` (``barecat serve``, the archives'
HTTP API, and its client ``HttpBarecat``), ``viewer/`` (``barecat view``, the image
viewer's page) and ``asgi_serving.py`` (uvicorn on a socket bound first, stalled clients
cut off), which both serve through. Each part is imported when used."""
