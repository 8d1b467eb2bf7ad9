"""One writer and one reader per kind of store the core benchmark compares.

Kinds: ``barecat`` (whichever barecat the running interpreter imports: this project's, or
0.3.1 in the reference's interpreter), ``plain`` (a directory tree), ``floor`` (one file
with every file's bytes concatenated and a ``{path: (size, offset)}`` dict saved with
``marshal``, read with ``os.pread`` only), ``zip`` (``zipfile``, ZIP_STORED), ``tar``
(``tarfile``, uncompressed, read through a ``{name: TarInfo}`` dict), ``sqlite`` (a table
``files(path TEXT PRIMARY KEY, data BLOB)``) and ``lmdb`` (the ``lmdb`` package, key = the
path's UTF-8 bytes); ``bench_peers`` adds ``arrayrecord`` and ``lance``.

A store lives in a directory of its own (``location``); for ``plain`` that directory is the
tree itself. Writers and readers are plain records of callables so that the timing code in
``bench_workloads`` is one loop for every kind. Module-level imports are the standard
library only (``barecat`` and ``lmdb`` are imported where used), so the reference's
interpreter can import this module too.
"""

from __future__ import annotations

import io
import marshal
import os
import shutil
import sqlite3
import tarfile
import time
import urllib.parse
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import bench_peers

KINDS = ("barecat", "plain", "floor", "zip", "tar", "sqlite", "lmdb", *bench_peers.KINDS)
BARECAT_NAME = "data.barecat"
FLOOR_DATA, FLOOR_INDEX = "data.bin", "index.marshal"
ZIP_NAME, TAR_NAME, SQLITE_NAME = "data.zip", "data.tar", "data.sqlite"
LOOKUP_SUFFIX = "-lookup"  # ours: the lookup table beside the index
LMDB_FILES_PER_TXN = 1000  # a write transaction per this many files (each commit fsyncs)


@dataclass
class Writer:
    add_path: Callable[[str, str], Any]  # (file on disk, path in the store)
    add_bytes: Callable[[str, bytes], Any]  # (path in the store, contents)
    close: Callable[[], Any]  # makes the store complete (commit, central directory, ...)


@dataclass
class Reader:
    read: Callable[[str], bytes]  # the store's usual read by path (checked if it checks)
    read_raw: Callable[[str], bytes] | None  # without any checksum; None: no such way
    read_open: Callable[[str], bytes] | None  # through a file object (barecat only)
    read_indexed: Callable[[str], bytes] | None  # usual read, SQLite index only (ours)
    read_many: Callable[[list[str]], list[bytes]] | None  # a batch, in request order
    storage_order: Callable[[], Iterator[bytes]]  # every file, in the order stored
    close: Callable[[], Any]


def open_writer(kind: str, location: str, size_hint: int) -> Writer:
    """A writer creating a new store in the existing, empty directory ``location``."""
    if kind in bench_peers.WRITERS:
        add_bytes, close = bench_peers.WRITERS[kind](location)
        return Writer(bench_peers.add_path_of(add_bytes), add_bytes, close)
    return _WRITERS[kind](location, size_hint)


def open_reader(kind: str, location: str, fresh: bool = False) -> Reader:
    """A reader of the store at ``location``.

    A tar has no index: opening one reads every member header into the ``{name: TarInfo}``
    dict, which takes seconds for a large archive. Unless ``fresh``, that dict is kept per
    archive (and inherited by forked processes), so only the open-time measurement, which
    asks for ``fresh``, pays it every time.
    """
    if kind == "tar":
        return _tar_reader(location, fresh)
    if kind in bench_peers.READERS:
        r = bench_peers.READERS[kind](location)
        return Reader(r["read"], r["read"], None, None, r["read_many"], r["storage_order"],
                      r["close"])  # fmt: skip
    return _READERS[kind](location)


def _read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _ro_uri(path: str) -> str:
    return f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro"


def _sorted_fetch(
    keys: list[str], where: Callable[[str], tuple[int, int]], pread: Callable[[int, int], bytes]
) -> list[bytes]:
    """Read ``keys`` in storage order (``where`` gives (size, offset)), return request order."""
    located = sorted((where(k)[::-1], i) for i, k in enumerate(keys))
    out: list[bytes] = [b""] * len(keys)
    for (offset, size), i in located:
        out[i] = pread(size, offset)
    return out


# -- barecat -----------------------------------------------------------------------------------


def _barecat_writer(location: str, size_hint: int) -> Writer:
    import barecat

    bc = barecat.Barecat(os.path.join(location, BARECAT_NAME), readonly=False)

    def add_bytes(rel: str, data: bytes) -> None:
        bc.add(rel, data=data)

    return Writer(bc.add_by_path, add_bytes, bc.close)


def _barecat_reader(location: str) -> Reader:
    import barecat

    bc = barecat.Barecat(os.path.join(location, BARECAT_NAME))
    index, sharder = bc.index, bc.sharder  # bound once: 0.3.1 resolves .index per access
    lookup, read_at, read_info = index.lookup_file, sharder.read_from_address, bc.read

    def read(path: str) -> bytes:
        return bc[path]

    def read_raw(path: str) -> bytes:
        f = lookup(path)
        return read_at(f.shard, f.offset, f.size)

    def read_open(path: str) -> bytes:
        with bc.open(path, "rb") as f:
            data: bytes = f.read()
        return data

    def storage_order() -> Iterator[bytes]:
        for info in index.iter_all_fileinfos(order=barecat.Order.ADDRESS):
            yield read_info(info)

    plain: list[Any] = []  # ours: a second reader kept off the lookup table, opened on
    # first use so that the open-time measurement opens one reader, as for the others

    def read_indexed(path: str) -> bytes:
        if not plain:
            plain.append(barecat.Barecat(os.path.join(location, BARECAT_NAME), lookup_table=False))
        data: bytes = plain[0][path]
        return data

    def close() -> None:
        for reader in (bc, *plain):
            reader.close()

    ours = hasattr(bc.index, "lookup_table_size")
    return Reader(
        read,
        read_raw,
        read_open,
        read_indexed if ours else None,
        getattr(bc, "get_many", None),
        storage_order,
        close,
    )


# -- plain files -------------------------------------------------------------------------------


def _plain_writer(location: str, size_hint: int) -> Writer:
    made: set[str] = set()

    def target(rel: str) -> str:
        path = os.path.join(location, rel)
        directory = os.path.dirname(path)
        if directory not in made:
            os.makedirs(directory, exist_ok=True)
            made.add(directory)
        return path

    def add_path(full: str, rel: str) -> None:
        shutil.copyfile(full, target(rel))

    def add_bytes(rel: str, data: bytes) -> None:
        with open(target(rel), "wb") as f:
            f.write(data)

    return Writer(add_path, add_bytes, lambda: None)


def _plain_reader(location: str) -> Reader:
    prefix = os.path.join(location, "")

    def read(path: str) -> bytes:
        with open(prefix + path, "rb") as f:
            return f.read()

    def read_many(paths: list[str]) -> list[bytes]:
        return [read(p) for p in paths]

    def storage_order() -> Iterator[bytes]:  # sorted walk order; the walk is part of the pass
        for dirpath, dirnames, filenames in os.walk(location):
            dirnames.sort()
            for name in sorted(filenames):
                with open(os.path.join(dirpath, name), "rb") as f:
                    yield f.read()

    return Reader(read, read, None, None, read_many, storage_order, lambda: None)


# -- the floor: concatenated bytes, a dict, os.pread -----------------------------------------


def _floor_writer(location: str, size_hint: int) -> Writer:
    out = open(os.path.join(location, FLOOR_DATA), "wb")  # noqa: SIM115 - closed in close()
    index: dict[str, tuple[int, int]] = {}
    position = 0

    def add_bytes(rel: str, data: bytes) -> None:
        nonlocal position
        out.write(data)
        index[rel] = (len(data), position)
        position += len(data)

    def add_path(full: str, rel: str) -> None:
        add_bytes(rel, _read_file(full))

    def close() -> None:
        out.close()
        with open(os.path.join(location, FLOOR_INDEX), "wb") as f:
            marshal.dump(index, f)

    return Writer(add_path, add_bytes, close)


def _floor_reader(location: str) -> Reader:
    with open(os.path.join(location, FLOOR_INDEX), "rb") as f:
        index: dict[str, tuple[int, int]] = marshal.loads(f.read())
    fd = os.open(os.path.join(location, FLOOR_DATA), os.O_RDONLY)
    pread = os.pread

    def read(path: str) -> bytes:
        return pread(fd, *index[path])

    def read_many(paths: list[str]) -> list[bytes]:
        return _sorted_fetch(paths, index.__getitem__, lambda s, o: pread(fd, s, o))

    def storage_order() -> Iterator[bytes]:
        for size, offset in index.values():  # written in offset order
            yield pread(fd, size, offset)

    return Reader(read, read, None, None, read_many, storage_order, lambda: os.close(fd))


# -- zipfile -----------------------------------------------------------------------------------


def _zip_writer(location: str, size_hint: int) -> Writer:
    zf = zipfile.ZipFile(os.path.join(location, ZIP_NAME), "w", zipfile.ZIP_STORED)
    return Writer(zf.write, zf.writestr, zf.close)


def _zip_reader(location: str) -> Reader:
    zf = zipfile.ZipFile(os.path.join(location, ZIP_NAME))  # ZipFile.read checks CRC-32

    def read_many(paths: list[str]) -> list[bytes]:
        infos = sorted((zf.getinfo(p).header_offset, i, p) for i, p in enumerate(paths))
        out: list[bytes] = [b""] * len(paths)
        for _, i, p in infos:
            out[i] = zf.read(p)
        return out

    def storage_order() -> Iterator[bytes]:
        for info in zf.infolist():
            yield zf.read(info)

    return Reader(zf.read, None, None, None, read_many, storage_order, zf.close)


# -- tarfile -----------------------------------------------------------------------------------


def _tar_writer(location: str, size_hint: int) -> Writer:
    tf = tarfile.open(os.path.join(location, TAR_NAME), "w")  # noqa: SIM115
    now = time.time()

    def add_path(full: str, rel: str) -> None:
        tf.add(full, arcname=rel, recursive=False)

    def add_bytes(rel: str, data: bytes) -> None:
        info = tarfile.TarInfo(rel)
        info.size, info.mtime, info.mode = len(data), now, 0o644
        tf.addfile(info, io.BytesIO(data))

    return Writer(add_path, add_bytes, tf.close)


_TAR_MEMBERS: dict[tuple[str, int, int], dict[str, tarfile.TarInfo]] = {}


def _tar_reader(location: str, fresh: bool = True) -> Reader:
    path = os.path.join(location, TAR_NAME)
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_mtime_ns, st.st_size)
    tf = tarfile.open(path)  # noqa: SIM115 - closed by the reader's close
    members = None if fresh else _TAR_MEMBERS.get(key)
    if members is None:
        members = {m.name: m for m in tf.getmembers()}  # reads every header
        _TAR_MEMBERS.clear()
        _TAR_MEMBERS[key] = members
    extract = tf.extractfile
    fd = os.open(path, os.O_RDONLY)
    pread = os.pread

    def read(name: str) -> bytes:
        f = extract(members[name])
        assert f is not None
        return f.read()

    def read_raw(name: str) -> bytes:
        m = members[name]
        return pread(fd, m.size, m.offset_data)

    def where(name: str) -> tuple[int, int]:
        m = members[name]
        return m.size, m.offset_data

    def read_many(names: list[str]) -> list[bytes]:
        return _sorted_fetch(names, where, lambda s, o: pread(fd, s, o))

    def storage_order() -> Iterator[bytes]:
        for m in members.values():
            f = extract(m)
            assert f is not None
            yield f.read()

    def close() -> None:
        tf.close()
        os.close(fd)

    return Reader(read, read_raw, None, None, read_many, storage_order, close)


# -- SQLite blob table -------------------------------------------------------------------------


def _sqlite_writer(location: str, size_hint: int) -> Writer:
    conn = sqlite3.connect(os.path.join(location, SQLITE_NAME))
    conn.execute("CREATE TABLE files (path TEXT PRIMARY KEY, data BLOB)")
    sql = "INSERT INTO files (path, data) VALUES (?, ?)"
    execute = conn.execute  # the first INSERT opens the one transaction, close() commits it

    def add_bytes(rel: str, data: bytes) -> None:
        execute(sql, (rel, data))

    def add_path(full: str, rel: str) -> None:
        execute(sql, (rel, _read_file(full)))

    def close() -> None:
        conn.commit()
        conn.close()

    return Writer(add_path, add_bytes, close)


def _sqlite_reader(location: str) -> Reader:
    conn = sqlite3.connect(_ro_uri(os.path.join(location, SQLITE_NAME)), uri=True)
    execute, sql = conn.execute, "SELECT data FROM files WHERE path = ?"

    def read(path: str) -> bytes:
        data: bytes = execute(sql, (path,)).fetchone()[0]
        return data

    def read_many(paths: list[str]) -> list[bytes]:
        found: dict[str, bytes] = {}
        for i in range(0, len(paths), 500):  # well under SQLite's bound-parameter limit
            chunk = paths[i : i + 500]
            marks = ",".join("?" * len(chunk))
            q = f"SELECT path, data FROM files WHERE path IN ({marks})"
            found.update(execute(q, chunk).fetchall())
        return [found[p] for p in paths]

    def storage_order() -> Iterator[bytes]:
        for (data,) in execute("SELECT data FROM files ORDER BY rowid"):
            yield data

    return Reader(read, read, None, None, read_many, storage_order, conn.close)


# -- LMDB --------------------------------------------------------------------------------------


def _lmdb_writer(location: str, size_hint: int) -> Writer:
    import lmdb

    # values are stored on whole overflow pages: leave room for the rounding, keys and tree
    env = lmdb.open(location, map_size=int(size_hint * 1.5) + (256 << 20))
    txn = env.begin(write=True)
    pending = 0

    def add_bytes(rel: str, data: bytes) -> None:
        nonlocal txn, pending
        txn.put(rel.encode(), data)
        pending += 1
        if pending == LMDB_FILES_PER_TXN:
            txn.commit()
            txn, pending = env.begin(write=True), 0

    def add_path(full: str, rel: str) -> None:
        add_bytes(rel, _read_file(full))

    def close() -> None:
        txn.commit()
        env.close()

    return Writer(add_path, add_bytes, close)


def _lmdb_open(location: str) -> Any:
    import lmdb

    map_size = os.path.getsize(os.path.join(location, "data.mdb")) + (64 << 20)
    return lmdb.open(location, readonly=True, lock=False, map_size=map_size)


def _lmdb_reader(location: str) -> Reader:
    env = _lmdb_open(location)
    txn = env.begin(buffers=False)
    get = txn.get

    def read(path: str) -> bytes:
        data: bytes = get(path.encode())
        return data

    def read_many(paths: list[str]) -> list[bytes]:
        found = txn.cursor().getmulti([p.encode() for p in paths])
        return [v for _, v in found]

    def storage_order() -> Iterator[bytes]:  # key order, which is how LMDB stores them
        yield from txn.cursor().iternext(keys=False, values=True)

    def close() -> None:
        txn.abort()
        env.close()

    return Reader(read, read, None, None, read_many, storage_order, close)


_WRITERS: dict[str, Callable[[str, int], Writer]] = {
    "barecat": _barecat_writer,
    "plain": _plain_writer,
    "floor": _floor_writer,
    "zip": _zip_writer,
    "tar": _tar_writer,
    "sqlite": _sqlite_writer,
    "lmdb": _lmdb_writer,
}
_READERS: dict[str, Callable[[str], Reader]] = {
    "barecat": _barecat_reader,
    "plain": _plain_reader,
    "floor": _floor_reader,
    "zip": _zip_reader,
    "tar": _tar_reader,
    "sqlite": _sqlite_reader,
    "lmdb": _lmdb_reader,
}


# -- what a store holds and what it costs on disk ----------------------------------------------


def _disk_bytes(paths: list[str]) -> int:
    """Allocated bytes (``st_blocks``) of files and directories, recursively."""
    total = 0
    for top in paths:
        total += os.lstat(top).st_blocks * 512
        if os.path.isdir(top):
            for dirpath, dirnames, filenames in os.walk(top):
                for name in dirnames + filenames:
                    total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def contents(kind: str, location: str) -> dict[str, Any]:
    """Number of files and payload bytes, read back from the store (a cross-check)."""
    if kind == "barecat":
        import barecat

        with barecat.Barecat(os.path.join(location, BARECAT_NAME)) as bc:
            return {"files": len(bc), "bytes": bc.total_size}
    if kind == "plain":
        sizes = [
            os.path.getsize(os.path.join(d, n)) for d, _, names in os.walk(location) for n in names
        ]
        return {"files": len(sizes), "bytes": sum(sizes)}
    if kind == "floor":
        with open(os.path.join(location, FLOOR_INDEX), "rb") as f:
            index = marshal.load(f)
        return {"files": len(index), "bytes": sum(s for s, _ in index.values())}
    if kind == "zip":
        with zipfile.ZipFile(os.path.join(location, ZIP_NAME)) as zf:
            infos = zf.infolist()
        return {"files": len(infos), "bytes": sum(i.file_size for i in infos)}
    if kind == "tar":
        with tarfile.open(os.path.join(location, TAR_NAME)) as tf:
            members = tf.getmembers()
        return {"files": len(members), "bytes": sum(m.size for m in members)}
    if kind == "sqlite":
        conn = sqlite3.connect(_ro_uri(os.path.join(location, SQLITE_NAME)), uri=True)
        try:
            n, total = conn.execute("SELECT COUNT(*), SUM(LENGTH(data)) FROM files").fetchone()
        finally:
            conn.close()
        return {"files": n, "bytes": total or 0}
    if kind == "lmdb":
        env = _lmdb_open(location)
        try:
            with env.begin(buffers=True) as txn:
                sizes = [len(v) for v in txn.cursor().iternext(keys=False, values=True)]
        finally:
            env.close()
        return {"files": len(sizes), "bytes": sum(sizes)}
    if kind in bench_peers.KINDS:
        return bench_peers.contents(kind, location)
    raise ValueError(f"unknown store kind {kind!r}")


def footprint(kind: str, location: str) -> dict[str, Any]:
    """Disk bytes (allocated) and, where the store has a separate one, its index's bytes.

    Index: barecat's SQLite index file (ours' lookup table, a cache beside it, counted
    apart); the floor's marshal dict; ZIP's central directory (and end records); LMDB's
    B-tree pages (values sit on overflow pages of their own); ArrayRecord's and Lance's
    saved ``{path: index}`` dict.
    A tar has no index, and the SQLite table keeps paths and blobs in the same B-tree.
    """
    index_bytes: int | None = None
    lookup_bytes: int | None = None
    if kind == "barecat":
        names = [
            os.path.join(location, n) for n in os.listdir(location) if n.startswith(BARECAT_NAME)
        ]
        sizes = {p: os.path.getsize(p) for p in names if "-shard-" not in p}
        lookup_bytes = sum(n for p, n in sizes.items() if p.endswith(LOOKUP_SUFFIX)) or None
        index_bytes = sum(n for p, n in sizes.items() if not p.endswith(LOOKUP_SUFFIX))
    elif kind == "floor":
        index_bytes = os.path.getsize(os.path.join(location, FLOOR_INDEX))
    elif kind in bench_peers.KINDS:
        index_bytes = bench_peers.index_bytes(location)
    elif kind == "zip":
        path = os.path.join(location, ZIP_NAME)
        with zipfile.ZipFile(path) as zf:
            index_bytes = os.path.getsize(path) - zf.start_dir
    elif kind == "lmdb":
        env = _lmdb_open(location)
        try:
            st = env.stat()
            index_bytes = (st["branch_pages"] + st["leaf_pages"]) * st["psize"]
        finally:
            env.close()
    return {
        "index_bytes": index_bytes,
        "lookup_bytes": lookup_bytes,
        "disk_bytes": _disk_bytes([location]),
    }
