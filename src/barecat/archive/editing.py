"""Changing the tree itself rather than file contents: removing files and trees,
renaming (encrypted files are sealed again for their new paths), permissions, owners and
times. The facade's part over its :class:`~barecat.archive.state.OpenArchive`, whose
checks and commit pacing each edit goes through; adding files and directories is
``writing.py``'s.
"""

from __future__ import annotations

import time

from barecat.archive.reading import stored_bytes
from barecat.archive.state import ArchivePart, serialized
from barecat.entries import BarecatDirInfo, BarecatFileInfo
from barecat.paths import normalize


class ArchiveEditing(ArchivePart):
    """Removals, renames and metadata edits of a :class:`~barecat.archive.Barecat`."""

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
        self.archive.require_changeable()
        self.archive.prepare_file_list_edit()
        self.archive.edits.remove_file(item)
        self.archive.maybe_commit()

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
        self.archive.require_changeable()
        self.archive.edits.remove_empty_dir(item)
        self.archive.maybe_commit()

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
        self.archive.require_changeable()
        self.archive.prepare_file_list_edit()
        self.archive.edits.remove_recursively(item)
        self.archive.maybe_commit()

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
        self.archive.require_changeable()
        self.archive.prepare_file_list_edit()
        if self.archive.sealing is not None and self.archive.sealing.encrypted:
            self._rename_resealing(normalize(old_path), normalize(new_path))
        else:
            self.archive.edits.rename(old_path, new_path)
        self.archive.maybe_commit()

    def _rename_resealing(self, old: str, new: str) -> None:
        """Encrypted files are bound to their paths: each renamed file is sealed again for
        its new path (its old bytes become a hole until defrag), rows and all in one step."""
        assert self.archive.sealing is not None
        entry = self.archive.index.lookups.lookup(old)
        files = (
            [entry]
            if isinstance(entry, BarecatFileInfo)
            else list(self.archive.index.listing.files_below(old))
        )
        with self.archive.writes.all_or_nothing():
            places = []
            for f in files:
                target = new + f.path[len(old) :]
                plain = self.archive.sealing.unseal(f.path, stored_bytes(self.archive, f))
                places.append(
                    (target, *self.archive.writes.append(self.archive.sealing.seal(target, plain)))
                )
            self.archive.edits.rename_with_new_bytes(old, new, places)

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
        self.archive.require_writable()
        self.archive.edits.chmod(path, mode)

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
        self.archive.require_writable()
        self.archive.edits.chown(path, uid, gid)

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
        self.archive.require_writable()
        if ns is not None:
            mtime = ns[1]
        elif times is not None:
            mtime = int(times[1] * 1e9)
        else:
            mtime = time.time_ns()
        self.archive.edits.update_mtime(path, mtime)


__all__ = ["ArchiveEditing"]
