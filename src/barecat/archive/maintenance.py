"""Operations over a whole archive rather than a file: its shard size limit, cutting
shards back to what the index references, defragmenting, resharding, repairing, merging
other archives in, taking a subset of another, and changing an encrypted archive's
passphrase. The facade's part over its :class:`~barecat.archive.state.OpenArchive`
(``index``, ``sharder``, the archive's sealing); each operation checks that it may run
(writable, no file open for writing), commits what came before it, then hands the
halves to the tool in ``barecat.ops`` that does the work, and puts the write position
back after the last file. Each returns that tool's full result and takes its progress
callback; barecat 0.3.1's names (``defrag``, ``merge_from_other_barecat``) are thin
wrappers returning what 0.3.1 returned. The CLI calls these, so the conditions around an
operation are kept here, once. Also, for a parallel ingest's parts, sealing an empty
archive with another's records and taking all of another archive's files.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from barecat.archive.state import ArchivePart, serialized
from barecat.entries import parse_size
from barecat.exceptions import BarecatError
from barecat.glob import PathFilter
from barecat.index import writable

if TYPE_CHECKING:  # each op is imported when it runs: opening an archive loads none
    from barecat.index.index import ReadOnlyIndex
    from barecat.index.schema import ConfigValue
    from barecat.ops.copy_files import CopyStats, ProgressCallback
    from barecat.ops.defrag import DefragResult
    from barecat.ops.merge import MergeResult
    from barecat.ops.repair import RepairResult
    from barecat.ops.reshard import ReshardResult
    from barecat.ops.subset import Selection
    from barecat.ops.verify import OnFile
    from barecat.shards.reading import ShardReader


class SourceArchive(Protocol):
    """Another archive that files are taken from: its two halves (an open
    :class:`~barecat.archive.Barecat` is one; the facade imports this module, so this
    one names only what it reads)."""

    @property
    def index(self) -> ReadOnlyIndex:
        """The source's index."""
        ...

    @property
    def sharder(self) -> ShardReader:
        """The source's shards, for reading."""
        ...


class ArchiveMaintenance(ArchivePart):
    """Whole-archive operations of a :class:`~barecat.archive.Barecat`."""

    @serialized
    def set_shard_size_limit(self, value: int | str) -> None:
        """Set the largest size a shard may grow to (the facade's ``shard_size_limit =``);
        existing shards are not reorganized (see :meth:`reshard`).

        Args:
            value: bytes, or a size such as ``'1G'``.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process.
        """
        self.archive.require_writable()
        limit = parse_size(value)
        writable(self.archive.index).connection.shard_size_limit = limit
        self.archive.writes.sharder.shard_size_limit = limit

    @serialized
    def truncate_all_to_logical_size(self) -> None:
        """Cut every shard back to the end of its last indexed file (drops unreferenced tails).

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process.
        """
        self.archive.require_writable()
        ends = [
            self.archive.index.lookups.logical_shard_end(i)
            for i in range(self.archive.sharder.num_shards)
        ]
        self.archive.writes.sharder.truncate_all_to_logical_size(ends)

    @serialized
    def defragment(
        self,
        quick: bool = False,
        time_budget: float = 5.0,
        on_progress: ProgressCallback | None = None,
    ) -> DefragResult:
        """Reclaim the holes left by removed and replaced files. Crash-safe: a kill at any
        moment loses nothing (see ``barecat.ops.defrag``).

        Args:
            quick: only move files from the end into the holes that fit them best,
                within ``time_budget`` seconds (may leave holes).
            time_budget: seconds a quick defrag may take.
            on_progress: called with (files, bytes) as files are moved.

        Returns:
            What moved, what was freed, the shards before and after, files whose
            checksums were already wrong (moved unchanged).

        Raises:
            ReadOnlyBarecatError: not open for writing, or append-only.
        """
        self.archive.require_changeable()
        self.archive.require_no_open_writer()
        self.archive.commit()
        from barecat.ops.defrag import defrag as defrag_archive

        result = defrag_archive(
            writable(self.archive.index),
            self.archive.writes.sharder,
            quick=quick,
            time_budget=time_budget,
            on_progress=on_progress,
        )
        self.archive.writes.resync()
        return result

    def defrag(self, quick: bool = False) -> int:
        """Reclaim the holes left by removed and replaced files (barecat 0.3.1's method);
        :meth:`defragment` gives the full result.

        Args:
            quick: only move files from the end into the holes that fit them best,
                within 5 seconds (may leave holes).

        Returns:
            The number of bytes freed.

        Raises:
            ReadOnlyBarecatError: not open for writing, or append-only.
        """
        return self.defragment(quick).bytes_reclaimed

    @serialized
    def reshard(
        self, shard_size_limit: int | str, on_progress: ProgressCallback | None = None
    ) -> ReshardResult:
        """Reorganize the files into shards of at most ``shard_size_limit`` and store it
        as the archive's limit (holes are squeezed out on the way). Crash-safe.

        Args:
            shard_size_limit: bytes, or a size such as ``'1G'``.
            on_progress: called with (files, bytes) as files are moved.

        Returns:
            A defrag's figures plus the old and new limits.

        Raises:
            ReadOnlyBarecatError: not open for writing, or append-only.
            FileTooLargeBarecatError: a file is larger than the new limit (nothing moved).
        """
        self.archive.require_changeable()
        self.archive.require_no_open_writer()
        self.archive.commit()
        from barecat.ops.reshard import reshard as reshard_archive

        result = reshard_archive(
            writable(self.archive.index),
            self.archive.writes.sharder,
            parse_size(shard_size_limit),
            on_progress=on_progress,
        )
        self.archive.writes.resync()
        return result

    @serialized
    def repair(
        self, drop_bad: bool = False, workers: int = 1, on_file: OnFile | None = None
    ) -> RepairResult:
        """Cut shard tails no file uses, rebuild directory data, find the files whose
        bytes are missing or corrupt (and with ``drop_bad`` remove them from the index).

        Args:
            drop_bad: remove bad files from the index.
            workers: threads computing checksums.
            on_file: called with each file's record once its bytes are checked.

        Returns:
            What was cut, fixed, found and dropped, and the problems left.

        Raises:
            ReadOnlyBarecatError: not open for writing.
        """
        self.archive.require_writable()
        self.archive.require_no_open_writer()
        if drop_bad:
            self.archive.prepare_file_list_edit()
        self.archive.commit()
        from barecat.ops.repair import repair as repair_archive

        result = repair_archive(
            writable(self.archive.index),
            self.archive.writes.sharder,
            drop_bad=drop_bad,
            workers=workers,
            on_file=on_file,
        )
        self.archive.writes.resync()
        return result

    @serialized
    def merge(
        self,
        sources: Sequence[str],
        *,
        ignore_duplicates: bool = False,
        symlink: bool = False,
        prefix: str = "",
        as_subdirs: bool = False,
        pattern: str | None = None,
        path_filter: PathFilter | None = None,
        on_progress: ProgressCallback | None = None,
        on_input: Callable[[str, int], None] | None = None,
    ) -> MergeResult:
        """Copy other archives' files in (or, ``symlink``, link their shards), each input
        whole or not at all (see ``barecat.ops.merge``).

        Args:
            sources: the archives, in order; the first to have a path keeps it.
            ignore_duplicates: skip a file whose path is taken (default: raise).
            symlink: link the inputs' shards instead of copying bytes.
            prefix: put everything under this directory.
            as_subdirs: put each input in a directory named after it.
            pattern: only files matching this glob.
            path_filter: only what these include/exclude rules choose.
            on_progress: called with (files, bytes) as files are copied.
            on_input: called with (input path, its number of files) as each starts.

        Returns:
            Totals over all inputs, and each input's own.

        Raises:
            FileExistsBarecatError: a path is taken (without ``ignore_duplicates``); the
                inputs before the one that has it stay merged.
            MergeConflictBarecatError: a file where this archive has a directory, or the
                reverse.
            BarecatIntegrityError: an encrypted input's file rows fail its index digest
                (checked with the key, before anything of it is taken).
        """
        self.archive.require_writable()
        self.archive.require_no_open_writer()
        self.archive.prepare_file_list_edit()
        self.archive.commit()
        from barecat.ops.merge import merge_archives

        result = merge_archives(
            writable(self.archive.index),
            self.archive.writes.sharder,
            sources,
            ignore_duplicates=ignore_duplicates,
            symlink=symlink,
            prefix=prefix,
            as_subdirs=as_subdirs,
            pattern=pattern,
            path_filter=path_filter,
            on_progress=on_progress,
            on_input=on_input,
            seal_like=self.archive.seal_like,
            check_source=self.archive.check_source_rows,
        )
        self.archive.writes.resync()
        return result

    @serialized
    def take_subset(
        self,
        source: SourceArchive,
        selection: Selection | None,
        on_progress: ProgressCallback | None = None,
    ) -> CopyStats:
        """Copy the chosen entries of another archive in (see ``barecat.ops.subset``).

        Args:
            source: the archive to copy from (open for reading).
            selection: what to take, from ``source.select_entries``; None: everything.
            on_progress: called with (files, bytes) as files are copied.

        Returns:
            Files and bytes copied.

        Raises:
            FileExistsBarecatError: a chosen path is taken here.
            BarecatIntegrityError: an encrypted source's file rows fail its index digest
                (checked with the key, before anything is taken).
        """
        self.archive.require_writable()
        self.archive.require_no_open_writer()
        self.archive.prepare_file_list_edit()
        self.archive.commit()
        from barecat.ops.subset import subset_archive

        stats = subset_archive(
            source.index,
            source.sharder,
            writable(self.archive.index),
            self.archive.writes.sharder,
            selection,
            on_progress,
            seal_like=self.archive.seal_like,
            check_source=self.archive.check_source_rows,
        )
        self.archive.writes.resync()
        return stats

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
        path_filter = PathFilter.from_rules(filter_rules) if filter_rules else None
        self.merge(
            [source_path],
            ignore_duplicates=ignore_duplicates,
            prefix=prefix,
            pattern=pattern,
            path_filter=path_filter,
        )

    @serialized
    def rekey(self, new_passphrase: str | bytes) -> None:
        """Change the passphrase of an encrypted archive: its data key is rewrapped, no
        file is rewritten. The archive must be open for writing with the old one.

        Args:
            new_passphrase: the new passphrase.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, or it is not encrypted,
                or the old passphrase is missing.
            WrongPassphraseBarecatError: the old passphrase is wrong.
        """
        self.archive.require_writable()
        if self.archive.sealing is None:
            raise BarecatError(
                f"{self.archive.path} is not encrypted: it has no passphrase to change"
            )
        self.archive.commit()
        self.archive.edits.update_sealing_config(self.archive.sealing.rekeyed(new_passphrase))
        self.archive.sealing.rekey_written()

    def reset_index_digest(self) -> None:
        """Make an encrypted archive's index digest that of its file rows as they are now,
        trusting them: for an archive encrypted before digests existed, or one whose rows
        were checked otherwise after its digest failed. Needs the passphrase.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            BarecatError: the archive is closed or was opened for writing in another
                process, or it is not encrypted,
                or no passphrase.
            WrongPassphraseBarecatError: the passphrase is wrong.
        """
        self.archive.require_writable()
        if self.archive.sealing is None or not self.archive.sealing.encrypted:
            raise BarecatError(f"{self.archive.path} is not encrypted: it keeps no index digest")
        self.archive.commit()
        self.archive.edits.update_sealing_config(self.archive.sealing.rekeyed(reset_digest=True))
        self.archive.sealing.rekey_written()

    # -- for transfer/ (so it need not reach into the index) ---------------------------

    @serialized
    def seal_with_records(self, records: dict[str, ConfigValue]) -> None:
        """Make this empty plain archive sealed with another's :meth:`sealing_records` as
        they are (the parts of a parallel ingest, whose bytes then move into that one
        unchanged); committed at once, in effect when the archive is next opened.

        Raises:
            ReadOnlyBarecatError: the archive is open read-only.
            SchemaVersionBarecatError: the archive has files.
        """
        self.archive.require_writable()
        self.archive.edits.enable_sealing(records)

    @serialized
    def take_all_from(self, src: SourceArchive) -> CopyStats:
        """Move every file and directory of ``src`` into this archive: ``src``'s shards'
        bytes are moved (not copied) behind ours and its rows inserted in one statement;
        ``src`` is consumed. For archives written to become part of this one (sealed
        alike, see :meth:`seal_with_records`).

        Returns:
            What was taken.

        Raises:
            ReadOnlyBarecatError: this archive is open read-only.
            BarecatError: the two archives' sealings differ, or a path conflicts.
        """
        from barecat.ops.copy_files import copy_files_from

        archive = self.archive
        archive.require_writable()
        return copy_files_from(
            writable(archive.index), archive.writes.sharder, src.index, src.sharder, move=True
        )


__all__ = ["ArchiveMaintenance", "SourceArchive"]
