"""``HttpBarecat``: an archive served by ``barecat serve``, read (and written) over HTTP
with the read API of :class:`~barecat.Barecat`.

A :class:`~barecat.archive.ReadableArchive`: ``lookup``, ``listdir_infos``, ``read``,
``read_many`` and ``iter_fileinfos`` are one request each, and the derived methods
(``exists``, ``walk``, ...) are the protocol's, over them; records are the local ones
(``BarecatFileInfo`` and ``BarecatDirInfo``, without storage addresses).
``client[path]`` is checked against the CRC32C the server sends; ``client.open(path)`` is a
seekable stream of ranged requests; ``get_many`` is one request. One pooled connection
(httpx) serves all calls; transient failures (a refused or reset connection, 502, 503,
504) are retried with exponential backoff. Bytes damaged on the server raise
:class:`BarecatIntegrityError`, as a local read does. URLs: ``http://HOST:PORT/a/NAME``,
``http://HOST:PORT`` (the server's one archive), and barecat 0.3.1's
``barecat://HOST[:PORT]/NAME[::PATH]`` (port 50003 by default; PATH roots the client at
that directory). Imports ``archive.readable``, ``entries``, ``exceptions``, ``paths`` and
the sync's URL parsing.
"""

from __future__ import annotations

import io
import json
import struct
import time
from collections.abc import Iterable, Iterator, MutableMapping
from glob import escape as glob_escape
from typing import Any
from urllib.parse import quote, urlsplit

from barecat.exceptions import MissingDependencyBarecatError

with MissingDependencyBarecatError.when_missing("HttpBarecat needs httpx", "server"):
    import httpx

from barecat.archive.readable import ReadableArchive
from barecat.checksum import crc32c
from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo, Order
from barecat.exceptions import (
    BarecatError,
    BarecatIntegrityError,
    FileNotFoundBarecatError,
    InvalidPathBarecatError,
    NotADirectoryLookupBarecatError,
    NotEnoughSpaceBarecatError,
    ReadOnlyBarecatError,
)
from barecat.paths import normalize
from barecat.streams import SeekableReader
from barecat.transfer.sync.locations import SERVER_SCHEME, parse_location, server_address

RETRIES = 4
BACKOFF = 0.1
"""Seconds before the first retry; doubled for each next one."""
_TRANSIENT = {502, 503, 504}
_LENGTH = struct.Struct("<Q")
_ORDER_NAMES = {Order.PATH: "path", Order.ADDRESS: "address"}


class HttpBarecat(MutableMapping[str, bytes], ReadableArchive):
    """The archive at ``url``, as a mapping and a :class:`ReadableArchive`.

    Args:
        url: ``http://HOST:PORT/a/NAME``; ``http://HOST:PORT`` for a server of one
            archive; or ``barecat://HOST[:PORT]/NAME[::PATH]``, where PATH (a directory)
            becomes the root every path is taken from.
        token: the server's, when it has one.
        timeout: seconds per request.

    Raises:
        BarecatError: a server URL without an archive, when the server serves several
            archives (the message lists their URLs) or none.
        ValueError: a ``barecat://`` URL without an archive name.
    """

    def __init__(self, url: str, token: str | None = None, timeout: float = 60.0) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            headers=headers,
            timeout=timeout,
            transport=httpx.HTTPTransport(retries=RETRIES),  # connection attempts
            limits=httpx.Limits(max_keepalive_connections=8),
        )
        base, self.root = archive_url(url)
        try:
            self.url = base if base is not None else self._only_archive(url.rstrip("/"))
        except BaseException:
            self._http.close()
            raise

    def _only_archive(self, server: str) -> str:
        """The URL of the one archive ``server`` serves."""
        names = sorted(_checked(self._http.get(f"{server}/archives"), "/archives").json())
        urls = [f"{server}/a/{quote(name, safe='')}" for name in names]
        if len(urls) == 1:
            return urls[0]
        if not urls:
            raise BarecatError(f"the server at {server} serves no archives")
        raise BarecatError(
            f"the server at {server} serves {len(urls)} archives; connect to one of them: "
            + ", ".join(urls)
        )

    @property
    def path(self) -> str:
        """The served archive's URL (``root`` says which of its directories this client
        sees)."""
        return self.url

    def _full(self, path: str) -> str:
        """``path`` normalized and taken below the client's root."""
        path = normalize(path)
        return f"{self.root}/{path}" if self.root and path else self.root or path

    # -- plumbing -------------------------------------------------------------------------------

    def _request(
        self, method: str, route: str, path: str | None = None, **kwargs: Any
    ) -> httpx.Response:
        """``route`` of the archive (for a path when ``path`` is given), retried while the
        failure is transient; archive errors raised as the archive would."""
        target = f"{self.url}/{route}"
        if path is not None:
            target += "/" + _quoted(self._full(path))
        delay = BACKOFF
        for attempt in range(RETRIES + 1):
            try:
                response = self._http.request(method, target, **kwargs)
            except (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError):
                if attempt == RETRIES:
                    raise
            else:
                if response.status_code not in _TRANSIENT or attempt == RETRIES:
                    return _checked(response, path or "")
            time.sleep(delay)
            delay *= 2
        raise AssertionError("unreachable")

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> HttpBarecat:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading --------------------------------------------------------------------------------

    def __getitem__(self, path: str) -> bytes:
        try:
            return self._whole(path)
        except FileNotFoundBarecatError:
            raise KeyError(path) from None

    def _whole(self, path: str) -> bytes:
        """A whole file, checked against the CRC32C the server sends."""
        response = self._request("GET", "files", path)
        data = response.content
        expected = response.headers.get("x-barecat-crc32c")
        if expected is not None and int(expected, 16) != crc32c(data):
            raise BarecatIntegrityError(f"{path}: CRC32C mismatch after transfer")
        return data

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str):
            return False
        try:
            self._request("HEAD", "files", path)
        except (FileNotFoundBarecatError, BarecatError):
            return False
        return True

    def read(self, item: BarecatFileInfo | str, offset: int = 0, size: int = -1) -> bytes:
        """A file's bytes, or ``size`` of them from ``offset`` (one ranged request).

        Args:
            item: the file's path, or its record (from this client).
            offset: where to start.
            size: how many bytes at most; ``-1`` for the rest.

        Returns:
            The bytes (fewer than ``size`` at the end of the file).

        Raises:
            FileNotFoundBarecatError: no such file.
            BarecatIntegrityError: the bytes are damaged.
        """
        path = item.path if isinstance(item, BarecatFileInfo) else item
        if offset == 0 and size < 0:
            return self._whole(path)
        last = "" if size < 0 else str(offset + size - 1)
        if size == 0:
            return b""
        try:
            ranged = {"Range": f"bytes={offset}-{last}"}
            response = self._request("GET", "files", path, headers=ranged)
        except BarecatError as e:
            if "outside the file" in str(e):
                return b""
            raise
        return response.content

    def open(self, item: BarecatFileInfo | str, mode: str = "rb") -> io.BufferedReader:
        """A seekable binary stream of the file, read with ranged requests.

        Args:
            item: the file's path or record.
            mode: ``"rb"`` (``"r"`` is taken as ``"rb"``).

        Returns:
            The stream.

        Raises:
            ValueError: a mode that writes.
            FileNotFoundBarecatError: no such file.
        """
        if mode not in ("r", "rb"):
            raise ValueError("remote files open for reading only: mode 'rb'")
        path = item.path if isinstance(item, BarecatFileInfo) else item
        size = int(self._request("HEAD", "files", path).headers["content-length"])
        return io.BufferedReader(_HttpFile(self, normalize(path), size), 1 << 20)

    def get_many(self, paths: Iterable[str]) -> list[bytes]:
        """Many files in one request, in request order."""
        wanted = list(paths)
        full = [self._full(p) for p in wanted]
        body = self._request("POST", "batch", json={"paths": full}).content
        out, pos = [], 0
        for _ in wanted:
            (n,) = _LENGTH.unpack_from(body, pos)
            out.append(body[pos + 8 : pos + 8 + n])
            pos += 8 + n
        return out

    read_many = get_many

    def lookup(self, path: str) -> BarecatEntryInfo:
        """The record of the file or directory at ``path`` (one request).

        Raises:
            FileNotFoundBarecatError: nothing is there.
        """
        return self._record(self._request("GET", "stat", path).json())

    def listdir_infos(self, path: str = "") -> list[BarecatEntryInfo]:
        """The records of a directory's entries, subdirectories first (one request).

        Raises:
            FileNotFoundBarecatError: no such directory (``NotADirectoryLookupBarecatError``
                when ``path`` is a file).
        """
        listed = self._request("GET", "list", path).json()
        return [self._record(e) for e in (*listed["dirs"], *listed["files"])]

    def iter_fileinfos(self, order: Order = Order.ANY) -> Iterator[BarecatFileInfo]:
        """Every file's record below the client's root, in ``order`` (``Order.PATH`` or
        ``Order.ADDRESS``; ``Order.ANY`` gives path order). One request."""
        params = {"order": _ORDER_NAMES.get(order, "path")}
        body = self._request("GET", "index", "", params=params).content
        for line in body.splitlines():
            record = self._record(json.loads(line))
            assert isinstance(record, BarecatFileInfo)
            yield record

    def _record(self, entry: dict[str, Any]) -> BarecatEntryInfo:
        """A record of the server's JSON, its path taken relative to the client's root."""
        path = str(entry["path"])
        if self.root:
            path = "" if path == self.root else path[len(self.root) + 1 :]
        common = {k: entry.get(k) for k in ("mode", "uid", "gid", "mtime_ns")}
        if entry.get("type") == "dir":
            return BarecatDirInfo(
                path,
                **common,
                num_subdirs=entry.get("num_subdirs"),
                num_files=entry.get("num_files"),
                size_tree=entry.get("size_tree"),
                num_files_tree=entry.get("num_files_tree"),
            )
        return BarecatFileInfo(path, **common, size=entry.get("size"), crc32c=entry.get("crc32c"))

    def glob(
        self,
        pattern: str,
        recursive: bool = False,
        include_hidden: bool = False,
        *,
        only_files: bool = False,
    ) -> list[str]:
        """Paths matching ``pattern``, as :meth:`barecat.Barecat.glob` gives them (one
        request).

        Args:
            pattern: a glob relative to the client's root.
            recursive: let ``**`` match any number of directories.
            include_hidden: let wildcards match names starting with ``.``.
            only_files: leave out directories.

        Returns:
            The matches, sorted.
        """
        if self.root:
            pattern = f"{glob_escape(self.root)}/{pattern.lstrip('/')}"
        params = {"pattern": pattern, "recursive": int(recursive), "only_files": int(only_files),
                  "include_hidden": int(include_hidden)}  # fmt: skip
        paths: list[str] = self._request("GET", "glob", params=params).json()["paths"]
        cut = len(self.root) + 1 if self.root else 0
        return [p[cut:] for p in paths]

    def globfiles(
        self, pattern: str, recursive: bool = False, include_hidden: bool = False
    ) -> list[str]:
        """The files :meth:`glob` matches."""
        return self.glob(pattern, recursive, include_hidden, only_files=True)

    def __iter__(self) -> Iterator[str]:
        return iter(self.glob("**", recursive=True, include_hidden=True, only_files=True))

    def __len__(self) -> int:
        return self.num_files

    @property
    def num_files(self) -> int:
        """How many files are below the client's root (one request)."""
        return self.lookup_dir("").num_files_tree or 0

    # -- writing (a server started with --writable) ----------------------------------------------

    def __setitem__(self, path: str, data: bytes) -> None:
        self._request("PUT", "files", path, content=data)

    def __delitem__(self, path: str) -> None:
        try:
            self._request("DELETE", "files", path)
        except FileNotFoundBarecatError:
            raise KeyError(path) from None


class _HttpFile(SeekableReader):
    def __init__(self, client: HttpBarecat, path: str, size: int) -> None:
        super().__init__()
        self._client, self._path, self.size = client, path, size

    def _read_at(self, position: int, n: int) -> bytes:
        return self._client.read(self._path, position, n)


def _quoted(path: str) -> str:
    return "/".join(quote(part, safe="") for part in path.split("/"))


def _checked(response: httpx.Response, path: str) -> httpx.Response:
    """The response, or the archive error its status means."""
    if response.status_code < 400:
        return response
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    message = str(body.get("error", response.text))
    if response.status_code == 404:
        if body.get("type") == "not_a_directory":
            raise NotADirectoryLookupBarecatError(f"Not a directory: {path}", path)
        raise FileNotFoundBarecatError(path or message)
    if response.status_code == 500 and body.get("type") == "integrity":
        raise BarecatIntegrityError(message)  # the server's read found damaged bytes
    if response.status_code == 400 and "escapes" in message:
        raise InvalidPathBarecatError(message)
    if response.status_code in (401, 403):
        raise BarecatError(f"the server refused the request: {message}")
    if response.status_code == 405:
        raise ReadOnlyBarecatError(message)
    if response.status_code == 507:
        raise NotEnoughSpaceBarecatError(message)
    raise BarecatError(f"HTTP {response.status_code}: {message}")


def archive_url(url: str) -> tuple[str | None, str]:
    """The archive's base URL (None when ``url`` names only a server) and the root inside
    it, from the forms :class:`HttpBarecat` takes.

    Raises:
        ValueError: a ``barecat://`` URL without an archive name.
    """
    if url.startswith(SERVER_SCHEME):
        loc = parse_location(url)
        host, port = server_address(loc.host or "")
        return f"http://{host}:{port}/a/{quote(loc.archive or '', safe='')}", loc.path
    url = url.rstrip("/")
    if "/a/" in urlsplit(url).path + "/":
        return url, ""
    return None, ""


RemoteBarecat = HttpBarecat
"""The name :class:`HttpBarecat` had before "remote" came to mean object storage only
(``barecat.objectstore``); the same class."""


def connect(url: str, token: str | None = None) -> HttpBarecat:
    """The archive served at ``url`` (see :class:`HttpBarecat` for the URL forms)."""
    return HttpBarecat(url, token)


__all__ = ["HttpBarecat", "RemoteBarecat", "archive_url", "connect"]
