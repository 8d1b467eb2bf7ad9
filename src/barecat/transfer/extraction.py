"""Archives written back to directory trees: bytes, metadata, empty directories, links.

Extraction restores what the index knows: file bytes (CRC32C-verified before the file is
created, in storage order so the shards are read sequentially), permission bits, owners
(when run as root, as tar does), mtimes of files and directories, empty directories, and
symbolic links; blocks of zeros become holes (:mod:`barecat.kernels.sparse`, as ``tar -S``).
It is defensive against hostile archives: every destination is checked to
lie in the target directory before anything is written, files are opened without
following a final symlink, and links are created only after all files, so no entry can be
written through a link. A link that would lead outside the target directory (walked as
the kernel walks it, through the links on disk and all those the run makes:
:mod:`barecat.transfer.link_walk`) is not made unless asked. Like tar, it goes on past an
entry that fails (damaged bytes, a name the file system refuses, something in the way),
recording why, and restores the directories' metadata at the end whatever failed. Files
that share their bytes and agree on their metadata (``BarecatFileInfo.hard_link_key``: a
hard link that ``create`` or tar conversion stored once) become names of one file again,
made with ``os.link`` when the first of them is written. Uses
only the public :class:`Barecat` API; never prints.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import io
import os
import shutil
import stat
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO, cast

from barecat.archive import Barecat
from barecat.checksum import crc32c
from barecat.entries import BarecatDirInfo, BarecatEntryInfo, BarecatFileInfo, Order
from barecat.exceptions import BarecatError, InvalidPathBarecatError, NotADirectoryBarecatError
from barecat.glob import PathFilter
from barecat.kernels.sparse import SparseWriter, write_all
from barecat.paths import is_within, join
from barecat.shards.reading import COPY_CHUNK
from barecat.transfer.kernel_extraction import kernel_rows, write_plain_files
from barecat.transfer.link_walk import outside_link_error
from barecat.transfer.symlink_making import make_links

_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(slots=True)
class ExtractResult:
    """What was written, and what was not: entries that failed (path in the archive,
    reason), and links not made because they point outside the target (path, target)."""

    files: int = 0
    bytes: int = 0
    links: int = 0
    failures: list[tuple[str, Exception]] = field(default_factory=list)
    outside_links: list[tuple[str, str]] = field(default_factory=list)


class _Runs:
    """Small files that lie back to back in a shard, read with one read per run.

    Extraction writes files in storage order; where consecutive files follow each other
    in a shard (as ``create`` lays them out), up to ``len(buffer)`` bytes of them are
    read at once into the buffer and each file's slice is checked against its CRC32C
    before it is handed out. Anything else (a damaged row, a file alone in its run, a
    short read, a CRC that does not match) gets None, and the caller reads that file on
    its own, which names what is wrong. Plain archives only (a sealed file is unsealed).
    """

    def __init__(self, bc: Barecat, files: list[BarecatFileInfo], buffer: memoryview) -> None:
        self.sharder = bc.sharder
        self.files = files
        self.order = {id(f): k for k, f in enumerate(files)}
        self.buffer = buffer
        self.first = self.end = 0
        """The run last tried: ``files[first:end]``, in the buffer at ``places[k - first]``
        (start, size) if it was read, else ``places`` is empty."""
        self.places: list[tuple[int, int]] = []

    def take(self, f: BarecatFileInfo) -> memoryview | None:
        """``f``'s bytes, verified, or None: read it on its own."""
        k = self.order.get(id(f))
        if k is None:
            return None
        if not self.first <= k < self.end:
            self._load(k)
        if not self.first <= k < self.first + len(self.places):
            return None
        at, size = self.places[k - self.first]
        view = self.buffer[at : at + size]
        return view if crc32c(view) == f.crc32c else None

    def _load(self, k: int) -> None:
        """Read the run that starts with ``files[k]``. If there is none, or it cannot be
        read, its files are left to their own reads (``places`` empty)."""
        self.first, self.end, self.places = k, k + 1, []
        files, room = self.files, len(self.buffer)
        run_shard, start = files[k].shard, files[k].offset
        if type(run_shard) is not int or type(start) is not int:
            return
        end, j = start, k
        places: list[tuple[int, int]] = []
        while j < len(files):
            g = files[j]
            size = g.size
            if type(size) is not int or size < 0 or type(g.crc32c) is not int:
                break  # a damaged row: read on its own, which names it
            if size:
                if g.shard != run_shard or g.offset != end or end + size - start > room:
                    break
                places.append((end - start, size))
                end += size
            else:
                places.append((0, 0))  # (an empty file may be parked anywhere)
            j += 1
        if j - k < 2:
            return  # alone: the caller's own read costs the same
        self.end = j
        try:
            self.sharder.readinto_from_address(run_shard, start, self.buffer[: end - start])
        except (BarecatError, OSError):
            return  # (short: each file's own read names what is missing; tried once a run)
        self.places = places


class DirectoryWriter:
    """Safe writes of archive entries below one target directory (shared with sync).

    Destinations are checked to stay below ``root``, files are opened without following a
    final link, links in the way are replaced instead of written through, and links
    leading outside ``root`` are not made (listed in ``result.outside_links``) unless
    allowed; links are made last, all of a run together (:func:`make_links`). A file is
    created only once its bytes are verified, and removed if writing it fails, so no
    partial or empty file is left in its place.
    """

    def __init__(
        self, bc: Barecat, root: str, allow_outside_links: bool, owners: bool, base: str = ""
    ) -> None:
        self.bc = bc
        self.root = root
        self.base = base
        """The archive directory written as ``root`` (entries land at paths relative to it)."""
        self.allow_outside_links = allow_outside_links
        self.owners = owners
        self.result = ExtractResult()
        self.safe_dirs: set[str] = {root}
        self._prefix = root if root.endswith(os.sep) else root + os.sep
        self.created_dirs: set[str] = set()
        """Directories this writer made (mode 700 until their metadata is restored)."""
        self.umask = process_umask()
        self.euid, self.egid = os.geteuid(), os.getegid()
        self.file_gids: dict[str, int] = {}
        """Per directory, the group a file created in it gets (see ``_files_gid``)."""
        self._buffer = memoryview(bytearray(COPY_CHUNK))
        self.runs: _Runs | None = None
        """Set by :meth:`read_in_runs`."""

    def read_in_runs(self, files: list[BarecatFileInfo]) -> None:
        """Read ``files``, about to be written in this order, a run at a time where they
        lie back to back in a shard (plain archives; sealed files are read one by one)."""
        if not self.bc.sealed:
            self.runs = _Runs(self.bc, files, memoryview(bytearray(COPY_CHUNK)))

    def ensure_dir(self, dest: str) -> None:
        """Make ``dest`` a real directory chain below the root, as tar does: a symbolic
        link in the way (left by an earlier extraction) is replaced, never followed."""
        if dest in self.safe_dirs:
            return
        parent = _parent(dest)
        self.ensure_dir(parent)
        try:
            os.mkdir(dest, 0o700)  # (never follows a link: one in the way is EEXIST)
        except FileExistsError:
            st = os.lstat(dest)
            if stat.S_ISLNK(st.st_mode):
                os.unlink(dest)
                os.mkdir(dest, 0o700)
            elif not stat.S_ISDIR(st.st_mode):
                raise NotADirectoryError(errno.ENOTDIR, "a file is in the way", dest) from None
            else:
                self.safe_dirs.add(dest)
                return
        self.created_dirs.add(dest)
        if self.owners:  # a new directory has its parent's group rule (no stat of its own)
            self.file_gids[dest] = self.files_gid(parent)
        self.safe_dirs.add(dest)

    def destination(self, path: str) -> str:
        if not is_within(path, self.base):
            raise InvalidPathBarecatError(f"Archive entry {path!r} is not under {self.base!r}")
        relative = path[len(self.base) + 1 :] if self.base else path
        probe = f"/{relative}/"
        if len(probe) > 2 and "//" not in probe and "/./" not in probe and "/../" not in probe:
            return self._prefix + relative  # no empty, '.' or '..' part: normpath's own result
        dest = os.path.normpath(os.path.join(self.root, relative))
        if not self.inside(dest):
            raise InvalidPathBarecatError(
                f"Archive entry {path!r} would be written outside {self.root}"
            )
        return dest

    def inside(self, dest: str) -> bool:
        return dest == self.root or dest.startswith(self.root + os.sep)

    def attempt(self, path: str, action: Callable[[], bool | None]) -> bool:
        """Run ``action`` for the entry ``path``; if it fails, record why and go on.

        Returns:
            True if it succeeded (and did not return False: nothing to do).
        """
        try:
            done = action()
        except (OSError, BarecatError) as e:
            self.result.failures.append((path, self.restated(path, e)))
            return False
        return done is not False

    def write_entry(self, f: BarecatFileInfo, dest: str) -> bool:
        """Write the file or link ``f`` at ``dest`` (a :meth:`destination`), its directories
        made first; if that fails, record why (as :meth:`attempt` does) and go on.

        Returns:
            True if it was written (False also for a link not made: it points outside).
        """
        try:
            parent = _parent(dest)
            if parent not in self.safe_dirs:
                self.ensure_dir(parent)
            mode = f.mode
            if mode is not None and stat.S_ISLNK(mode):
                made: list[int] = []
                self.make_links([(f, dest)], made.append)
                return bool(made)
            return self.write_file(f, dest)
        except (OSError, BarecatError) as e:
            self.result.failures.append((f.path, self.restated(f.path, e)))
            return False

    def restated(self, path: str, error: Exception) -> Exception:
        """An error of the operating system named by the entry's archive path (its reason
        naming the directory that failed, if that is what did) instead of a disk path."""
        if isinstance(error, BarecatError) or not isinstance(error, OSError):
            return error
        reason = error.strerror or str(error)
        failed = str(error.filename) if error.filename is not None else None
        if failed is not None and failed != self.destination(path) and self.inside(failed):
            reason = f"directory {os.path.relpath(failed, self.root)}: {reason}"
        restated = OSError(error.errno, reason, path)
        restated.__cause__ = error
        return restated

    def metadata(self, dest: str, info: BarecatEntryInfo, link: bool = False) -> None:
        """Owner (if restoring owners), mode and mtime of ``info`` given to ``dest``. With
        no mode stored (the reference's archives), what this writer made gets the mode
        new files and directories get (0666 and 0777 less the umask), as tar does."""
        if self.owners and info.uid is not None and info.gid is not None:
            os.chown(dest, info.uid, info.gid, follow_symlinks=not link)
        mode = info.mode
        if mode is None and isinstance(info, BarecatFileInfo):
            mode = 0o666 & ~self.umask
        elif mode is None and dest in self.created_dirs:
            mode = 0o777 & ~self.umask
        if mode is not None and not link:
            os.chmod(dest, stat.S_IMODE(mode))
        if info.mtime_ns is not None:
            os.utime(dest, ns=(info.mtime_ns, info.mtime_ns), follow_symlinks=not link)

    def write_file(self, f: BarecatFileInfo, dest: str) -> bool:
        """Write one file, verified before it is created; removed again if writing fails.

        A file that fits the writer's buffer is read into it (no bytes object per file)
        and written with one ``os.write``; its metadata goes through the descriptor, and
        the mode and owner only where creating the file did not already give them.
        """
        size = f.size
        if type(size) is not int or size > COPY_CHUNK:  # (a damaged row: read names it)
            with open_verified(self.bc, f) as source:
                return self._write_new(f, dest, source)
        view = None if self.runs is None else self.runs.take(f)
        if view is None:
            view = self._buffer[:size]
            self.bc.readinto(f, view)  # CRC32C-verified (sealed: authenticated) before creating
        return self._write_new(f, dest, view)

    def _write_new(self, f: BarecatFileInfo, dest: str, data: memoryview | BinaryIO) -> bool:
        """Create ``dest``, write ``data`` (verified bytes, or a verified stream) to it, give
        it ``f``'s metadata through the descriptor; removed again if any of that fails.

        A new file is made with its final permission bits when the umask and special bits
        let it, and is the process's, in the group it got: then it needs no chmod or
        chown. One that was there keeps its own bits until they are set here.
        """
        mode, umask = f.mode, self.umask
        bits = 0o666 if mode is None else mode & 0o777
        try:
            fd, fresh = os.open(dest, _NEW_FLAGS, bits), True
        except FileExistsError:
            fd, fresh = self._reopen(dest, bits)
        try:
            if isinstance(data, memoryview):
                write_all(fd, data)  # (zero blocks left as holes, as tar -S does)
            else:
                sparse = SparseWriter(fd)
                while chunk := data.read(COPY_CHUNK):
                    sparse.write(chunk)
                sparse.finish()
            uid, gid = f.uid, f.gid
            if (
                self.owners
                and uid is not None
                and gid is not None
                and (not fresh or uid != self.euid or gid != self.files_gid(_parent(dest)))
            ):
                os.fchown(fd, uid, gid)
            wanted = 0o666 & ~umask if mode is None else mode & 0o7777
            if not fresh or wanted != bits & ~umask:
                os.fchmod(fd, wanted)
            if f.mtime_ns is not None:
                os.utime(fd, ns=(f.mtime_ns, f.mtime_ns))
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(dest)
            raise
        finally:
            os.close(fd)
        self.result.files += 1
        self.result.bytes += f.size or 0
        return True

    def write_hard_link(self, f: BarecatFileInfo, dest: str, existing: str) -> bool:
        """Make ``dest`` another name of ``existing``, the file this run wrote for an entry
        sharing ``f``'s bytes and metadata; what is at ``dest`` (not a directory) is
        replaced. A failure is recorded (False), as :meth:`write_entry` does."""

        def make() -> None:
            parent = _parent(dest)
            if parent not in self.safe_dirs:
                self.ensure_dir(parent)
            try:
                os.link(existing, dest, follow_symlinks=False)
            except FileExistsError:
                if stat.S_ISDIR(os.lstat(dest).st_mode):
                    raise IsADirectoryError(
                        errno.EISDIR, "a directory is in the way", dest
                    ) from None
                os.unlink(dest)
                os.link(existing, dest, follow_symlinks=False)
            self.result.files += 1

        return self.attempt(f.path, make)

    def _reopen(self, dest: str, bits: int) -> tuple[int, bool]:
        """Open ``dest``, which is there already, for writing, never through a link: a
        link is replaced by a new file (the descriptor, True), a file is truncated
        (False: it keeps its bits until they are set)."""
        if os.path.islink(dest):
            os.unlink(dest)  # replace a link instead of writing through it
            return os.open(dest, _NEW_FLAGS, bits), True
        return os.open(dest, _CREATE_FLAGS, 0o600), False

    def files_gid(self, directory: str) -> int:
        """The group a file created in ``directory`` gets: the directory's if that is
        setgid, else the process's effective group."""
        gid = self.file_gids.get(directory)
        if gid is None:
            st = os.stat(directory)
            gid = st.st_gid if st.st_mode & stat.S_ISGID else self.egid
            self.file_gids[directory] = gid
        return gid

    def make_links(
        self,
        links: Sequence[tuple[BarecatFileInfo, str]],
        on_made: Callable[[int], None] | None = None,
    ) -> None:
        """Make the symbolic links ``links`` (entry, :meth:`destination`), judged together
        (see :func:`make_links`); ``on_made`` gets the index of each link made."""
        make_links([(self, f, dest) for f, dest in links], on_made)

    def make_link(self, f: BarecatFileInfo, dest: str, target: str, replace: bool) -> bool:
        """Make one symbolic link, first removing what is at ``dest`` if ``replace`` (it is
        no directory); a failure is recorded (False)."""

        def make() -> None:
            if replace:
                os.unlink(dest)
            os.symlink(target, dest)
            self.result.links += 1
            self.metadata(dest, f, link=True)

        return self.attempt(f.path, make)

    def restore_directories(self, dirs: Iterable[BarecatDirInfo]) -> None:
        """Metadata of ``dirs`` and of every directory this writer made, deepest first (so
        nothing written later moves a parent's mtime); failures are recorded."""
        todo: dict[str, BarecatEntryInfo] = {self.destination(d.path): d for d in dirs}
        for dest in self.created_dirs - todo.keys():  # parents of what was chosen
            with contextlib.suppress(FileNotFoundError):
                relative = os.path.relpath(dest, self.root).replace(os.sep, "/")
                todo[dest] = self.bc.lookup_dir(join(self.base, relative))
        for dest in sorted(todo, reverse=True):  # a child sorts after its parent
            info = todo[dest]
            self.attempt(info.path, functools.partial(self.metadata, dest, info))


def process_umask() -> int:
    """The process's umask: read from ``/proc`` (Linux 4.7+) where it can be, since setting
    it to learn it would briefly change it for every thread."""
    with contextlib.suppress(OSError, ValueError), open("/proc/self/status") as status:
        for line in status:
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def copy_file_to(bc: Barecat, item: BarecatFileInfo | str, out: BinaryIO) -> None:
    """Write one file's bytes to ``out``, CRC32C-verified, in bounded memory."""
    with open_verified(bc, item) as source:
        shutil.copyfileobj(source, out, COPY_CHUNK)


def open_verified(bc: Barecat, item: BarecatFileInfo | str) -> BinaryIO:
    """A stored file to read, whose bytes are known to match their CRC32C.

    A small file is read and checked at once; a big one is checked first and then
    streamed, so a damaged file raises before any of its bytes are passed on.
    """
    f = bc.lookup_file(item) if isinstance(item, str) else item
    if type(f.size) is not int or f.size <= COPY_CHUNK:  # (a damaged row: read names it)
        return io.BytesIO(bc.read(f))
    if not bc.check_crc32c(f):
        bc.read(f)  # raises the integrity error naming the damage
    return cast(BinaryIO, bc.open(f, "rb"))


def extract_to_directory(
    bc: Barecat,
    target_directory: str,
    paths: Iterable[str] | None = None,
    *,
    path_filter: PathFilter | None = None,
    allow_outside_links: bool = False,
    restore_owners: bool | None = None,
    on_file: Callable[[BarecatFileInfo], None] | None = None,
    relative_to: str = "",
    on_files: Callable[[int, int], None] | None = None,
) -> ExtractResult:
    """Write the archive's entries (all, or those under ``paths``) below ``target_directory``.

    Args:
        bc: the archive.
        target_directory: where to write (made if missing).
        paths: files or directories (a directory brings its subtree); default: all.
        path_filter: narrows the selection further.
        allow_outside_links: also make links that point outside the target.
        restore_owners: restore owners (default: when running as root, as tar does).
        on_file: called after each file or link is written.
        relative_to: an archive directory whose contents become those of
            ``target_directory`` (``a/b/c`` lands at ``c`` for ``a/b``); only entries
            under it are extracted (default: the root, entries at their full paths).
        on_files: called with how much the result's ``files + links`` and ``bytes`` grew
            since its last call, a few thousand files at a time where the kernel writes
            them, else after each entry (progress without a record per file; ``on_file``
            names each, and costs the kernel: with it, every file takes the careful path).

    Returns:
        Counts, and what was not written: an entry that fails (damaged bytes, a name the
        file system refuses, no permission) is recorded with its reason and the rest goes
        on, as tar does; links pointing outside the target are listed, not made. Directory
        metadata is restored at the end whatever failed.

    Raises:
        FileNotFoundBarecatError: a path in ``paths`` or ``relative_to`` is not in the
            archive (before anything is written).
        InvalidPathBarecatError: an entry would land outside the target (a hostile archive:
            refused before anything is written).
        NotADirectoryBarecatError: ``target_directory`` is a file, or has one in its path
            (nothing is written).
    """
    root = os.path.abspath(target_directory)
    base = bc.lookup_dir(relative_to).path if relative_to else ""
    wanted = [base] if paths is None else [bc.lookup(p).path for p in paths]
    owners = os.geteuid() == 0 if restore_owners is None else restore_owners
    ex = DirectoryWriter(bc, root, allow_outside_links, owners, base)

    def selected(path: str, is_dir: bool) -> bool:
        if not is_within(path, base) or not any(is_within(path, w) for w in wanted):
            return False
        return path_filter is None or path_filter.selects(path, is_dir)

    everything = paths is None and path_filter is None and not base
    dirs = [d for d in bc.iter_dirinfos(Order.PATH) if everything or selected(d.path, True)]
    rows = kernel_rows(bc) if everything and on_file is None else None
    # every destination checked (a hostile archive refused) before anything is written
    dir_dests = [ex.destination(d.path) for d in dirs]
    if rows is None:
        files = [
            f for f in bc.iter_fileinfos(Order.ADDRESS) if everything or selected(f.path, False)
        ]
        file_dests = [ex.destination(f.path) for f in files]
    else:
        for row in rows.odd():  # (the others surely lie below the target)
            ex.destination(cast(str, row[0]))
    _make_target(root, target_directory)
    for d, dest in zip(dirs, dir_dests, strict=True):
        ex.attempt(d.path, functools.partial(ex.ensure_dir, dest))
    if rows is not None:  # the plain files by the kernel; the rest as below
        safe = {
            d.path: ex.files_gid(dest) if ex.owners else 0
            for d, dest in zip(dirs, dir_dests, strict=True)
            if dest in ex.safe_dirs
        }
        owner = ex.umask, ex.euid if ex.owners else None
        files, written, nbytes = write_plain_files(bc, root, safe, owner, rows, on_files)
        ex.result.files += written
        ex.result.bytes += nbytes
        file_dests = [ex.destination(f.path) for f in files]
    if on_file is None and on_files is not None:
        on_file = _told_growth(ex.result, on_files)
    links = [f.is_symlink_entry for f in files]
    plain = [(f, dest) for f, dest, link in zip(files, file_dests, links, strict=True) if not link]
    keys = _hard_link_keys([f for f, _ in plain])
    made: dict[object, str] = {}  # per hard-link key, the file written for it
    seen: set[object] = set()
    ex.read_in_runs([f for (f, _), key in zip(plain, keys, strict=True) if _first(key, seen)])
    for (f, dest), key in zip(plain, keys, strict=True):
        first = None if key is None else made.get(key)
        if first is not None:
            done = ex.write_hard_link(f, dest, first)
        else:
            done = ex.write_entry(f, dest)
            if done and key is not None:
                made[key] = dest
        if done and on_file:
            on_file(f)
    # links last, so nothing is written through one, and judged all together
    linked = [(f, dest) for f, dest, link in zip(files, file_dests, links, strict=True) if link]
    ex.make_links(linked, None if on_file is None else lambda k: on_file(linked[k][0]))
    ex.restore_directories(dirs)
    return ex.result


def _told_growth(
    result: ExtractResult, on_files: Callable[[int, int], None]
) -> Callable[[BarecatFileInfo], None]:
    """An ``on_file`` telling ``on_files`` what ``result`` grew by since it last told (a
    file written, a hard link made: one more file and its bytes, or none)."""
    told = [result.files + result.links, result.bytes]

    def tell(_: BarecatFileInfo) -> None:
        files, nbytes = result.files + result.links, result.bytes
        on_files(files - told[0], nbytes - told[1])
        told[:] = [files, nbytes]

    return tell


def _make_target(root: str, given: str) -> None:
    """Make the target directory ``root`` (as ``given``) if missing.

    Raises:
        NotADirectoryBarecatError: a file stands there, or where a directory of its path
            must be.
    """
    try:
        os.makedirs(root, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # (a file there, or on the way there)
        raise NotADirectoryBarecatError(f"{given}: Not a directory") from None


def _hard_link_keys(files: Sequence[BarecatFileInfo]) -> list[object | None]:
    """Each file's ``hard_link_key`` where a neighbour in storage order is at the same
    place, else None: only those can be hard links of one another (files at one place
    are neighbours in storage order)."""
    keys: list[object | None] = [None] * len(files)
    for k in range(1, len(files)):
        a, b = files[k - 1], files[k]
        if a.offset == b.offset and a.shard == b.shard:
            keys[k - 1], keys[k] = a.hard_link_key, b.hard_link_key
    return keys


def _first(key: object | None, seen: set[object]) -> bool:
    """Whether a file of this hard-link key is the first (it is written: its bytes are
    read), noting the key."""
    if key is None:
        return True
    if key in seen:
        return False
    seen.add(key)
    return True


def _parent(dest: str) -> str:
    """``os.path.dirname`` of an absolute, normalized path (what destinations are)."""
    return dest[: dest.rfind(os.sep)] or os.sep


def extract(barecat_path: str, target_directory: str) -> None:
    """Extract a whole archive into ``target_directory`` (the reference's function).

    Raises the first failure, or else the first refusal (a link pointing outside), after
    extracting everything else.
    """
    with Barecat(barecat_path) as bc:
        result = extract_to_directory(bc, target_directory)
    if result.failures:
        raise result.failures[0][1]
    if result.outside_links:
        raise outside_link_error(*result.outside_links[0], os.path.abspath(target_directory))


__all__ = [
    "DirectoryWriter",
    "ExtractResult",
    "copy_file_to",
    "extract",
    "extract_to_directory",
    "outside_link_error",
]
