"""Files read where a plan made from the index says they are, without the index.

For engines whose driver plans once and whose workers only read (Ray Data, Dask): the
driver lists the chosen files in storage order with :func:`plan_rows` (a glob and an SQL
condition on the index's columns, both run by SQLite; one query of plain tuples), and
hands each worker a :class:`PlannedReader` (:func:`planned_reader`) with the addresses
of its files. A worker opens the shards only (local files, or ranged requests to object
storage with no local cache), checks every file's CRC32C and, in a sealed archive,
authenticates and decompresses it bound to its path: it never opens or downloads the
index. An encrypted
archive's data key travels inside the reader (pickled with it, never shown by ``repr``);
the driver checked the index digest when it unlocked the archive, so the rows it planned
from are the trusted ones. Imports ``index`` (its query helpers), ``shards``, ``objectstore``,
``sealing``, ``glob`` and ``paths``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from barecat.checksum import crc32c
from barecat.entries import Address
from barecat.exceptions import BarecatIntegrityError, InvalidPathBarecatError
from barecat.glob import compile_glob
from barecat.index.connection import select
from barecat.index.query import checked_file, file_from_row
from barecat.paths import normalize, subtree_bounds

if TYPE_CHECKING:
    from barecat.archive.facade import Barecat
    from barecat.sealing import Sealer
    from barecat.shards.reading import ShardReader


PlannedFile = tuple[str, int, int, int, int | None]
"""(path, shard, offset, stored size, crc32c): one file's bytes as the shards hold them."""


PlanRow = tuple[str, int, int, int, int | None, int | None, int | None]
"""(path, shard, offset, stored size, crc32c, size, mtime_ns): a planned file as
:func:`plan_rows` lists it; ``size`` is a sealed archive's file's own size, None in a
plain archive (whose files are stored as they are: the stored size)."""

_ADDRESSES_BYTES = (
    "typeof(shard) = 'integer' AND typeof(offset) = 'integer' AND typeof(size) = 'integer'"
    " AND shard >= 0 AND offset >= 0 AND size >= 0 AND offset <= 9223372036854775807 - size"
    " AND (crc32c IS NULL OR (typeof(crc32c) = 'integer' AND crc32c BETWEEN 0 AND 4294967295))"
)
"""SQL true for a row that addresses stored bytes (``query.address_problem`` in SQLite)."""
_SEALED_SIZE_OK = " AND typeof(logical_size) = 'integer' AND logical_size >= 0"


def plan_rows(
    bc: Barecat,
    pattern: str | None = None,
    where: str | None = None,
    params: Sequence[object] = (),
    by_path: bool = False,
) -> list[PlanRow]:
    """The archive's chosen files in storage order (shard, offset), chosen in SQLite and
    listed by one query as plain tuples (no record object per file: about 1 µs a file).

    Args:
        bc: the archive (open; on object storage its index is the local copy).
        pattern: a glob over paths (recursive ``**``, hidden names included), as
            ``Barecat.globfiles(pattern, True, True)`` matches; None: every file.
        where: an SQL condition on the ``files`` table's columns (``path``, ``parent``,
            ``size``, ``mode``, ``uid``, ``gid``, ``mtime_ns``, ``shard``, ``offset``,
            ``crc32c``; in a sealed archive ``size`` is the sealed length and
            ``logical_size`` the file's own), with ``?`` placeholders for ``params``.
        params: the values of ``where``'s placeholders.
        by_path: in path order instead (files of one directory, and names sharing a
            stem, next to each other).

    Returns:
        One :data:`PlanRow` per chosen file.

    Raises:
        DamagedEntryBarecatError: a chosen row cannot address bytes (checked by one more
            query in SQLite, and named as ``Barecat.lookup_file`` would name it).
        sqlite3.Error: ``where`` is not a valid condition.
    """
    conditions: list[str] = []
    args: list[object] = []
    exact = None
    if pattern is not None:
        compiled = compile_glob(pattern, recursive=True, include_hidden=True)
        try:
            base = normalize(compiled.base)
        except InvalidPathBarecatError:
            return []
        if compiled.is_literal:
            if compiled.dirs_only:
                return []
            conditions.append("path = ?")
            args.append(base)
        else:
            extra_conditions, extra_args, _ = compiled.sql_conditions()
            if base:
                conditions.append("path >= ? AND path < ?")
                args.extend(subtree_bounds(base))
            conditions += extra_conditions
            args += extra_args
            skip = len(base) + 1 if base else 0

            def exact(path: str) -> bool:
                return compiled.match_forms(path[skip:].split("/"), False)[0]

    if where:
        conditions.append(f"({where})")
        args.extend(params)
    chosen = "".join(f" AND {c}" for c in conditions)
    sealed = bc.index.sealed
    conn = bc.index.settled_conn()
    ok = _ADDRESSES_BYTES + (_SEALED_SIZE_OK if sealed else "")
    damaged = f"SELECT {bc.index.file_columns} FROM files WHERE NOT ({ok}){chosen}"
    for row in select(conn, damaged, args):  # (none, in an archive without damage)
        f = file_from_row(row)
        if exact is None or exact(f.path):
            checked_file(f)
    size = "logical_size" if sealed else "NULL"  # (a column less to fetch: 15% faster)
    order = "path" if by_path else "shard, offset"
    sql = (
        f"SELECT path, shard, offset, size, crc32c, {size}, mtime_ns FROM files "
        f"WHERE 1{chosen} ORDER BY {order}"
    )
    rows: list[PlanRow] = select(conn, sql, args).fetchall()
    if exact is not None:
        rows = [r for r in rows if exact(r[0])]
    return rows


class PlannedReader:
    """Reads planned files of one archive from its shards alone (see the module doc).

    Pickles as the archive's location, its storage options and, when sealed, its sealing
    settings and data key; each process opens the shards on first use.
    """

    def __init__(
        self,
        location: str,
        remote: bool,
        num_shards: int,
        storage_options: dict[str, Any] | None,
        sealing: tuple[str, int, int, bytes | None, bytes | None] | None,
    ) -> None:
        self.location = location
        self.remote = remote
        self.num_shards = num_shards
        self.storage_options = storage_options
        self._sealing = sealing  # (codec, level, block size, data key, dictionary)
        self._sharder: ShardReader | None = None
        self._sealer: Sealer | None = None
        self._pid = -1

    def __repr__(self) -> str:  # never the key
        sealed = "" if self._sealing is None else ", sealed"
        return f"PlannedReader({self.location!r}{sealed})"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_sharder"], state["_sealer"], state["_pid"] = None, None, -1
        return state

    def _shards(self) -> ShardReader:
        if self._sharder is None or self._pid != os.getpid():
            if self.remote:
                from barecat.objectstore import ObjectStore, url_protocol
                from barecat.shards.objectstore import ObjectStoreSharder

                protocol = url_protocol(self.location)
                assert protocol is not None
                store = ObjectStore(protocol, self.storage_options)
                self._sharder = ObjectStoreSharder(self.location, store, self.num_shards, None)
            else:
                from barecat.shards import Sharder

                self._sharder = Sharder(self.location, readonly=True)
            self._pid = os.getpid()
        return self._sharder

    def read(self, files: Sequence[PlannedFile], max_gap: int = 4096) -> list[bytes]:
        """The files' contents, CRC32C-checked (and in a sealed archive authenticated and
        decompressed, bound to each path), in the order given.

        Neighbours at most ``max_gap`` apart are read with one ``pread`` (up to 16 MiB),
        or on object storage fetched by one ranged request per run.

        Args:
            files: (path, shard, offset, stored size, crc32c) of each file, as
                :func:`plan_files` gave them.
            max_gap: the largest gap between two files still read in one go.

        Returns:
            One ``bytes`` per file.

        Raises:
            BarecatIntegrityError: bytes do not match their CRC32C or their seal, or are
                missing; the message names the file.
        """
        order = sorted(range(len(files)), key=lambda i: (files[i][1], files[i][2]))
        located = [(pos, Address(*files[i][1:])) for pos, i in enumerate(order)]
        try:
            stored = self._shards().read_many(located, max_gap)
        except BarecatIntegrityError as e:
            self._raise_naming_the_file(files, e)
        out: list[bytes] = [b""] * len(files)
        for pos, i in enumerate(order):
            out[i] = stored[pos]
        if self._sealing is not None:
            sealer = self._unsealer()
            out = [sealer.unseal(f[0], data) for f, data in zip(files, out, strict=True)]
        return out

    @property
    def sealed(self) -> bool:
        """Whether files are stored sealed (then only :meth:`read` reads them)."""
        return self._sealing is not None

    def read_packed(
        self,
        files: Sequence[PlannedFile],
        allocate: Callable[[int], memoryview],
        max_gap: int = 4096,
    ) -> memoryview:
        """The stored bytes of a plain archive's files back to back, in the order given,
        each CRC32C-checked where it lies: no object per file, no copy but the read's.

        Neighbours in one shard at most ``max_gap`` apart are read into the buffer with
        one read (up to 16 MiB, their gaps 1 MiB at most), then moved down over the gaps,
        so each file's bytes start where those of the file before it end: the sizes give
        the offsets. On object storage the ranges are fetched as :meth:`read` fetches
        them (each shard's coalesced, requested together), then copied in.

        Args:
            files: (path, shard, offset, stored size, crc32c) of each file.
            allocate: a writable buffer of at least the given number of bytes (a view
                of one of Arrow's, say); called once.
            max_gap: the largest gap between two files still read in one go.

        Returns:
            The first ``sum(sizes)`` bytes of the buffer, as unsigned bytes.

        Raises:
            BarecatIntegrityError: bytes do not match their CRC32C or are missing; the
                message names the file.
            ValueError: the archive is sealed (:meth:`read` unseals its files).
        """
        if self._sealing is not None:
            raise ValueError("a sealed archive's files are read one by one, by read()")
        if self.remote:  # each shard's ranges fetched together, as read() does, copied in
            contents = self.read(files, max_gap)
            view = memoryview(allocate(sum(f[3] for f in files))).cast("B")
            at = 0
            for data in contents:
                view[at : at + len(data)] = data
                at += len(data)
            return view[:at]
        shards = self._shards()
        runs = _runs(files, max_gap)
        try:  # a shard too short is told before any buffer is made
            for _, _, shard, start, end in runs:
                if end > start:
                    shards.require_range(shard, start, end - start)
        except BarecatIntegrityError as e:
            self._raise_naming_the_file(files, e)
        need = packed = 0
        for i, j, _, start, end in runs:
            need = max(need, packed + end - start)
            packed += sum(f[3] for f in files[i:j])
        view = memoryview(allocate(max(need, packed))).cast("B")
        packed = 0
        for i, j, shard, start, end in runs:
            base = packed
            if end > start:
                try:
                    shards.readinto_from_address(shard, start, view[base : base + end - start])
                except BarecatIntegrityError as e:
                    self._raise_naming_the_file(files[i:j], e)
            for path, _, offset, size, crc in files[i:j]:
                if size:
                    at = base + offset - start
                    if at != packed:  # after a gap: moved down over it
                        view[packed : packed + size] = view[at : at + size]
                if crc is not None and crc32c(view[packed : packed + size]) != crc:
                    error = shards.crc_mismatch_error(shard, offset, size)
                    raise BarecatIntegrityError(f"{path}: {error}")
                packed += size
        return view[:packed]

    def _raise_naming_the_file(
        self, files: Sequence[PlannedFile], error: BarecatIntegrityError
    ) -> NoReturn:
        """Raise ``error`` again, as the error of the first of ``files`` that fails alone
        (its message then names the file)."""
        for path, shard, offset, size, crc in files:
            try:
                self._shards().read_from_address(shard, offset, size, crc)
            except BarecatIntegrityError as e:
                raise BarecatIntegrityError(f"{path}: {e}") from e
        raise error

    def _unsealer(self) -> Sealer:
        if self._sealer is None:
            from barecat.sealing import Sealer

            assert self._sealing is not None
            codec, level, block_size, key, dictionary = self._sealing
            self._sealer = Sealer(codec, level, block_size, key, dictionary)
        return self._sealer


def planned_reader(bc: Barecat) -> PlannedReader:
    """A reader of ``bc``'s planned files for other processes (see the module doc).

    Args:
        bc: the archive, open for reading; an encrypted one with its passphrase.

    Returns:
        The reader; it holds an encrypted archive's data key (keep its pickles in
        memory).

    Raises:
        BarecatError: an encrypted archive opened without its passphrase.
        WrongPassphraseBarecatError: a wrong passphrase.
        BarecatIntegrityError: an encrypted archive whose index failed its digest check.
    """
    sealing = None
    state = bc._archive.sealing
    if state is not None:
        key = state.data_key()
        if state.digest is not None:
            state.digest.require_trusted(bc.path)
        s = state.settings
        sealing = (s.codec, s.level, s.block_size, key, s.dictionary or None)
    storage_options = bc._archive.remote_options[0] if bc.remote else None
    location = bc.path if bc.remote else os.path.abspath(bc.path)
    return PlannedReader(location, bc.remote, bc.index.num_used_shards, storage_options, sealing)


_RUN_SPAN = 16 << 20
"""Most bytes of one read of :meth:`PlannedReader.read_packed` (one file may be more)."""
_RUN_GAPS = 1 << 20
"""Most bytes of gaps one read of :meth:`PlannedReader.read_packed` reads."""


def _runs(files: Sequence[PlannedFile], max_gap: int) -> list[tuple[int, int, int, int, int]]:
    """``files`` cut into runs read in one go: (first, past the last, shard, start, end);
    a run's files are in address order, in one shard, at most ``max_gap`` apart (empty
    files, which need no bytes, join any run; a run of them only reads nothing)."""
    runs: list[tuple[int, int, int, int, int]] = []
    first, shard, start, end, gaps = 0, -1, 0, 0, 0
    for i, (_, s, offset, size, _) in enumerate(files):
        if not size:
            continue
        if shard >= 0 and (
            s != shard
            or offset < end
            or offset - end > max_gap
            or offset + size - start > _RUN_SPAN
            or gaps + offset - end > _RUN_GAPS
        ):
            runs.append((first, i, shard, start, end))
            first, shard = i, -1
        if shard < 0:
            shard, start, end, gaps = s, offset, offset + size, 0
        else:
            gaps += offset - end
            end = offset + size
    if first < len(files) or not runs:
        runs.append((first, len(files), max(shard, 0), start, end))
    return runs


__all__ = ["PlanRow", "PlannedFile", "PlannedReader", "plan_rows", "planned_reader"]
