"""Operations over a whole archive rather than a file: its shard size limit, cutting
shards back to what the index references, defragmenting, merging other archives in, and
changing an encrypted archive's passphrase. A mixin over what the facade holds
(``index``, ``sharder``, the archive's sealing); each operation commits what came before
it, then hands the halves to the tool in ``barecat.ops`` that does the work, and puts the
write position back after the last file.
"""

from __future__ import annotations

from barecat.archive.contract import ArchiveContract, serialized
from barecat.exceptions import BarecatError
from barecat.glob import PathFilter
from barecat.sizes import parse_size


class ArchiveMaintenance(ArchiveContract):
    """Whole-archive operations of a :class:`~barecat.archive.Barecat`."""

    @property
    def shard_size_limit(self) -> int:
        return self.index.shard_size_limit

    @shard_size_limit.setter
    @serialized
    def shard_size_limit(self, value: int | str) -> None:
        self._require_writable()
        limit = parse_size(value)
        self.index.shard_size_limit = limit
        self.sharder.shard_size_limit = limit

    @serialized
    def truncate_all_to_logical_size(self) -> None:
        """Cut every shard back to the end of its last indexed file (drops unreferenced tails)."""
        self._require_writable()
        ends = [self.index.logical_shard_end(i) for i in range(self.sharder.num_shards)]
        self.sharder.truncate_all_to_logical_size(ends)

    @serialized
    def defrag(self, quick: bool = False) -> int:
        """Reclaim the holes left by removed and replaced files (the reference's method);
        returns the bytes freed. Crash-safe: see ``barecat.ops.defrag``."""
        self._require_changeable()
        self._require_no_open_writer()
        self.commit()
        from barecat.ops.defrag import defrag as defrag_archive  # when used: ops load lazily

        result = defrag_archive(self.index, self.sharder, quick=quick)
        self._resync_write_position()
        return result.bytes_reclaimed

    @serialized
    def merge_from_other_barecat(
        self,
        source_path: str,
        ignore_duplicates: bool = False,
        prefix: str = "",
        pattern: str | None = None,
        filter_rules: list[tuple[str, str]] | None = None,
    ) -> None:
        """Copy another archive's files in (the reference's method).

        Args:
            source_path: the archive to take files from.
            ignore_duplicates: skip a file whose path this archive has (default: raise).
            prefix: put everything under this directory.
            pattern: only files matching this glob.
            filter_rules: ``('+', pattern)`` includes and ``('-', pattern)`` excludes,
                rsync's way: the first rule that matches a path or one of its
                directories decides; a path no rule matches is taken.

        Raises:
            FileExistsBarecatError: a path is taken (without ``ignore_duplicates``).
            IsADirectoryBarecatError: a source file where this archive has a directory
                (also a ``ValueError``, as barecat 0.3.1 raised).
            NotADirectoryBarecatError: a directory the source needs (or the prefix) is a
                file here (also a ``ValueError``).
        """
        self._require_writable()
        self._require_no_open_writer()
        path_filter = PathFilter.from_rules(filter_rules) if filter_rules else None
        self.prepare_file_list_edit()
        self.commit()
        from barecat.ops.merge import merge_archives  # when used: ops load lazily

        merge_archives(
            self.index,
            self.sharder,
            [source_path],
            ignore_duplicates=ignore_duplicates,
            prefix=prefix,
            pattern=pattern,
            path_filter=path_filter,
            seal_like=self.seal_like,
        )
        self._resync_write_position()

    @serialized
    def rekey(self, new_passphrase: str | bytes) -> None:
        """Change the passphrase of an encrypted archive: its data key is rewrapped, no
        file is rewritten. The archive must be open for writing with the old one."""
        self._require_writable()
        if self._sealing is None:
            raise BarecatError(f"{self.path} is not encrypted: it has no passphrase to change")
        self.commit()
        self.index.update_sealing_config(self._sealing.rekeyed(new_passphrase))
        self._sealing.rekey_written()

    def reset_index_digest(self) -> None:
        """Make an encrypted archive's index digest that of its file rows as they are now,
        trusting them: for an archive encrypted before digests existed, or one whose rows
        were checked otherwise after its digest failed. Needs the passphrase.

        Raises:
            BarecatError: not encrypted, or no passphrase.
        """
        self._require_writable()
        if self._sealing is None or not self._sealing.encrypted:
            raise BarecatError(f"{self.path} is not encrypted: it keeps no index digest")
        self.commit()
        self.index.update_sealing_config(self._sealing.rekeyed(reset_digest=True))
        self._sealing.rekey_written()


__all__ = ["ArchiveMaintenance"]
