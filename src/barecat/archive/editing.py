"""Changing the tree itself rather than file contents: creating directories, removing
files and trees, renaming (encrypted files are sealed again for their new paths),
permissions, owners and times. A mixin over what the facade holds (``index``,
``sharder``, the archive's sealing); the facade supplies the write checks and the commit
pacing it calls (``ArchiveContract``), and keeps what couples new bytes to their rows.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from barecat.archive.contract import ArchiveContract, serialized
from barecat.entries import BarecatDirInfo, BarecatFileInfo
from barecat.exceptions import FileNotFoundBarecatError, NotADirectoryBarecatError
from barecat.paths import normalize, parent


class ArchiveEditing(ArchiveContract):
    """New directories, removals, renames and metadata edits of a
    :class:`~barecat.archive.Barecat`."""

    # Supplied by the read mixin.
    def _stored_bytes(self, f: BarecatFileInfo) -> bytes:
        raise NotImplementedError

    @serialized
    def mkdir(self, path: str, mode: int = 0o755, exist_ok: bool = False) -> None:
        """Create one directory; its parent must exist (as ``os.mkdir``).

        Args:
            path: the directory's path in the archive.
            mode: its permission bits.
            exist_ok: update the mode and time of an existing directory instead of raising.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, or a file opened for writing is still open.
            FileNotFoundBarecatError: the parent directory does not exist.
            NotADirectoryBarecatError: the parent, or one of its ancestors, is a file.
            FileExistsBarecatError: the directory exists and ``exist_ok`` is False, or
                a file is at ``path``.
        """
        path = normalize(path)
        if path and not self.index.isdir(parent(path)):
            error = self.index.not_found_error(path)
            if not isinstance(error, NotADirectoryBarecatError):
                error = FileNotFoundBarecatError(parent(path), "Parent directory")
            raise error
        self._add_dir(BarecatDirInfo(path, mode, mtime_ns=time.time_ns()), exist_ok)

    @serialized
    def makedirs(self, path: str, mode: int = 0o755, exist_ok: bool = False) -> None:
        """Create a directory and any missing ancestors (as ``os.makedirs``).

        Args:
            path: the directory's path in the archive.
            mode: its permission bits (the ancestors made get the default).
            exist_ok: update the mode and time of an existing directory instead of raising.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, or a file opened for writing is still open.
            FileExistsBarecatError: the directory exists and ``exist_ok`` is False, or
                a file is at ``path``.
            NotADirectoryBarecatError: an ancestor is a file.
        """
        self._add_dir(BarecatDirInfo(normalize(path), mode, mtime_ns=time.time_ns()), exist_ok)

    def _add_dir(self, info: BarecatDirInfo, exist_ok: bool) -> None:
        self._require_writable()
        self._require_no_open_writer()
        self.index.add_dir(info, exist_ok=exist_ok)
        self._maybe_commit()

    @serialized
    def add_dirs(self, infos: Iterable[BarecatDirInfo]) -> None:
        """Create many directories, or update the metadata of existing ones, at once.

        Missing ancestors are created too; all or nothing.

        Args:
            infos: the directories' records; None fields of an existing directory keep
                their stored values.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, or a file opened for writing is still open.
            FileExistsBarecatError: a file is at one of the paths.
            NotADirectoryBarecatError: an ancestor of one of the paths is a file.
        """
        self._require_writable()
        self._require_no_open_writer()
        dirs = list(infos)
        self.index.upsert_dirs_bulk(dirs)
        self._maybe_commit(len(dirs))

    @serialized
    def remove(self, item: BarecatFileInfo | str) -> None:
        """Delete a file's index row; its bytes stay as a hole until defrag.

        Args:
            item: the file's path or record.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only or append-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, or (encrypted) the passphrase is missing.
            BarecatIntegrityError: the index digest of an encrypted archive failed its
                check.
            FileNotFoundBarecatError: no file is there.
            IsADirectoryBarecatError: a directory is there.
        """
        self._require_changeable()
        self.prepare_file_list_edit()
        self.index.remove_file(item)
        self._maybe_commit()

    @serialized
    def rmdir(self, item: BarecatDirInfo | str) -> None:
        """Remove an empty directory (as ``os.rmdir``).

        Args:
            item: the directory's path or record.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only or append-only.
            BarecatError: the archive is closed or was opened for writing in another
                process.
            FileNotFoundBarecatError: no directory is there (a
                ``NotADirectoryLookupBarecatError`` when an ancestor is a file).
            InvalidPathBarecatError: ``item`` is the root.
            DirectoryNotEmptyBarecatError: the directory holds files or directories.
        """
        self._require_changeable()
        self.index.remove_empty_dir(item)
        self._maybe_commit()

    @serialized
    def rmtree(self, item: BarecatDirInfo | str) -> None:
        """Remove a directory and everything below it (as ``shutil.rmtree``); the root
        is emptied, not removed. Removed files' bytes stay as holes until defrag.

        Args:
            item: the directory's path or record (``""``: the root).

        Raises:
            ReadOnlyBarecatError: the archive is open read-only or append-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, or (encrypted) the passphrase is missing.
            BarecatIntegrityError: the index digest of an encrypted archive failed its
                check.
            FileNotFoundBarecatError: no directory is there (a
                ``NotADirectoryLookupBarecatError`` when an ancestor is a file).
        """
        self._require_changeable()
        self.prepare_file_list_edit()
        self.index.remove_recursively(item)
        self._maybe_commit()

    @serialized
    def rename(self, old_path: str, new_path: str) -> None:
        """Move a file or a whole directory; fails if the target exists. In an encrypted
        archive each moved file is sealed again for its new path (its old bytes become a
        hole until defrag). ``move`` is the same method.

        Args:
            old_path: the file or directory to move.
            new_path: where it goes; missing parent directories are created.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only or append-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, or (encrypted) the passphrase is missing.
            BarecatIntegrityError: the index digest of an encrypted archive failed its
                check.
            FileNotFoundBarecatError: nothing is at ``old_path``.
            FileExistsBarecatError: something is at ``new_path``.
            IsADirectoryBarecatError: a file would replace a directory.
            NotADirectoryBarecatError: a directory would replace a file, or an ancestor
                of ``new_path`` is a file.
            InvalidPathBarecatError: the root is moved or replaced, or a directory is
                moved into itself.
        """
        self._require_changeable()
        self.prepare_file_list_edit()
        if self._sealing is not None and self._sealing.encrypted:
            self._rename_resealing(normalize(old_path), normalize(new_path))
        else:
            self.index.rename(old_path, new_path)
        self._maybe_commit()

    def _rename_resealing(self, old: str, new: str) -> None:
        """Encrypted files are bound to their paths: each renamed file is sealed again for
        its new path (its old bytes become a hole until defrag), rows and all in one step."""
        assert self._sealing is not None
        entry = self.index.lookup(old)
        files = (
            [entry]
            if isinstance(entry, BarecatFileInfo)
            else list(self.index.listing.files_below(old))
        )
        with self._writes.all_or_nothing():
            places = []
            for f in files:
                target = new + f.path[len(old) :]
                plain = self._sealing.unseal(f.path, self._stored_bytes(f))
                places.append((target, *self._writes.append(self._sealing.seal(target, plain))))
            self.index.rename_with_new_bytes(old, new, places)

    move = rename

    @serialized
    def chmod(self, path: str, mode: int) -> None:
        """Set a file's or directory's permission bits (as ``os.chmod``).

        Args:
            path: the file or directory.
            mode: the new permission bits.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process.
            FileNotFoundBarecatError: nothing is at ``path`` (a
                ``NotADirectoryLookupBarecatError`` when an ancestor is a file).
        """
        self._require_writable()
        self.index.chmod(path, mode)

    @serialized
    def chown(self, path: str, uid: int, gid: int) -> None:
        """Set a file's or directory's owner and group (as ``os.chown``).

        Args:
            path: the file or directory.
            uid: the new owner's user id.
            gid: the new group id.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process.
            FileNotFoundBarecatError: nothing is at ``path`` (a
                ``NotADirectoryLookupBarecatError`` when an ancestor is a file).
        """
        self._require_writable()
        self.index.chown(path, uid, gid)

    @serialized
    def utime(
        self,
        path: str,
        times: tuple[float, float] | None = None,
        *,
        ns: tuple[int, int] | None = None,
    ) -> None:
        """Set the modification time like ``os.utime`` (atime is not stored).

        Args:
            path: the file or directory.
            times: (atime, mtime) in seconds; only mtime is used.
            ns: (atime, mtime) in nanoseconds; wins over ``times``. Neither: now.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process.
            FileNotFoundBarecatError: nothing is at ``path`` (a
                ``NotADirectoryLookupBarecatError`` when an ancestor is a file).
        """
        self._require_writable()
        if ns is not None:
            mtime = ns[1]
        elif times is not None:
            mtime = int(times[1] * 1e9)
        else:
            mtime = time.time_ns()
        self.index.update_mtime(path, mtime)


__all__ = ["ArchiveEditing"]
