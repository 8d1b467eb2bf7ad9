"""Stored files opened as file objects (``bc.open``, as ``builtins.open``): streams that
read (block by block when sealed), and the archive's one writer at a time, whose file is
indexed when it is closed.

The facade's part over its :class:`~barecat.archive.state.OpenArchive`, which holds the
open writer (the other changes refuse to run while it is open). A plain file's writer
writes at the write end of the shards through the write session, reading a stored file
in place until its first change copies it there (committed bytes are never changed in
place); a sealed file's writer keeps the file in memory and adds it, sealed, at close
(through the writing part).
"""

from __future__ import annotations

import functools
import io
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, cast

from barecat.archive.reading import file_record, open_reader, read_file
from barecat.archive.sealed import SealedFileWriter
from barecat.archive.state import ArchivePart, OpenArchive, serialized
from barecat.archive.writing import ArchiveWriting
from barecat.entries import Address, BarecatEntryInfo, BarecatFileInfo
from barecat.exceptions import FileExistsBarecatError, FileNotFoundBarecatError
from barecat.paths import normalize
from barecat.shards import BarecatReadWriteFileObject

if TYPE_CHECKING:  # write code is imported when used, not before
    from barecat.ops.writing import Position


def _valid_mode(mode: str) -> bool:
    """Whether ``builtins.open`` would accept ``mode``: one of r/w/a/x, each letter at most
    once, optionally ``+``, and ``b`` or ``t`` (not both)."""
    letters = set(mode)
    return (
        len(letters) == len(mode)
        and letters <= set("rwax+bt")
        and len(letters & set("rwax")) == 1
        and not {"b", "t"} <= letters
    )


class ArchiveOpening(ArchivePart):
    """``open`` of a :class:`~barecat.archive.Barecat` (see the module doc)."""

    def __init__(self, archive: OpenArchive, writing: ArchiveWriting) -> None:
        super().__init__(archive)
        self.writing = writing
        """Adds and replaces what a sealed file's writer wrote, at its close."""

    def open(
        self,
        item: BarecatFileInfo | str,
        mode: str = "r",
        encoding: str | None = None,
        errors: str | None = None,
        newline: str | None = None,
    ) -> IO[Any]:
        """Open a stored file like ``builtins.open``: r, rb, r+b, w(b), a(b), x(b).

        Reading streams the file (block by block when sealed); writing needs a writable
        archive and allows one open writer at a time, whose file is indexed when it is
        closed (the old bytes of a rewritten file become a hole until defrag).

        Args:
            item: the file's path or record.
            mode: as ``builtins.open``; without ``b``, text.
            encoding: the text encoding (default UTF-8); text modes only.
            errors: how text decoding errors are handled; text modes only.
            newline: newline translation; text modes only.

        Returns:
            A binary file object, or a text one (``io.TextIOWrapper``).

        Raises:
            ValueError: a mode ``builtins.open`` would refuse.
            FileNotFoundBarecatError: reading (``r``, ``r+``) and no file is there.
            IsADirectoryBarecatError: a directory is there.
            FileExistsBarecatError: ``x`` mode and the file exists.
            DamagedEntryBarecatError: reading, and the file's index row cannot address
                bytes.
            BarecatIntegrityError: reading, and the file's bytes are missing.
            ReadOnlyBarecatError: writing to an archive open read-only.
            BarecatError: writing while another file is open for writing, or to a
                closed archive.
        """
        if not _valid_mode(mode):
            raise ValueError(f"Invalid mode: {mode!r}")
        text = "b" not in mode
        raw: io.RawIOBase
        if mode.replace("b", "").replace("t", "") == "r":
            archive = self.archive  # (a read in progress: not the writing side, which waits
            # for the archive's lock, which a close holds while it waits for reads)
            raw = archive.read_now(lambda: open_reader(archive, file_record(archive, item)))
            if not text:
                return raw  # type: ignore[return-value]
            return io.TextIOWrapper(
                io.BufferedReader(raw), encoding=encoding or "utf-8", errors=errors, newline=newline
            )
        writer = self._open_for_writing(
            item.path if isinstance(item, BarecatEntryInfo) else item, mode
        )
        if not text:
            return writer  # type: ignore[return-value]
        buffered: io.BufferedIOBase
        if isinstance(writer, SealedFileWriter):
            buffered = writer
        else:
            stream = cast(Any, writer)
            buffered = io.BufferedRandom(stream) if writer.readable() else io.BufferedWriter(stream)
        return io.TextIOWrapper(
            buffered, encoding=encoding or "utf-8", errors=errors, newline=newline
        )

    @serialized
    def _open_for_writing(
        self, path: str, mode: str
    ) -> BarecatReadWriteFileObject | SealedFileWriter:
        self.archive.require_writable()
        self.archive.require_no_open_writer()
        path = normalize(path)
        kind = mode.replace("b", "").replace("t", "").replace("+", "")
        try:
            existing: BarecatFileInfo | None = self.archive.index.lookups.lookup_file(
                path, normalized=True
            )
        except FileNotFoundBarecatError:
            existing = None
        if kind == "r" and existing is None:
            raise self.archive.index.lookups.not_found_error(path)
        if kind == "x" and existing is not None:
            raise FileExistsBarecatError(path)
        keep = existing is not None and kind in ("r", "a")
        if self.archive.sealing is not None:
            return self._open_sealed_for_writing(path, existing, keep, kind == "a")
        relocate: Callable[[], tuple[int, int]] | None = None
        if keep and existing is not None:
            # Read in place until the first change copies the bytes to the write end
            # (committed bytes are never changed in place).
            shard, offset, size, _ = existing.address  # (a plain archive: size is stored)
            stored = (shard, offset, size)
            self.archive.sharder.require_range(*stored)
            relocate = functools.partial(self._copy_to_write_end, stored)
        else:
            size = 0
            shard, offset = self.archive.writes.open_region()
        self.archive.writer_path = path
        self.archive.writer = BarecatReadWriteFileObject(
            self.archive.writes.sharder, shard, offset, size, self._finish_writer, mode, relocate,
            move_to_new_shard=self._move_writer, lock=self.write_lock,
        )  # fmt: skip
        return self.archive.writer

    @serialized
    def _copy_to_write_end(self, stored: tuple[int, int, int]) -> Position:
        """Copy a stored file's bytes to the write end, for a writer's first change."""
        return self.archive.writes.copy_to_region(stored)

    @serialized
    def _move_writer(self, region: tuple[int, int, int]) -> Position:
        """An open writer outgrew its shard: its bytes go on at a new shard's start."""
        return self.archive.writes.move_region(region)

    def _open_sealed_for_writing(
        self, path: str, existing: BarecatFileInfo | None, keep: bool, append: bool
    ) -> SealedFileWriter:
        def store(data: bytes | None) -> None:
            self.archive.writer = None
            if data is None:  # opened with its content, closed unchanged
                return
            stamp = BarecatFileInfo(path, mtime_ns=time.time_ns())
            if existing is not None:
                self.writing.update_file(existing, stamp, data=data)
            else:
                stamp.mode = 0o100644
                self.writing.add(stamp, data=data)

        initial = read_file(self.archive, existing, 0, -1) if keep and existing else b""
        writer = SealedFileWriter(initial, store, store_unchanged=not keep, lock=self.write_lock)
        if append:
            writer.seek(0, io.SEEK_END)
        self.archive.writer_path = path
        self.archive.writer = writer
        return writer

    @serialized
    def _finish_writer(self, w: BarecatReadWriteFileObject) -> None:
        self.archive.writer = None
        if w.in_place:  # opened on a stored file and never changed: nothing to record
            return
        path = self.archive.writer_path

        def record(address: Address) -> None:
            now = time.time_ns()
            if self.archive.index.lookups.isfile(path):
                self.archive.edits.update_file(path, *address, now)
            else:
                self.archive.edits.add_file(
                    BarecatFileInfo(path, 0o100644, None, None, now, *address)
                )

        self.archive.writes.close_region((w.shard, w.offset, w.size), record)
        self.archive.maybe_commit()


__all__ = ["ArchiveOpening"]
