"""The command line's side of sealed archives: the options that make one, and where
passphrases come from — a file, the environment, or the terminal.

Never from argv, which other users of the machine can read in the process list. The
order: ``--passphrase-file FILE`` (its first line), then ``$BARECAT_PASSPHRASE``, then a
prompt on the controlling terminal. Archives are opened with a *source*, asked only when
an encrypted archive's file contents are first needed, so listing or verifying checksums
of an encrypted archive never prompts. Only this module reads passphrases.
"""

from __future__ import annotations

import argparse
import getpass
import os
from collections.abc import Callable, Sequence
from typing import Any

from barecat.archive import Barecat, IfEncrypted
from barecat.cli.parsing import size
from barecat.exceptions import BarecatError
from barecat.layout import archive_exists, archive_not_found
from barecat.objectstore import is_remote_url

PASSPHRASE_ENV = "BARECAT_PASSPHRASE"
NEW_PASSPHRASE_ENV = "BARECAT_NEW_PASSPHRASE"
DEFAULT_DICTIONARY_SIZE = 112_640


def add_sealing_options(parser: argparse.ArgumentParser, what: str = "the archive") -> None:
    """``--compress``, ``--level`` and ``--encrypt`` for commands that make an archive."""
    parser.add_argument(
        "--compress",
        choices=["zstd", "lz4", "none"],
        help=f"Store the files of {what} compressed, each on its own (files that do not "
        "shrink are kept as they are)",
    )
    parser.add_argument(
        "--level", type=int, metavar="N", help="Compression level (zstd: 1-22, default 3)"
    )
    parser.add_argument(
        "--dictionary",
        action="store_true",
        help="Train a zstd dictionary on a sample of the files first: many small similar "
        "files (JSON, text) shrink much more",
    )
    parser.add_argument(
        "--dictionary-size",
        type=size,
        default=DEFAULT_DICTIONARY_SIZE,
        metavar="SIZE",
        help="Size of the --dictionary (default 110K)",
    )
    parser.add_argument(
        "--encrypt",
        action="store_true",
        help=f"Encrypt the files of {what} (AES-256-GCM, key from a passphrase: "
        f"--passphrase-file, ${PASSPHRASE_ENV} or typed twice; compressed with zstd "
        "unless --compress none)",
    )


def new_archive_options(
    args: argparse.Namespace, samples: Callable[[], Sequence[bytes]] | None = None
) -> dict[str, Any]:
    """``Barecat()`` options for a new archive, as the sealing options ask (asking for the
    passphrase of ``--encrypt`` now; training the ``--dictionary`` on ``samples()``)."""
    options: dict[str, Any] = {}
    if getattr(args, "dictionary", None):
        if samples is None:
            raise ValueError(
                "--dictionary learns from the files of a directory or an archive, not a stream"
            )
        if args.compress not in (None, "zstd"):
            raise ValueError("--dictionary is for zstd compression")
        from barecat.sealing import train_dictionary  # zstandard, for sealed archives only

        options["compression_dictionary"] = train_dictionary(samples(), args.dictionary_size)
    if getattr(args, "compress", None):
        options["compression"] = args.compress
    if getattr(args, "level", None) is not None:
        options["compression_level"] = args.level
    if getattr(args, "encrypt", False):
        options["passphrase"] = new_passphrase(
            args.passphrase_file, PASSPHRASE_ENV, "--passphrase-file"
        )
    return options


def read_passphrase(
    file: str | None, env: str = PASSPHRASE_ENV, prompt: str = "Passphrase: "
) -> str:
    """From ``file``, else the environment variable ``env``, else the terminal."""
    if file:
        with open(file, encoding="utf-8") as f:
            text = f.readline().rstrip("\r\n")
        if not text:
            raise BarecatError(f"{file}: the passphrase file is empty")
        return text
    if os.environ.get(env):
        return os.environ[env]
    if _has_terminal():
        return getpass.getpass(prompt)
    raise BarecatError(
        f"a passphrase is needed: --passphrase-file FILE or ${env} (or run on a terminal)"
    )


def new_passphrase(file: str | None, env: str, option: str) -> str:
    """A passphrase for new encryption: from ``file`` or ``$env``, else typed twice."""
    if file or os.environ.get(env):
        return read_passphrase(file, env)
    if not _has_terminal():
        raise BarecatError(
            f"a new passphrase is needed: {option} FILE or ${env} (or run on a terminal)"
        )
    first = getpass.getpass("New passphrase: ")
    if first != getpass.getpass("Repeat it: "):
        raise BarecatError("the two passphrases differ; nothing was changed")
    if not first:
        raise BarecatError("an empty passphrase cannot protect an archive")
    return first


def passphrase_source(
    args: argparse.Namespace | None, if_encrypted: bool = False
) -> Callable[[], str | bytes]:
    """A source for ``Barecat(passphrase=...)``, asked only if the archive needs it.

    A passphrase given (``--passphrase-file`` or ``$BARECAT_PASSPHRASE``) says the
    archive is encrypted: one that is not is refused at open, so an archive whose
    encryption was removed is never read as plain. Without one, only a prompt stands
    ready, which an archive that is not encrypted never asks (:class:`IfEncrypted`):
    such an archive is read as the plain archive it is. ``if_encrypted``: claim nothing
    whatever is given, for an archive whose encryption the command does not choose or
    expect (the output of merge or subset, sealed like the encrypted files it takes; an
    rsync destination; the source of ``convert --encrypt``, whose passphrase is the
    output's)."""
    ask = _asking(args)
    given = getattr(args, "passphrase_file", None) or os.environ.get(PASSPHRASE_ENV)
    return ask if given and not if_encrypted else IfEncrypted(ask)


def _asking(args: argparse.Namespace | None) -> Callable[[], str]:
    """The passphrase from ``--passphrase-file``, the environment or the terminal,
    read once however often asked."""
    file = getattr(args, "passphrase_file", None)
    asked: list[str] = []

    def ask() -> str:
        if not asked:
            asked.append(read_passphrase(file))
        return asked[0]

    return ask


def open_archive(
    path: str, args: argparse.Namespace | None = None, create: bool = False, **options: Any
) -> Barecat:
    """``Barecat(path, **options)``, able to read an encrypted archive's contents. Unless
    ``create``, the archive must exist: a command that works on one never makes one (a
    mistyped path is an error, not a new empty archive). A passphrase given refuses an
    existing archive that is not encrypted (``passphrase_source``); one being made is
    sealed as ``options`` say (``--encrypt``, ``--compress``), whatever is given.

    Raises:
        FileNotFoundBarecatError: no archive at ``path`` (and not ``create``).
    """
    exists = is_remote_url(path) or archive_exists(path)
    if not create and not exists:
        raise archive_not_found(path)
    made = create and (not exists or options.get("overwrite", False))
    source = passphrase_source(args, if_encrypted=True) if made else passphrase_source(args)
    return Barecat(path, **{"passphrase": source, **options})


def unlock_if_at_hand(bc: Barecat, args: argparse.Namespace) -> None:
    """Unlock an encrypted archive if its passphrase was given (file or environment),
    never prompting: for commands that show contents only in passing (link targets)."""
    if bc.encrypted and (getattr(args, "passphrase_file", None) or os.environ.get(PASSPHRASE_ENV)):
        bc.unlock()


def _has_terminal() -> bool:
    try:
        os.close(os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY))
    except OSError:
        return False
    return True


__all__ = [
    "add_sealing_options",
    "new_archive_options",
    "NEW_PASSPHRASE_ENV",
    "PASSPHRASE_ENV",
    "new_passphrase",
    "open_archive",
    "passphrase_source",
    "read_passphrase",
    "unlock_if_at_hand",
]
