"""The :class:`Index`: lookups, listings and edits of an archive's SQLite index.

Knows paths, sizes, places and directory statistics; never touches shard bytes. Its
public methods keep the reference's names and meaning, since users call ``bc.index.*``
directly. Statistics stay right by the schema's triggers; bulk edits (``no_triggers``,
subtree renames and removals) switch them off inside their own transaction and fix
the numbers with a few set-based updates instead. SQL lives here, in ``query.py`` and
in ``sql/``; imports go only down to ``entries``, ``glob``, ``paths`` and ``exceptions``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sqlite3
from collections.abc import Iterable, Iterator
from typing import Any

from barecat.entries import (
    SHARD_SIZE_UNLIMITED,
    BarecatDirInfo,
    BarecatEntryInfo,
    BarecatFileInfo,
    Order,
)
from barecat.exceptions import (
    BarecatError,
    CorruptIndexBarecatError,
    DirectoryNotEmptyBarecatError,
    FileExistsBarecatError,
    FileNotFoundBarecatError,
    InvalidPathBarecatError,
    IsADirectoryBarecatError,
    NotADirectoryBarecatError,
    NotEnoughSpaceBarecatError,
    ReadOnlyBarecatError,
)
from barecat.glob import compile_glob
from barecat.index import query, treestats
from barecat.index.connection import ConnectionPool
from barecat.index.schema import check_version, create_schema
from barecat.paths import ancestors, is_within, normalize, subtree_bounds

_DIR_TAKEN = ("barecat: a directory already has this path", "Path already exists as directory")
_FILE_TAKEN = ("barecat: a file already has this path", "Path already exists as file")

DirItem = BarecatDirInfo | str
FileItem = BarecatFileInfo | str


def _disk_full_or(e: sqlite3.OperationalError, where: str) -> Exception:
    """SQLite's SQLITE_FULL as barecat's disk-full error; anything else unchanged."""
    if "full" in str(e):
        return NotEnoughSpaceBarecatError(f"Disk full while updating the index {where}: {e}")
    return e


def _path_of(item: BarecatEntryInfo | str) -> str:
    return item.path if isinstance(item, BarecatEntryInfo) else normalize(item)


class Index:
    """An archive's SQLite index.

    ``path`` is the index file itself. ``readonly`` opens it with SQLite's read-only
    mode; ``readonly_is_immutable`` additionally tells SQLite nobody else changes the
    file (no locking at all — fastest for archives on read-only media).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        shard_size_limit: int | None = None,
        bufsize: int | None = None,
        readonly: bool = True,
        wal: bool = False,
        readonly_is_immutable: bool = False,
        threadsafe: bool = False,
    ) -> None:
        self.path = os.fspath(path)
        self.readonly = readonly
        self.bufsize = bufsize or 1000
        fresh = not readonly and (not os.path.exists(self.path) or os.path.getsize(self.path) == 0)
        if readonly and not os.path.isfile(self.path):
            raise FileNotFoundBarecatError(self.path, "Archive index")
        self._pool = ConnectionPool(
            self.path, readonly, readonly and readonly_is_immutable, threadsafe
        )
        try:
            conn = self._pool.get()
            if fresh:
                create_schema(conn, shard_size_limit)
            self.schema_version = check_version(conn, self.path)
        except sqlite3.DatabaseError as e:
            self._pool.close()
            raise CorruptIndexBarecatError(
                f"{self.path} is not a readable barecat index: {e}"
            ) from e
        except BaseException:
            self._pool.close()
            raise
        if wal and not readonly:
            conn.execute("PRAGMA journal_mode = WAL")
        if shard_size_limit is not None and not fresh and not readonly:
            self.shard_size_limit = shard_size_limit

    # -- connection and transactions -------------------------------------------------

    @property
    def conn(self) -> sqlite3.Connection:
        """This thread's (and this process's) connection."""
        return self._pool.get()

    @property
    def cursor(self) -> sqlite3.Cursor:
        return self.conn.cursor()

    def commit(self) -> None:
        try:
            self.conn.commit()
        except sqlite3.OperationalError as e:
            raise _disk_full_or(e, self.path) from e

    def rollback(self) -> None:
        self.conn.rollback()

    def close(self) -> None:
        if not self.readonly:
            with contextlib.suppress(sqlite3.Error):
                self.conn.commit()
                self.conn.execute("PRAGMA optimize")
        self._pool.close()

    def __enter__(self) -> Index:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _require_writable(self) -> None:
        if self.readonly:
            raise ReadOnlyBarecatError(f"Archive index {self.path} is open read-only")

    # -- config ----------------------------------------------------------------------

    def _config_int(self, key: str, default: int | None = None) -> int | None:
        row = self.conn.execute("SELECT value_int FROM config WHERE key = ?", (key,)).fetchone()
        return default if row is None else row[0]

    def _set_config_int(self, key: str, value: int) -> None:
        self.conn.execute(
            "INSERT INTO config (key, value_int) VALUES (?, ?) "
            "ON CONFLICT (key) DO UPDATE SET value_int = excluded.value_int",
            (key, value),
        )

    @property
    def shard_size_limit(self) -> int:
        value = self._config_int("shard_size_limit")
        return SHARD_SIZE_UNLIMITED if value is None else value

    @shard_size_limit.setter
    def shard_size_limit(self, value: int) -> None:
        self._require_writable()
        self._set_config_int("shard_size_limit", value)
        self.conn.commit()

    @contextlib.contextmanager
    def no_triggers(self) -> Iterator[None]:
        """Suspend statistics triggers; call :meth:`update_treestats` afterwards.

        A config flag rather than DROP TRIGGER, so it is transactional and needs no schema
        rights; nesting is allowed (only the outermost level turns triggers back on).
        """
        self._require_writable()
        before = self._config_int("use_triggers", 1)
        self._set_config_int("use_triggers", 0)
        try:
            yield
        finally:
            self._set_config_int("use_triggers", before if before is not None else 1)

    @contextlib.contextmanager
    def no_foreign_keys(self) -> Iterator[None]:
        self.conn.execute("PRAGMA foreign_keys = OFF")
        yield

    # -- sizes -----------------------------------------------------------------------

    @property
    def num_files(self) -> int:
        row = self.conn.execute("SELECT num_files_tree FROM dirs WHERE path = ''").fetchone()
        if row is None or row[0] is None or self._config_int("use_triggers", 1) != 1:
            return int(self.conn.execute("SELECT count(*) FROM files").fetchone()[0])
        return int(row[0])

    @property
    def num_dirs(self) -> int:
        return int(self.conn.execute("SELECT count(*) FROM dirs").fetchone()[0])

    @property
    def total_size(self) -> int:
        row = self.conn.execute("SELECT size_tree FROM dirs WHERE path = ''").fetchone()
        if row is None or row[0] is None or self._config_int("use_triggers", 1) != 1:
            return int(self.conn.execute("SELECT ifnull(sum(size), 0) FROM files").fetchone()[0])
        return int(row[0])

    @property
    def num_used_shards(self) -> int:
        row = self.conn.execute("SELECT max(shard) FROM files").fetchone()
        return 0 if row[0] is None else int(row[0]) + 1

    def __len__(self) -> int:
        return self.num_files

    def __iter__(self) -> Iterator[str]:
        return self.iter_all_filepaths()

    def __contains__(self, path: object) -> bool:
        return isinstance(path, str) and self.isfile(path)

    def logical_shard_end(self, shard: int) -> int:
        """One past the last byte any file uses in ``shard`` (0 for an unused shard)."""
        row = self.conn.execute(
            "SELECT offset + size FROM files WHERE shard = ? ORDER BY offset DESC LIMIT 1", (shard,)
        ).fetchone()
        return 0 if row is None else int(row[0])

    def get_last_file(self) -> BarecatFileInfo:
        """The file stored last (highest shard, then offset)."""
        row = self.conn.execute(
            f"SELECT {query.FILE_COLUMNS} FROM files ORDER BY shard DESC, offset DESC LIMIT 1"
        ).fetchone()
        if row is None:
            raise FileNotFoundBarecatError("(archive is empty)", "Last file")
        return query.file_from_row(row)

    # -- lookups ---------------------------------------------------------------------

    def lookup_file(self, path: str, normalized: bool = False) -> BarecatFileInfo:
        if not normalized:
            path = normalize(path)
        row = self.conn.execute(
            f"SELECT {query.FILE_COLUMNS} FROM files WHERE path = ?", (path,)
        ).fetchone()
        if row is None:
            if self.isdir(path):
                raise IsADirectoryBarecatError(path)
            raise FileNotFoundBarecatError(path)
        return query.file_from_row(row)

    def lookup_address(self, path: str) -> tuple[int, int, int, int | None] | None:
        """(shard, offset, size, crc32c) of a normalized file path, or None: the read hot path."""
        row: tuple[int, int, int, int | None] | None = self.conn.execute(
            "SELECT shard, offset, size, crc32c FROM files WHERE path = ?", (path,)
        ).fetchone()
        return row

    def lookup_dir(self, dirpath: str) -> BarecatDirInfo:
        path = normalize(dirpath)
        row = self.conn.execute(
            f"SELECT {query.DIR_COLUMNS} FROM dirs WHERE path = ?", (path,)
        ).fetchone()
        if row is None:
            if self.isfile(path):
                raise NotADirectoryBarecatError(f"Not a directory: {path}")
            raise FileNotFoundBarecatError(path, "Directory")
        return query.dir_from_row(row)

    def lookup(self, path: str) -> BarecatEntryInfo:
        path = normalize(path)
        try:
            return self.lookup_file(path, normalized=True)
        except IsADirectoryBarecatError:
            return self.lookup_dir(path)

    def lookup_files(self, paths: list[str]) -> list[BarecatFileInfo]:
        return [self.lookup_file(p) for p in paths]

    def isfile(self, path: str) -> bool:
        return (
            self.conn.execute("SELECT 1 FROM files WHERE path = ?", (normalize(path),)).fetchone()
            is not None
        )

    def isdir(self, path: str) -> bool:
        return (
            self.conn.execute("SELECT 1 FROM dirs WHERE path = ?", (normalize(path),)).fetchone()
            is not None
        )

    def exists(self, path: str) -> bool:
        path = normalize(path)
        return self.isfile(path) or self.isdir(path)

    # -- whole-archive iteration -----------------------------------------------------

    def iter_all_fileinfos(
        self, order: Order = Order.ANY, bufsize: int | None = None
    ) -> Iterator[BarecatFileInfo]:
        return query.iter_files(self.conn, order)

    def iter_all_dirinfos(
        self, order: Order = Order.ANY, bufsize: int | None = None
    ) -> Iterator[BarecatDirInfo]:
        return query.iter_dirs(self.conn, order)

    def iter_all_infos(
        self, order: Order = Order.ANY, bufsize: int | None = None
    ) -> Iterator[BarecatEntryInfo]:
        yield from self.iter_all_dirinfos(order)
        yield from self.iter_all_fileinfos(order)

    def iter_all_filepaths(
        self, order: Order = Order.ANY, bufsize: int | None = None
    ) -> Iterator[str]:
        sql = "SELECT path FROM files" + query.order_clause(order, True)
        return (row[0] for row in self.conn.execute(sql))

    def iter_all_dirpaths(
        self, order: Order = Order.ANY, bufsize: int | None = None
    ) -> Iterator[str]:
        sql = "SELECT path FROM dirs" + query.order_clause(order, False)
        return (row[0] for row in self.conn.execute(sql))

    def iter_all_paths(self, order: Order = Order.ANY, bufsize: int | None = None) -> Iterator[str]:
        yield from self.iter_all_dirpaths(order)
        yield from self.iter_all_filepaths(order)

    # -- directory listings ----------------------------------------------------------

    def _existing_dir(self, diritem: DirItem) -> str:
        path = _path_of(diritem)
        if not self.isdir(path):
            self.lookup_dir(path)  # raises the precise error
        return path

    def iter_direct_fileinfos(
        self, diritem: DirItem, order: Order = Order.ANY, bufsize: int | None = None
    ) -> Iterator[BarecatFileInfo]:
        return query.iter_files(self.conn, order, " WHERE parent = ?", (_path_of(diritem),))

    def iter_subdir_dirinfos(
        self, diritem: DirItem, order: Order = Order.ANY, bufsize: int | None = None
    ) -> Iterator[BarecatDirInfo]:
        return query.iter_dirs(self.conn, order, " WHERE parent = ?", (_path_of(diritem),))

    def list_direct_fileinfos(
        self, dirpath: str, order: Order = Order.ANY
    ) -> list[BarecatFileInfo]:
        return list(self.iter_direct_fileinfos(dirpath, order))

    def list_subdir_dirinfos(self, dirpath: str, order: Order = Order.ANY) -> list[BarecatDirInfo]:
        return list(self.iter_subdir_dirinfos(dirpath, order))

    def iterdir_infos(
        self, diritem: DirItem, order: Order = Order.ANY, bufsize: int | None = None
    ) -> Iterator[BarecatEntryInfo]:
        path = self._existing_dir(diritem)
        yield from self.iter_subdir_dirinfos(path, order)
        yield from self.iter_direct_fileinfos(path, order)

    def listdir_infos(self, diritem: DirItem, order: Order = Order.ANY) -> list[BarecatEntryInfo]:
        return list(self.iterdir_infos(diritem, order))

    def iterdir_names(
        self, diritem: DirItem, order: Order = Order.ANY, bufsize: int | None = None
    ) -> Iterator[str]:
        path = self._existing_dir(diritem)
        cut = len(path) + 1 if path else 0
        for table in ("dirs", "files"):
            sql = f"SELECT path FROM {table} WHERE parent = ?" + query.order_clause(order, False)
            for row in self.conn.execute(sql, (path,)):
                yield row[0][cut:]

    def listdir_names(self, diritem: DirItem, order: Order = Order.ANY) -> list[str]:
        return list(self.iterdir_names(diritem, order))

    def walk_infos(self, rootitem: DirItem, bufsize: int = 32) -> Iterator[query.WalkStep]:
        return query.walk(self.conn, self._existing_dir(rootitem))

    def walk_names(
        self, rootitem: DirItem, bufsize: int = 32
    ) -> Iterator[tuple[str, list[str], list[str]]]:
        """Like ``os.walk(top)`` on the extracted tree; the root is reported as '.'.

        The yielded ``dirnames`` list may be pruned in place to skip subtrees.
        """
        for d, subdirs, files in self.walk_infos(rootitem):
            names = [s.name for s in subdirs]
            yield (d.path or "."), names, [f.name for f in files]
            keep = set(names)
            subdirs[:] = [s for s in subdirs if s.name in keep]

    # -- glob ------------------------------------------------------------------------

    def iterglob_infos(
        self,
        pattern: str,
        recursive: bool = False,
        include_hidden: bool = False,
        bufsize: int | None = None,
        only_files: bool = False,
    ) -> Iterator[BarecatEntryInfo]:
        """Entries matching ``pattern`` exactly as ``glob.glob(pattern, root_dir=tree)``
        would on the extracted tree (up to order and trailing slashes), in path order."""
        compiled = compile_glob(pattern, recursive, include_hidden)
        try:
            base = normalize(compiled.base)
        except InvalidPathBarecatError:
            return
        if compiled.is_literal:
            if not pattern.strip("/"):
                return
            try:
                info = self.lookup(base)
            except FileNotFoundBarecatError:
                return
            if not (compiled.dirs_only and not info.isdir()) and not (only_files and info.isdir()):
                yield info
            return
        if not self.isdir(base):
            return
        compiled = dataclasses.replace(compiled, base=base)
        if compiled.includes_base and not only_files:
            yield self.lookup_dir(base)
        yield from query.matching(compiled, query.glob_candidates(self.conn, compiled, only_files))

    def iterglob_paths(
        self,
        pattern: str,
        recursive: bool = False,
        include_hidden: bool = False,
        bufsize: int | None = None,
        only_files: bool = False,
    ) -> Iterator[str]:
        return (
            i.path
            for i in self.iterglob_infos(pattern, recursive, include_hidden, only_files=only_files)
        )

    def glob_paths(
        self,
        pattern: str,
        recursive: bool = False,
        include_hidden: bool = False,
        only_files: bool = False,
    ) -> list[str]:
        return list(self.iterglob_paths(pattern, recursive, include_hidden, only_files=only_files))

    # -- adding ----------------------------------------------------------------------

    def _translate_integrity_error(
        self, e: sqlite3.IntegrityError, path: str, is_file: bool
    ) -> BarecatError:
        msg = str(e)
        if any(m in msg for m in _DIR_TAKEN):
            return (
                IsADirectoryBarecatError(path)
                if is_file
                else FileExistsBarecatError(path, "Directory")
            )
        if any(m in msg for m in _FILE_TAKEN):
            return NotADirectoryBarecatError(f"A parent of {path!r} is a file")
        if "UNIQUE" in msg:
            return FileExistsBarecatError(path, "File" if is_file else "Directory")
        return BarecatError(f"Index refused {path!r}: {msg}")

    def add_file(self, finfo: BarecatFileInfo) -> None:
        """Insert a file row; ancestors are created by the triggers."""
        self._require_writable()
        f = finfo
        try:
            self.conn.execute(
                "INSERT INTO files (path, shard, offset, size, crc32c, mode, uid, gid, mtime_ns) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (f.path, f.shard, f.offset, f.size, f.crc32c, f.mode, f.uid, f.gid, f.mtime_ns),
            )
        except sqlite3.IntegrityError as e:
            raise self._translate_integrity_error(e, f.path, True) from None
        except sqlite3.OperationalError as e:
            raise _disk_full_or(e, self.path) from e

    def add_files(self, finfos: Iterable[BarecatFileInfo]) -> None:
        for f in finfos:
            self.add_file(f)

    def add_dir(self, dinfo: BarecatDirInfo, exist_ok: bool = False) -> None:
        """Create a directory (and its ancestors); with ``exist_ok`` update its metadata."""
        self._require_writable()
        d = dinfo
        if self.isdir(d.path):
            if not exist_ok and d.path:
                raise FileExistsBarecatError(d.path, "Directory")
            self.conn.execute(
                "UPDATE dirs SET mode = ifnull(?, mode), uid = ifnull(?, uid), "
                "gid = ifnull(?, gid), "
                "mtime_ns = ifnull(?, mtime_ns) WHERE path = ?",
                (d.mode, d.uid, d.gid, d.mtime_ns, d.path),
            )
            return
        try:
            self.conn.execute(
                "INSERT INTO dirs (path, mode, uid, gid, mtime_ns) VALUES (?, ?, ?, ?, ?)",
                (d.path, d.mode, d.uid, d.gid, d.mtime_ns),
            )
        except sqlite3.IntegrityError as e:
            raise self._translate_integrity_error(e, d.path, False) from None

    def add(self, info: BarecatEntryInfo) -> None:
        if isinstance(info, BarecatFileInfo):
            self.add_file(info)
        elif isinstance(info, BarecatDirInfo):
            self.add_dir(info)
        else:
            raise TypeError(f"Expected a file or directory info, got {type(info).__name__}")

    # -- updating --------------------------------------------------------------------

    _FILE_FIELDS = ("shard", "offset", "size", "crc32c", "mtime_ns", "mode", "uid", "gid")

    def update_file(
        self,
        path: str,
        new_shard: int | None = None,
        new_offset: int | None = None,
        new_size: int | None = None,
        new_crc32c: int | None = None,
        new_mtime_ns: int | None = None,
        new_mode: int | None = None,
        new_uid: int | None = None,
        new_gid: int | None = None,
    ) -> None:
        """Change the given fields of a file's row (None = keep)."""
        self._require_writable()
        values = (
            new_shard,
            new_offset,
            new_size,
            new_crc32c,
            new_mtime_ns,
            new_mode,
            new_uid,
            new_gid,
        )
        sets = [(f, v) for f, v in zip(self._FILE_FIELDS, values, strict=False) if v is not None]
        if not sets:
            return
        path = normalize(path)
        sql = "UPDATE files SET " + ", ".join(f"{f} = ?" for f, _ in sets) + " WHERE path = ?"
        if self.conn.execute(sql, (*[v for _, v in sets], path)).rowcount == 0:
            self.lookup_file(path)  # raises the precise error

    def _update_meta(self, path: str, assignments: str, args: tuple[Any, ...]) -> None:
        self._require_writable()
        path = normalize(path)
        for table in ("files", "dirs"):
            if self.conn.execute(
                f"UPDATE {table} SET {assignments} WHERE path = ?", (*args, path)
            ).rowcount:
                return
        raise FileNotFoundBarecatError(path)

    def chmod(self, path: str, mode: int) -> None:
        self._update_meta(path, "mode = ?", (mode,))

    def chown(self, path: str, uid: int, gid: int) -> None:
        self._update_meta(path, "uid = ?, gid = ?", (uid, gid))

    def update_mtime(self, path: str, mtime_ns: int) -> None:
        self._update_meta(path, "mtime_ns = ?", (mtime_ns,))

    # -- removing --------------------------------------------------------------------

    def remove_file(self, item: FileItem) -> None:
        self._require_writable()
        path = _path_of(item)
        if self.conn.execute("DELETE FROM files WHERE path = ?", (path,)).rowcount == 0:
            self.lookup_file(path, normalized=True)

    def remove_files(self, items: Iterable[FileItem]) -> None:
        for item in items:
            self.remove_file(item)

    def remove_empty_dir(self, item: DirItem) -> None:
        self._require_writable()
        d = self.lookup_dir(_path_of(item))
        if not d.path:
            raise InvalidPathBarecatError("The archive root cannot be removed")
        if self.conn.execute(
            "SELECT 1 FROM files WHERE parent = ? "
            "UNION ALL SELECT 1 FROM dirs WHERE parent = ? LIMIT 1",
            (d.path, d.path),
        ).fetchone():
            raise DirectoryNotEmptyBarecatError(d.path)
        self.conn.execute("DELETE FROM dirs WHERE path = ?", (d.path,))

    def remove_recursively(self, item: DirItem) -> None:
        """Remove a directory and everything below it (the root is emptied, not removed)."""
        self._require_writable()
        d = self.lookup_dir(_path_of(item))
        where, args = query.subtree_where(d.path)
        stats = self._subtree_totals(d.path)
        with self.no_triggers():
            self.conn.execute(f"DELETE FROM files{where}", args)
            self.conn.execute(f"DELETE FROM dirs{where or ' WHERE parent IS NOT NULL'}", args)
            if d.path:
                self.conn.execute("DELETE FROM dirs WHERE path = ?", (d.path,))
                self._adjust_ancestors(d.path, -stats[0], -stats[1], subdir_delta=-1)
            else:
                self.conn.execute(
                    "UPDATE dirs SET num_subdirs = 0, num_files = 0, num_files_tree = 0, "
                    "size_tree = 0 "
                    "WHERE path = ''"
                )

    # -- renaming --------------------------------------------------------------------

    def rename(self, old: BarecatEntryInfo | str, new: str, allow_overwrite: bool = False) -> None:
        path = _path_of(old)
        if self.isdir(path):
            self.rename_dir(path, new, allow_overwrite)
        else:
            self.rename_file(path, new, allow_overwrite)

    def _prepare_target(self, new: str, allow_overwrite: bool, moving_dir: bool) -> None:
        if self.isdir(new):
            if not moving_dir:
                raise IsADirectoryBarecatError(new)
            if not allow_overwrite:
                raise FileExistsBarecatError(new, "Directory")
            self.remove_empty_dir(new)
        elif self.isfile(new):
            if moving_dir:
                raise NotADirectoryBarecatError(f"Not a directory: {new}")
            if not allow_overwrite:
                raise FileExistsBarecatError(new)
            self.remove_file(new)
        for a in ancestors(new):
            if self.isfile(a):
                raise NotADirectoryBarecatError(f"A parent of {new!r} is a file")

    def rename_file(self, old: FileItem, new: str, allow_overwrite: bool = False) -> None:
        self._require_writable()
        old_path, new_path = _path_of(old), normalize(new)
        self.lookup_file(old_path, normalized=True)
        if old_path == new_path:
            return
        self._prepare_target(new_path, allow_overwrite, moving_dir=False)
        self.conn.execute("UPDATE files SET path = ? WHERE path = ?", (new_path, old_path))

    def rename_dir(self, old: DirItem, new: str, allow_overwrite: bool = False) -> None:
        """Move a directory and its subtree; statistics are fixed with set updates."""
        self._require_writable()
        d = self.lookup_dir(_path_of(old))
        new_path = normalize(new)
        if not d.path or not new_path:
            raise InvalidPathBarecatError("The archive root cannot be renamed or replaced")
        if d.path == new_path:
            return
        if is_within(new_path, d.path):
            raise InvalidPathBarecatError(f"Cannot move {d.path!r} into itself ({new_path!r})")
        self._prepare_target(new_path, allow_overwrite, moving_dir=True)
        n_files, size = self._subtree_totals(d.path)
        lo, hi = subtree_bounds(d.path)
        cut = len(d.path) + 1
        with self.no_triggers():
            self._adjust_ancestors(d.path, -n_files, -size, subdir_delta=-1)
            for table in ("files", "dirs"):
                self.conn.execute(
                    f"UPDATE {table} SET path = ? || substr(path, ?) WHERE path >= ? AND path < ?",
                    (new_path + "/", cut + 1, lo, hi),
                )
            self.conn.execute("UPDATE dirs SET path = ? WHERE path = ?", (new_path, d.path))
            self._ensure_ancestors(new_path)
            self._adjust_ancestors(new_path, n_files, size, subdir_delta=1)

    # -- statistics ------------------------------------------------------------------

    def _subtree_totals(self, path: str) -> tuple[int, int]:
        return treestats.subtree_totals(self.conn, path)

    def _adjust_ancestors(self, path: str, d_files: int, d_size: int, subdir_delta: int) -> None:
        treestats.adjust_ancestors(self.conn, path, d_files, d_size, subdir_delta)

    def _ensure_ancestors(self, path: str) -> None:
        treestats.ensure_ancestors(self.conn, path)

    def update_dirs(self) -> None:
        """Create every directory that a file or directory implies but that has no row."""
        self._require_writable()
        treestats.insert_missing_dirs(self.conn)

    def update_treestats(self) -> None:
        """Recompute every directory's statistics from the files (after bulk loads)."""
        self._require_writable()
        with self.no_triggers():
            treestats.rewrite_treestats(self.conn)

    def find_inconsistencies(self) -> list[str]:
        """Every way the index disagrees with itself, as human-readable lines."""
        return treestats.find_inconsistencies(self.conn)

    def verify_integrity(self) -> bool:
        """True if SQLite's integrity check passes and all directory statistics are right."""
        return not self.find_inconsistencies()

    def optimize(self) -> None:
        self.conn.execute("PRAGMA optimize")
