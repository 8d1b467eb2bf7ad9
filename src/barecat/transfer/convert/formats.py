"""Names and streams of the traditional archive formats: tar (plain or compressed) and zip.

Owns the mapping from file names (``.tar.gz``, ``.tgz``, ``.zip``, ...) and format names
(``tar.gz``, as ``--stdin``/``--stdout`` take them) to formats, telling compressed files by
their first bytes, opening tar streams for reading or writing in constant memory
(tarfile's stream modes; zstd through ``zstandard``, which tarfile lacks), and telling
what the readers of these formats raise for damaged bytes from real I/O errors
(:func:`reading_input`), reads sized by damaged fields bounded by the file
(:class:`BoundedReads`). Knows nothing of barecat archives; imports only ``exceptions``.
"""

from __future__ import annotations

import contextlib
import errno
import lzma
import struct
import tarfile
import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO, TypeVar, cast

import zstandard

from barecat.exceptions import BarecatError, DamagedInputBarecatError

TAR_FORMATS = ("tar", "tar.gz", "tar.bz2", "tar.xz", "tar.zst")
FORMATS = (*TAR_FORMATS, "zip")

_SUFFIXES = {  # longest first where one ends another
    ".tar.gz": "tar.gz",
    ".tgz": "tar.gz",
    ".tar.bz2": "tar.bz2",
    ".tbz2": "tar.bz2",
    ".tbz": "tar.bz2",
    ".tar.xz": "tar.xz",
    ".txz": "tar.xz",
    ".tar.zst": "tar.zst",
    ".tzst": "tar.zst",
    ".tar": "tar",
    ".zip": "zip",
}

_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_MAGIC = (  # first bytes of compressed streams, to refuse wrapping them
    (b"\x1f\x8b", "gzip"),
    (b"BZh", "bzip2"),
    (b"\xfd7zXZ\x00", "xz"),
    (_ZSTD_MAGIC, "zstd"),
)


def format_of_name(name: str) -> str | None:
    """The format a file name says (``data.tgz`` -> ``tar.gz``), or None if none."""
    lower = name.lower()
    for suffix, fmt in _SUFFIXES.items():
        if lower.endswith(suffix):
            return fmt
    return None


def format_of_file(path: str) -> str:
    """The format of the file at ``path``: what its name says, else ``zip`` if it is one
    (zips are told by their table of contents), else ``tar`` (of any compression)."""
    return format_of_name(path) or ("zip" if zipfile.is_zipfile(path) else "tar")


def parse_format(text: str) -> str:
    """A format as ``--stdin``/``--stdout`` take it: ``tar.gz``, ``tgz``, ``.zip``, ..."""
    fmt = format_of_name("x." + text.lower().lstrip("."))
    if fmt is None:
        raise BarecatError(f"Unknown archive format {text!r}; known: {', '.join(FORMATS)}")
    return fmt


def compression_of(path: str) -> str | None:
    """The compression a file's first bytes show (``gzip``, ...), or None."""
    with open(path, "rb") as f:
        head = f.read(8)
    return next((name for magic, name in _MAGIC if head.startswith(magic)), None)


@contextlib.contextmanager
def open_tar_reader(stream: BinaryIO) -> Iterator[tarfile.TarFile]:
    """A tarfile reading ``stream`` in stream mode (no seeking, constant memory).

    The compression is told from the stream's first bytes, whatever its name says:
    gzip, bzip2 and xz by tarfile itself, zstd here. Every tar dialect tarfile knows is
    read (ustar, GNU, PAX).
    """
    head = _read_exactly(stream, len(_ZSTD_MAGIC))
    source: BinaryIO = cast(BinaryIO, _Prefixed(head, stream))
    with contextlib.ExitStack() as stack:
        if head == _ZSTD_MAGIC:
            source = stack.enter_context(_zstd_stream(source, writing=False))
        try:
            tar = stack.enter_context(
                tarfile.open(fileobj=source, mode="r|*", tarinfo=StrictTarInfo)
            )
        except TypeError as e:  # a gzip header cut short: tarfile takes ord() of b""
            raise tarfile.ReadError(f"header cut short: {e}") from e
        yield tar


DECODING_ERRORS = (
    tarfile.TarError,
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    EOFError,
    zlib.error,
    lzma.LZMAError,
    zstandard.ZstdError,
    struct.error,  # a record cut short
    UnicodeDecodeError,  # a zip member's name flagged UTF-8 that is not
    NotImplementedError,  # a zip compression method or version Python lacks
)
"""What Python's readers of tar, zip and their compressions raise for damaged bytes."""


@dataclass(slots=True)
class InputPlace:
    """Where in an input a reader is: the member it reads (None: its table of contents,
    or between members), and the last member it read whole."""

    member: str | None = None
    after: str | None = None

    def done(self) -> None:
        """The member being read was read whole."""
        self.member, self.after = None, self.member

    def __str__(self) -> str:
        if self.member is not None:
            return f" (member {self.member!r})"
        return "" if self.after is None else f" (after member {self.after!r})"


@contextlib.contextmanager
def reading_input(fmt: str, source: str) -> Iterator[InputPlace]:
    """Turn what the readers raise for damaged bytes of the ``fmt`` input ``source`` into
    one :class:`DamagedInputBarecatError` naming it, and the member the caller last set
    in the yielded :class:`InputPlace`, whatever the reader's exception type.

    An ``OSError`` with an ``errno`` is a real I/O error (the input's disk) and passes as
    it is, but for ``EINVAL``: a seek to the negative offset a damaged directory gave.
    Barecat's own errors pass as they are.

    Raises:
        DamagedInputBarecatError: ``source: corrupt or truncated FMT (member 'NAME'): why``.
    """
    place = InputPlace()
    try:
        yield place
    except BarecatError:
        raise
    except (*DECODING_ERRORS, OSError) as e:
        if isinstance(e, OSError) and e.errno not in (None, errno.EINVAL):
            raise
        raise DamagedInputBarecatError(f"{source}: corrupt or truncated {fmt}{place}: {e}") from e


_TAR_HEADER_ERRORS: dict[str, type[tarfile.HeaderError]] = {
    name: vars(tarfile)[name]  # (not in typeshed's stubs: not in tarfile's __all__)
    for name in ("TruncatedHeaderError", "EOFHeaderError", "InvalidHeaderError")
}


class BoundedReads:
    """A seekable file whose reads never ask for more than it holds from where they start.

    ``tarfile`` and ``zipfile`` read sizes from header fields, all at once from a file
    they were given: a damaged one (a PAX header or a zip directory said to be 8 GB long)
    would have them allocate that much (``MemoryError``) for a file of a few kilobytes.
    Give them this instead of the file.
    """

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw
        self.name = getattr(raw, "name", None)
        self.at = raw.tell()
        """Where the next read starts (kept here: a read costs no ``tell``)."""
        self.size = raw.seek(0, 2)
        raw.seek(self.at)

    def read(self, size: int | None = -1) -> bytes:
        left = max(self.size - self.at, 0)
        data = self.raw.read(left if size is None or not 0 <= size <= left else size)
        self.at += len(data)
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        self.at = self.raw.seek(offset, whence)
        return self.at

    def tell(self) -> int:
        return self.at

    def seekable(self) -> bool:
        return True


_Info = TypeVar("_Info", bound=tarfile.TarInfo)


class StrictTarInfo(tarfile.TarInfo):
    """``tarfile``'s member, read strictly: a damaged header after the first (a bad
    checksum, a block cut short) is an error, where ``tarfile`` takes it for the end of
    the archive and leaves out every member after it without a word. Zero blocks (even
    the last one cut short) still end the archive."""

    @classmethod
    def frombuf(cls: type[_Info], buf: bytes | bytearray, encoding: str, errors: str) -> _Info:
        try:
            return super().frombuf(buf, encoding, errors)
        except _TAR_HEADER_ERRORS["TruncatedHeaderError"]:
            if buf.strip(b"\0"):
                raise tarfile.ReadError("a header cut short: the file is truncated") from None
            raise _TAR_HEADER_ERRORS["EOFHeaderError"]("end of file header") from None
        except _TAR_HEADER_ERRORS["InvalidHeaderError"] as e:
            raise tarfile.ReadError(f"a damaged header: {e}") from None


def tar_members(tar: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    """The members of ``tar`` in order, as iterating it gives them, but what ``tarfile``
    raises past its own checks for a damaged header (a negative or huge size makes it
    seek where no file offset goes: ``ValueError``, ``OverflowError``) raised as the
    ``tarfile.ReadError`` it is."""
    members = iter(tar)
    while True:
        try:
            member = next(members)
        except StopIteration:
            return
        except (ValueError, OverflowError) as e:
            raise tarfile.ReadError(f"damaged header: {e}") from e
        yield member


def _read_exactly(stream: BinaryIO, size: int) -> bytes:
    """Up to ``size`` bytes, fewer only at the end (a pipe may deliver less per read)."""
    head = b""
    while len(head) < size and (chunk := stream.read(size - len(head))):
        head += chunk
    return head


class _Prefixed:
    """A read-only stream: ``head`` (bytes already taken from ``rest``), then ``rest``."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        self._head = head
        self._rest = rest

    def read(self, size: int = -1) -> bytes:
        if not self._head:
            return self._rest.read(size)
        if size is None or size < 0:
            data, self._head = self._head + self._rest.read(), b""
            return data
        data, self._head = self._head[:size], self._head[size:]
        return data + self._rest.read(size - len(data)) if len(data) < size else data


@contextlib.contextmanager
def open_tar_writer(stream: BinaryIO, fmt: str) -> Iterator[tarfile.TarFile]:
    """A tarfile writing ``fmt`` (``tar``, ``tar.gz``, ...) to ``stream`` in stream mode.

    PAX format: it carries long and non-ASCII names, big sizes and nanosecond times.
    """
    if fmt not in TAR_FORMATS:
        raise BarecatError(f"{fmt} is not a tar format")
    codec = fmt.partition(".")[2]
    with contextlib.ExitStack() as stack:
        if codec == "zst":
            stream, codec = stack.enter_context(_zstd_stream(stream, writing=True)), ""
        yield stack.enter_context(
            tarfile.open(fileobj=stream, mode=f"w|{codec}", format=tarfile.PAX_FORMAT)  # type: ignore[call-overload]
        )


@contextlib.contextmanager
def _zstd_stream(stream: BinaryIO, writing: bool) -> Iterator[BinaryIO]:
    if writing:
        with zstandard.ZstdCompressor().stream_writer(stream, closefd=False) as out:
            yield cast(BinaryIO, out)
    else:
        with zstandard.ZstdDecompressor().stream_reader(stream, closefd=False) as inp:
            yield cast(BinaryIO, inp)


__all__ = [
    "BoundedReads",
    "DECODING_ERRORS",
    "FORMATS",
    "InputPlace",
    "StrictTarInfo",
    "TAR_FORMATS",
    "compression_of",
    "format_of_file",
    "format_of_name",
    "open_tar_reader",
    "open_tar_writer",
    "parse_format",
    "reading_input",
    "tar_members",
]
