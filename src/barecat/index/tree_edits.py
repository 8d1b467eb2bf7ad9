"""The index's edits part: edits of whole subtrees, and of the index as a whole.

:class:`IndexEdits` (``index.edits``, only on a writable :class:`~barecat.index.Index`)
adds to :class:`~barecat.index.row_edits.IndexRowEdits` (single rows) the edits that
move or remove many rows by path range (renames of files and directories, removal of a
directory and everything below it), and those of the index as a whole: its sealing
settings, the digest of its file rows, its directory rows and statistics rebuilt. A
directory's subtree moves with a few set-based updates, the statistics triggers off and
the totals of its old and new ancestors shifted instead (``treestats.py``). Imports
``entries``, ``exceptions``, ``paths`` and ``barecat.index``'s own modules.
"""

from __future__ import annotations

from collections.abc import Sequence

from barecat.entries import BarecatEntryInfo
from barecat.exceptions import (
    BarecatError,
    FileExistsBarecatError,
    InvalidPathBarecatError,
    IsADirectoryBarecatError,
    NotADirectoryBarecatError,
)
from barecat.index import file_digest, query, treestats
from barecat.index.connection import open_savepoint
from barecat.index.errors import guard_public_methods
from barecat.index.listing import DirItem, FileItem, path_of
from barecat.index.row_edits import IndexRowEdits
from barecat.index.schema import (
    SEALING_KEY,
    ConfigValue,
    check_version,
    enable_sealing,
    write_config,
)
from barecat.index.transactions import reports_full_disk
from barecat.paths import ancestors, check_depth, is_within, normalize, subtree_bounds


class IndexEdits(IndexRowEdits):
    """Every edit of an index: single rows (the base), renames, subtrees removed, and the
    index as a whole."""

    file_digest_kept = False
    """True once edits of file rows update the stored digest (``keep_file_digest``)."""

    @reports_full_disk
    def remove_recursively(self, item: DirItem) -> None:
        """Remove a directory and everything below it (the root is emptied, not removed).

        Args:
            item: the directory's path or record.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            FileNotFoundBarecatError: no directory is there.
        """
        self.connection.require_writable()
        d = self.lookups.lookup_dir(path_of(item))
        where, args = query.subtree_where(d.path)
        conn = self.settled_conn()
        stats = treestats.subtree_totals(conn, d.path)
        with self.connection.no_triggers():
            conn.execute(f"DELETE FROM files{where}", args)
            conn.execute(f"DELETE FROM dirs{where or ' WHERE parent IS NOT NULL'}", args)
            if d.path:
                conn.execute("DELETE FROM dirs WHERE path = ?", (d.path,))
                treestats.adjust_ancestors(conn, d.path, -stats[0], -stats[1], subdir_delta=-1)
            else:
                conn.execute(
                    "UPDATE dirs SET num_subdirs = 0, num_files = 0, num_files_tree = 0, "
                    "size_tree = 0 "
                    "WHERE path = ''"
                )

    @reports_full_disk
    def rename_with_new_bytes(
        self, old: str, new: str, places: Sequence[tuple[str, int, int, int, int | None]]
    ) -> None:
        """Rename, and point renamed files at new bytes: ``places`` holds (new path, shard,
        offset, size, crc32c) for each. All or nothing (encrypted files are re-sealed for
        their new path, so no row may keep the old bytes).

        Args:
            old: the file or directory to move.
            new: where it goes.
            places: (new path, shard, offset, size, crc32c) of each moved file.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            BarecatError: what :meth:`rename` raises.
        """
        self.connection.require_writable()
        conn = self.settled_conn()
        open_savepoint(conn, "barecat_rename")
        try:
            self.rename(old, new)
            conn.executemany(
                "UPDATE files SET shard = ?, offset = ?, size = ?, crc32c = ? WHERE path = ?",
                [(shard, offset, size, crc, path) for path, shard, offset, size, crc in places],
            )
        except BaseException:
            conn.execute("ROLLBACK TO barecat_rename")
            conn.execute("RELEASE barecat_rename")
            raise
        conn.execute("RELEASE barecat_rename")

    @reports_full_disk
    def rename(self, old: BarecatEntryInfo | str, new: str, allow_overwrite: bool = False) -> None:
        """Move a file (:meth:`rename_file`) or a directory and its subtree
        (:meth:`rename_dir`); missing parents of the new path are created.

        Args:
            old: the file's or directory's path or record.
            new: the new path.
            allow_overwrite: replace a file, or an empty directory, at the new path.

        Raises:
            FileNotFoundBarecatError: nothing is at the old path.
            BarecatError: what :meth:`rename_file` or :meth:`rename_dir` raises.
        """
        path = path_of(old)
        if self.lookups.isdir(path):
            self.rename_dir(path, new, allow_overwrite)
        else:
            self.rename_file(path, new, allow_overwrite)

    def _prepare_target(self, new: str, allow_overwrite: bool, moving_dir: bool) -> None:
        check_depth(new)
        if self.lookups.isdir(new):
            if not moving_dir:
                raise IsADirectoryBarecatError(new)
            if not allow_overwrite:
                raise FileExistsBarecatError(new, "Directory")
            self.remove_empty_dir(new)
        elif self.lookups.isfile(new):
            if moving_dir:
                raise NotADirectoryBarecatError(f"Not a directory: {new}")
            if not allow_overwrite:
                raise FileExistsBarecatError(new)
            self.remove_file(new)
        for a in ancestors(new):
            if self.lookups.isfile(a):
                raise NotADirectoryBarecatError(f"A parent of {new!r} is a file")

    @reports_full_disk
    def rename_file(self, old: FileItem, new: str, allow_overwrite: bool = False) -> None:
        """Move a file; missing parents of the new path are created.

        Args:
            old: the file's path or record.
            new: the new path.
            allow_overwrite: replace a file at the new path.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            FileNotFoundBarecatError: no file is at the old path.
            IsADirectoryBarecatError: a directory is at the old or the new path.
            FileExistsBarecatError: a file is at the new path (without
                ``allow_overwrite``).
            NotADirectoryBarecatError: an ancestor of the new path is a file.
            InvalidPathBarecatError: the new path is too deep.
        """
        self.connection.require_writable()
        old_path, new_path = path_of(old), normalize(new)
        self.lookups.lookup_file(old_path, normalized=True)
        if old_path == new_path:
            return
        self._prepare_target(new_path, allow_overwrite, moving_dir=False)
        self.settled_conn().execute(
            "UPDATE files SET path = ? WHERE path = ?", (new_path, old_path)
        )

    @reports_full_disk
    def rename_dir(self, old: DirItem, new: str, allow_overwrite: bool = False) -> None:
        """Move a directory and its subtree; statistics are fixed with set updates.

        Args:
            old: the directory's path or record.
            new: the new path.
            allow_overwrite: replace an empty directory at the new path.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            FileNotFoundBarecatError: no directory is at the old path.
            FileExistsBarecatError: something is at the new path (without
                ``allow_overwrite``).
            IsADirectoryBarecatError: a file would replace a directory.
            NotADirectoryBarecatError: a directory would replace a file, or an ancestor
                of the new path is a file.
            InvalidPathBarecatError: the root is moved or replaced, a directory is moved
                into itself, or a path gets too deep.
            DirectoryNotEmptyBarecatError: a directory would replace a non-empty one.
        """
        self.connection.require_writable()
        d = self.lookups.lookup_dir(path_of(old))
        new_path = normalize(new)
        if not d.path or not new_path:
            raise InvalidPathBarecatError("The archive root cannot be renamed or replaced")
        if d.path == new_path:
            return
        if is_within(new_path, d.path):
            raise InvalidPathBarecatError(f"Cannot move {d.path!r} into itself ({new_path!r})")
        self._prepare_target(new_path, allow_overwrite, moving_dir=True)
        conn = self.settled_conn()
        deepest = treestats.deepest_below(conn, d.path)
        if deepest is not None:  # the subtree's deepest path, as it would be after the move
            check_depth(new_path + deepest[len(d.path) :])
        n_files, size = treestats.subtree_totals(conn, d.path)
        lo, hi = subtree_bounds(d.path)
        cut = len(d.path) + 1
        with self.connection.no_triggers():
            treestats.adjust_ancestors(conn, d.path, -n_files, -size, subdir_delta=-1)
            for table in ("files", "dirs"):
                conn.execute(
                    f"UPDATE {table} SET path = ? || substr(path, ?) WHERE path >= ? AND path < ?",
                    (new_path + "/", cut + 1, lo, hi),
                )
            conn.execute("UPDATE dirs SET path = ? WHERE path = ?", (new_path, d.path))
            treestats.ensure_ancestors(conn, new_path)
            treestats.adjust_ancestors(conn, new_path, n_files, size, subdir_delta=1)

    def enable_sealing(self, records: dict[str, ConfigValue]) -> None:
        """Make this empty archive a sealed one, described by the ``sealing*`` ``records``
        (see ``schema.enable_sealing``); committed at once.

        Args:
            records: the sealing settings, as config rows.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            SchemaVersionBarecatError: the archive already holds files.
        """
        db = self.connection
        db.require_writable()
        db.commit()
        conn = self.settled_conn()
        enable_sealing(conn, {SEALING_KEY: "1", **records})
        db.schema_version = check_version(conn, self.path)
        db.read_layout()

    def update_sealing_config(self, records: dict[str, ConfigValue]) -> None:
        """Replace ``sealing*`` config rows (a new wrapped key, say); committed at once.

        Args:
            records: the rows to write, each key starting with ``sealing``.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
            BarecatError: the archive is not sealed, or a key is not a sealing one.
        """
        self.connection.require_writable()
        if not self.connection.sealed or any(not k.startswith(SEALING_KEY) for k in records):
            raise BarecatError("Only a sealed archive's sealing settings can be updated")
        conn = self.settled_conn()
        with conn:
            write_config(conn, records)

    def keep_file_digest(self, step: file_digest.Step | None) -> None:
        """Keep the encrypted archive's digest of its file rows (``file_digest``) with
        ``step`` on every connection of this index; None refuses the edits it covers.

        Args:
            step: the digest's step function, or None.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
        """
        self.connection.require_writable()
        self._pool.set_up_each("file_digest", lambda conn: file_digest.install(conn, step))
        self.file_digest_kept = step is not None

    def update_dirs(self) -> None:
        """Create every directory that a file or directory implies but that has no row.

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
        """
        self.connection.require_writable()
        treestats.insert_missing_dirs(self.settled_conn())

    def update_treestats(self) -> None:
        """Recompute every directory's statistics from the files (after bulk loads).

        Raises:
            ReadOnlyBarecatError: the index is open read-only.
        """
        self.connection.require_writable()
        with self.connection.no_triggers():
            treestats.rewrite_treestats(self.settled_conn())


guard_public_methods(IndexEdits, lambda part: part.path)
