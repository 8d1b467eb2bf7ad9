"""``barecat mount``: an archive as a directory, read-only or read-write, and unmounting.

Without ``-f`` the command starts the server in the background (a new session, its
messages in a log beside nothing the user sees) and returns once the mount is there, or
reports why the server stopped. Such a server leaves the outcome of its session in a
report file named after the mount point (in ``$XDG_RUNTIME_DIR``, else the temporary
directory), so that ``--unmount`` waits until it has closed the archive and fails, with
the server's message, when something written was not stored. An encrypted archive's
passphrase is asked here, on the terminal, and handed to the server through a pipe, never
through argv or the environment.
Tar and zip files (told by their content) are indexed here, before the server starts, into
an archive over them (``barecat.mount.tars``), which the server then mounts read-only.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import logging
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from barecat.archive import Barecat
from barecat.cli.parsing import Declared, add_passphrase_option, registering
from barecat.cli.running import EXIT_USAGE
from barecat.cli.sealing import PASSPHRASE_ENV, passphrase_source
from barecat.cli.terminal import error
from barecat.entries import parse_size
from barecat.exceptions import BarecatError, NotStoredBarecatError
from barecat.mount import check_fuse, is_mounted, mount_archive, unmount
from barecat.mount.tars import NotMountableInPlaceError, index_of_tars, input_kind
from barecat.objectstore import is_remote_url

if TYPE_CHECKING:
    from collections.abc import Iterator

EXAMPLES = """
barecat mount photos.barecat /mnt/photos          # read-only, in the background
barecat mount -f photos.barecat /mnt/photos       # in the foreground (Ctrl-C unmounts)
barecat mount --rw notes.barecat ~/notes          # read-write
barecat mount --unmount /mnt/photos               # or: fusermount3 -u /mnt/photos
barecat mount data.tar /mnt/data                  # a tar or zip as it is (indexed once)
barecat mount shard-*.tar /mnt/dataset            # WebDataset shards: one tree
barecat mount notes.barecat ~/notes -o rw,append_only,shard_size_limit=10G   # 0.3.1's -o
"""
KNOWN_OPTIONS = "ro, rw, fg/foreground, mmap, defrag, overwrite, append_only, shard_size_limit=SIZE"
"""barecat 0.3.1's ``-o`` mount options, all accepted."""
START_TIMEOUT = 30.0
"""Seconds to wait for a background server's mount to appear."""
STOP_TIMEOUT = 600.0
"""Seconds ``--unmount`` waits for a background server to close its archive."""
RUNNING = "running"
"""The first word of a session report while its server runs (then its pid)."""


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "archive",
        nargs="*",
        help="Barecat archive path; or one or more uncompressed tar files or zips of stored "
        "members (told by their content), mounted read-only as one tree, a path in two of "
        "them being the later one's",
    )
    parser.add_argument("mountpoint", nargs="?", help="An existing, empty directory")
    parser.add_argument("--rw", action="store_true", help="Allow changes (written on close)")
    parser.add_argument(
        "--index-beside",
        action="store_true",
        help="Tar/zip inputs: keep their index next to the first one, as FILE.barecat, "
        "instead of in the cache directory ($BARECAT_CACHE_DIR, else "
        "$XDG_CACHE_HOME/barecat, else ~/.cache/barecat: mounts/)",
    )
    parser.add_argument(
        "-f", "--foreground", action="store_true", help="Serve in the foreground until unmounted"
    )
    parser.add_argument(
        "-u", "--unmount", metavar="MOUNTPOINT", help="Unmount MOUNTPOINT (also a dead one)"
    )
    parser.add_argument(
        "-z", "--lazy", action="store_true", help="With --unmount: detach even while busy"
    )
    parser.add_argument(
        "--debug",
        action="store_true",
        help="Print every FUSE call and what read-ahead does (with -f)",
    )
    parser.add_argument(
        "--threads",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="Serve reads on several threads (default: only for archives on object storage, "
        "where reads wait on the network; one thread is faster on a local archive)",
    )
    parser.add_argument(
        "--read-ahead",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="Read-only mounts: once files of a directory are read one after another, put "
        "the next ones in the kernel's cache before they are asked for (default: on)",
    )
    parser.add_argument(
        "--plain-listings",
        action="store_true",
        help="Read-only mounts: listings carry names and types, no attributes, so the "
        "kernel keeps no inode per entry listed. find is 3-4x faster over big directories "
        "(200 of 1,000 files) but only 1.2-1.6x over small ones (the Python stdlib, "
        "/usr/share), where each directory entered costs a LOOKUP; so does each file "
        "opened or stat'ed after its listing (ls -lR 1.5-2.3x slower, du 2.6x), and files not "
        "yet opened are not read ahead",
    )
    parser.add_argument(
        "-o",
        "--options",
        action="append",
        metavar="OPTIONS",
        help=f"Comma-separated mount options, as barecat 0.3.1: {KNOWN_OPTIONS}. rw is --rw, "
        "fg is -f; append_only: new files only, nothing changed or removed; "
        "shard_size_limit: for new shards; defrag: defragment once unmounted (rw); "
        "mmap and overwrite change nothing here (reads go through the page cache, and a rw "
        "mount replaces files anyway)",
    )
    parser.add_argument("--report-to", help=argparse.SUPPRESS)  # (set for a background server)
    add_passphrase_option(parser)


def apply_mount_options(args: argparse.Namespace) -> None:
    """Fold the ``-o`` options (comma-separated, repeatable, the last word wins) into
    ``args``: ``rw``, ``foreground``, ``append_only``, ``shard_size_limit``, ``defrag``.

    Raises:
        ValueError: An option that is not one of :data:`KNOWN_OPTIONS`, or a bad size.
    """
    args.append_only, args.shard_size_limit, args.defrag = False, None, False
    for option in ",".join(args.options or []).split(","):
        option = option.strip()
        name, has_value, value = option.partition("=")
        if option in ("", "mmap", "overwrite"):
            continue
        if option in ("ro", "rw"):
            args.rw = option == "rw"
        elif option in ("fg", "foreground"):
            args.foreground = True
        elif option == "append_only":
            args.append_only = True
        elif option == "defrag":
            args.defrag = True
        elif name == "shard_size_limit" and has_value:
            args.shard_size_limit = parse_size(value)
        else:
            raise ValueError(f"unknown mount option -o {option} (known: {KNOWN_OPTIONS})")


def run_mount(args: argparse.Namespace) -> int:
    if args.unmount:
        if args.archive or args.mountpoint:
            raise ValueError("--unmount takes only the mount point")
        report = report_path(args.unmount)
        server = _running_server(report)
        unmount(args.unmount, lazy=args.lazy)
        if server is not None and not args.lazy:  # (a lazy one ends when no longer used)
            _wait_for_the_session(report, server)
        return 0
    if args.mountpoint is None and len(args.archive) > 1:  # 'archive' took every path
        args.mountpoint = args.archive.pop()
    if not args.archive or not args.mountpoint:
        raise ValueError("give the archive and the mount point (or --unmount MOUNTPOINT)")
    apply_mount_options(args)
    if args.defrag and not args.rw:
        raise ValueError("-o defrag changes the archive once unmounted: add -o rw")
    given = args.archive
    try:
        args.archive = _archive_of(args)
    except NotMountableInPlaceError as e:
        error(str(e), command="mount")
        return EXIT_USAGE
    # (tar and zip files are mounted through an index made here: it is never encrypted)
    key = passphrase_source(args, if_encrypted=args.archive not in given)
    check_fuse()
    if args.foreground:
        if args.debug and not logging.getLogger("barecat").handlers:
            _print_debug_messages()
        with _reporting(args.report_to):
            mount_archive(
                args.archive,
                args.mountpoint,
                writable=args.rw,
                passphrase=key,
                debug=args.debug,
                threads=args.threads,
                read_ahead=args.read_ahead,
                plain_listings=args.plain_listings,
                append_only=args.append_only,
                shard_size_limit=args.shard_size_limit,
                defrag_after=args.defrag,
            )
        return 0
    return _serve_in_background(args, key)


def report_path(mountpoint: str) -> str:
    """The session report of the background server of ``mountpoint``: in
    ``$XDG_RUNTIME_DIR/barecat``, else a folder of this user's in the temporary directory,
    named after the mount point's real path."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    folder = (
        os.path.join(runtime, "barecat")
        if runtime
        else os.path.join(tempfile.gettempdir(), f"barecat-{os.getuid()}")
    )
    key = hashlib.sha256(os.fsencode(os.path.realpath(mountpoint))).hexdigest()[:24]
    return os.path.join(folder, f"mount-{key}")


@contextlib.contextmanager
def _reporting(report: str | None) -> Iterator[None]:
    """Leave the session's outcome in ``report`` (when given): ``running PID`` while it
    runs, then its exit status and error message."""
    if report is None:
        yield
        return
    _write_report(report, f"{RUNNING} {os.getpid()}\n")
    try:
        yield
    except BarecatError as e:
        _write_report(report, f"1\n{e}\n")
        raise
    except BaseException:
        _write_report(report, "1\nthe server stopped on an error\n")
        raise
    _write_report(report, "0\n")


def _write_report(report: str, text: str) -> None:
    os.makedirs(os.path.dirname(report), mode=0o700, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=os.path.dirname(report), delete=False) as f:
        f.write(text)
    os.replace(f.name, report)


def _running_server(report: str) -> int | None:
    """The pid of the background server whose session ``report`` tells of, if it runs."""
    try:
        with open(report) as f:
            word, _, pid = f.readline().partition(" ")
        if word == RUNNING and _alive(int(pid)):
            return int(pid)
    except (OSError, ValueError):
        pass
    return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _wait_for_the_session(report: str, server: int) -> None:
    """Wait until the unmounted server has closed its archive; raise its error if its
    session did not store everything (a server that died meanwhile tells nothing)."""
    deadline = time.monotonic() + STOP_TIMEOUT
    while True:
        with contextlib.suppress(OSError), open(report) as f:
            lines = f.read().splitlines()
            if lines and not lines[0].startswith(RUNNING):
                os.remove(report)
                if lines[0] != "0":
                    if len(lines) > 2:  # (its summary, then what was not stored)
                        raise NotStoredBarecatError(lines[1], lines[2:])
                    raise BarecatError(lines[1] if len(lines) > 1 else "the server failed")
                return
        if not _alive(server):
            return
        if time.monotonic() > deadline:
            raise BarecatError(f"the server did not close the archive within {STOP_TIMEOUT:.0f} s")
        time.sleep(0.05)


def _archive_of(args: argparse.Namespace) -> str:
    """The archive to serve: the one given, or the index over the given tar/zip files,
    made or reused (members left out or renamed said on stderr, a line each)."""
    paths: list[str] = args.archive
    tars = len(paths) > 1 or (not is_remote_url(paths[0]) and input_kind(paths[0]) is not None)
    if not tars:
        if args.index_beside:
            raise ValueError("--index-beside is for tar and zip inputs")
        return paths[0]
    if args.rw:
        raise ValueError(
            "tar and zip files mount read-only; to change them, make an archive first: "
            "barecat convert FILE.tar FILE.barecat"
        )
    if args.foreground and args.debug:
        _print_debug_messages()
    index = index_of_tars(paths, beside=args.index_beside)
    for name, reason in index.skipped:
        error(f"left out {name}: {reason}", command="mount")
    for name, path in index.renamed:
        error(f"{name} is mounted as {path}", command="mount")
    return index.archive


def _print_debug_messages() -> None:
    """``--debug``: barecat's own debug messages (the read-ahead worker's) go to stderr,
    a line each beside libfuse's."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(name)s: %(message)s"))
    logger = logging.getLogger("barecat")
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)


def _serve_in_background(args: argparse.Namespace, ask: Callable[[], str | bytes]) -> int:
    """Start ``barecat mount -f`` detached and wait until its mount is up (``ask``: the
    passphrase source, which asks once, then repeats the answer)."""
    if is_mounted(args.mountpoint):
        raise BarecatError(f"{args.mountpoint} is already a mount point")
    secret = b""
    with Barecat(args.archive, passphrase=ask) as bc:
        if bc.encrypted:  # asked here, where the terminal is; checked before the server starts
            bc.unlock()
            supplied = ask()
            secret = supplied.encode("utf-8") if isinstance(supplied, str) else supplied
    argv = [sys.executable, "-m", "barecat.cli", "mount", "-f", args.archive, args.mountpoint]
    argv += ["--report-to", report_path(args.mountpoint)]
    if args.rw:
        argv.append("--rw")
    if args.threads is not None:
        argv.append("--threads" if args.threads else "--no-threads")
    if not args.read_ahead:
        argv.append("--no-read-ahead")
    if args.plain_listings:
        argv.append("--plain-listings")
    for options in args.options or []:
        argv += ["-o", options]
    if secret:
        argv += ["--passphrase-file", "/dev/stdin"]
    with tempfile.TemporaryFile() as log:
        quiet_env = {k: v for k, v in os.environ.items() if k != PASSPHRASE_ENV}
        server = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=log,
            stderr=log,
            start_new_session=True,
            env=quiet_env,  # the server lives on: it gets the passphrase by the pipe only
        )
        assert server.stdin is not None
        server.stdin.write(secret + b"\n" if secret else b"")
        server.stdin.close()
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if is_mounted(args.mountpoint):
                return 0
            if server.poll() is not None:
                log.seek(0)
                lines = log.read().decode(errors="replace").strip().splitlines()
                reason = lines[-1] if lines else f"exit status {server.returncode}"
                reason = reason.removeprefix("barecat mount: ")
                raise BarecatError(f"the mount server stopped: {reason}")
            time.sleep(0.05)
        server.terminate()
        raise BarecatError(f"{args.mountpoint} did not appear within {START_TIMEOUT:.0f} s")


__all__ = ["KNOWN_OPTIONS", "apply_mount_options", "register", "report_path", "run_mount"]


register = registering(Declared("mount", run_mount, _arguments, EXAMPLES))
