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
        """Create one directory; its parent must exist (as ``os.mkdir``)."""
        path = normalize(path)
        if path and not self.index.isdir(parent(path)):
            error = self.index.not_found_error(path)
            if not isinstance(error, NotADirectoryBarecatError):
                error = FileNotFoundBarecatError(parent(path), "Parent directory")
            raise error
        self._add_dir(BarecatDirInfo(path, mode, mtime_ns=time.time_ns()), exist_ok)

    @serialized
    def makedirs(self, path: str, mode: int = 0o755, exist_ok: bool = False) -> None:
        """Create a directory and any missing ancestors (as ``os.makedirs``)."""
        self._add_dir(BarecatDirInfo(normalize(path), mode, mtime_ns=time.time_ns()), exist_ok)

    def _add_dir(self, info: BarecatDirInfo, exist_ok: bool) -> None:
        self._require_writable()
        self._require_no_open_writer()
        self.index.add_dir(info, exist_ok=exist_ok)
        self._maybe_commit()

    @serialized
    def add_dirs(self, infos: Iterable[BarecatDirInfo]) -> None:
        """Create many directories, or update the metadata of existing ones, at once."""
        self._require_writable()
        self._require_no_open_writer()
        dirs = list(infos)
        self.index.upsert_dirs_bulk(dirs)
        self._maybe_commit(len(dirs))

    @serialized
    def remove(self, item: BarecatFileInfo | str) -> None:
        """Delete a file's index row; its bytes stay as a hole until defrag."""
        self._require_changeable()
        self.prepare_file_list_edit()
        self.index.remove_file(item)
        self._maybe_commit()

    @serialized
    def rmdir(self, item: BarecatDirInfo | str) -> None:
        self._require_changeable()
        self.index.remove_empty_dir(item)
        self._maybe_commit()

    @serialized
    def rmtree(self, item: BarecatDirInfo | str) -> None:
        self._require_changeable()
        self.prepare_file_list_edit()
        self.index.remove_recursively(item)
        self._maybe_commit()

    @serialized
    def rename(self, old_path: str, new_path: str) -> None:
        """Move a file or a whole directory; fails if the target exists."""
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
        start = (self.sharder.write_shard, self.sharder.write_offset)
        try:
            places = []
            for f in files:
                target = new + f.path[len(old) :]
                plain = self._sealing.unseal(f.path, self._stored_bytes(f))
                address = self.sharder.append(self._sealing.seal(target, plain))
                self.sharder.commit_append(address)
                places.append((target, *address))
            self.index.rename_with_new_bytes(old, new, places)
        except BaseException:
            self.sharder.rewind(*start)
            raise

    move = rename

    @serialized
    def chmod(self, path: str, mode: int) -> None:
        self._require_writable()
        self.index.chmod(path, mode)

    @serialized
    def chown(self, path: str, uid: int, gid: int) -> None:
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
        """Set the modification time like ``os.utime`` (atime is not stored)."""
        self._require_writable()
        if ns is not None:
            mtime = ns[1]
        elif times is not None:
            mtime = int(times[1] * 1e9)
        else:
            mtime = time.time_ns()
        self.index.update_mtime(path, mtime)


__all__ = ["ArchiveEditing"]
