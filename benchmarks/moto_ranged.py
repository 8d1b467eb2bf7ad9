"""moto's S3 server reading only the asked bytes of a ranged GET, as S3 does.

moto answers ``GET`` with ``Range: bytes=a-b`` by reading the whole object and slicing
it: 150 ms for a 100-byte range of a 200 MB object on this machine, 1.3 s at 1.7 GB (the
index of 10 million files), which would drown the 20 ms a benchmark adds to each request.
This launcher patches that one step, then runs moto's own server: while moto answers a
``GET`` carrying one byte range, an object's value is a stand-in whose length is the
object's size and whose slice reads only those bytes from moto's buffer (under the key's
lock). Everything else (headers, ETags, ``If-Match``, 206/416 statuses, the slicing rule
itself) is moto's own code. A response that ends up unsliced gets the whole value.

    python benchmarks/moto_ranged.py -H 127.0.0.1 -p PORT    (moto_server's arguments)
"""

from __future__ import annotations

import re
import sys
import threading
from typing import Any

_RANGE = re.compile(r"bytes=\d*-\d*")
_ranged = threading.local()


class RangedValue:
    """An object's bytes as moto's range step uses them: ``len`` and one slice, read on
    demand from the key's buffer."""

    def __init__(self, key: Any) -> None:
        self.key = key

    def __len__(self) -> int:
        return int(self.key.contentsize)

    def __getitem__(self, part: slice) -> bytes:
        start, stop, _ = part.indices(len(self))
        with self.key.lock:
            self.key._value_buffer.seek(start)
            return bytes(self.key._value_buffer.read(max(0, stop - start)))

    def whole(self) -> bytes:
        return self[0 : len(self)]


def install() -> None:
    """Patch moto's S3 key value and key response (see the module doc)."""
    from moto.s3.models import FakeKey
    from moto.s3.responses import S3Response

    plain_value: Any = FakeKey.value

    def value(self: Any) -> Any:
        if getattr(_ranged, "active", False):
            return RangedValue(self)
        return plain_value.fget(self)

    FakeKey.value = property(value, plain_value.fset)  # type: ignore[assignment, method-assign]
    plain_response = S3Response.key_response

    def key_response(self: Any, request: Any, full_url: str, headers: Any) -> Any:
        wanted = request.headers.get("range") or ""
        _ranged.active = request.method == "GET" and bool(_RANGE.fullmatch(wanted))
        try:
            response = plain_response(self, request, full_url, headers)
        finally:
            _ranged.active = False
        if isinstance(response, tuple) and isinstance(response[-1], RangedValue):
            response = (*response[:-1], response[-1].whole())
        return response

    S3Response.key_response = key_response  # type: ignore[method-assign]


def main(argv: list[str]) -> None:
    install()
    from moto.server import main as moto_main

    moto_main(argv)


if __name__ == "__main__":
    main(sys.argv[1:])
