"""The table of ``barecat``'s commands: each one's name, aliases, one-line help and the
module of ``barecat.cli`` that declares its options and runs it.

It is the one place these are written: :func:`barecat.cli.parsing.add_command` takes a
command's help and aliases from here, and the entry point lists every command from here
alone (``barecat --help``, a mistyped command), without importing any command module.
Imports nothing.
"""

from __future__ import annotations

import argparse
from typing import NamedTuple


class Command(NamedTuple):
    """One command of the table."""

    name: str
    module: str
    help: str
    aliases: tuple[str, ...] = ()


HIDDEN = argparse.SUPPRESS
"""The help of a command that the command list leaves out."""

COMMANDS: tuple[Command, ...] = (
    Command(
        "create", "create", "Create a new archive (error if it exists, -f to overwrite)", ("c",)
    ),
    Command(
        "add", "create", "Add files to an existing archive (-c to create it if missing)", ("a",)
    ),
    Command("convert", "convert", "Convert between barecat and tar/zip (files or streams)"),
    Command("extract", "extract", "Extract files from an archive", ("x",)),
    Command("cat", "extract", "Print a file's contents to stdout"),
    Command("list", "listing", "List archive contents", ("ls", "l", "t")),
    Command("find", "listing", "Search for files in an archive (like find)"),
    Command("tree", "listing", "Display the directory tree (like tree)"),
    Command("du", "du", "Show disk usage (like du, apparent sizes in bytes)"),
    Command("index-to-csv", "du", "Dump the file index as CSV (path, shard, offset, size, crc32c)"),
    Command("to-ncdu-json", "du", "Print the tree in ncdu's JSON export format"),
    Command("shell", "shell", "Interactive shell for exploring an archive"),
    Command("ncdu", "viewers", "Interactive disk usage viewer (ncdu-like)"),
    Command("browse", "viewers", "Ranger-like file browser for archives"),
    Command(
        "view",
        "viewers",
        "Browse an archive's images in a web page on this machine",
        ("image-viewer",),
    ),
    Command(
        "verify",
        "maintenance",
        "Verify archive integrity (index, byte ranges, every file's CRC32C)",
    ),
    Command("repair", "maintenance", "Make a crashed or partly copied archive consistent again"),
    Command(
        "upgrade",
        "maintenance",
        "Convert an archive made by an older barecat to the current index schema (0.3)",
    ),
    Command(
        "rekey",
        "maintenance",
        "Change the passphrase of an encrypted archive (no file is rewritten)",
    ),
    Command(
        "digest",
        "maintenance",
        "Print an encrypted archive's index digest (to pin a known-good state)",
    ),
    Command("mount", "mount", "Mount an archive as a directory (FUSE; read-only unless --rw)"),
    Command("defrag", "defrag", "Reclaim the space of deleted and replaced files"),
    Command("reshard", "defrag", "Reorganize the archive into shards of a new size limit"),
    Command("merge", "merge", "Merge archives into one"),
    Command("subset", "merge", "Create a new archive with some of an archive's files"),
    Command(
        "rsync", "rsync", "Sync files between the local filesystem and archives (ARCHIVE::path/)"
    ),
    Command(
        "serve", "serve", "Serve archives over HTTP (files with Range and ETag, listings, batches)"
    ),
    Command(
        "publish",
        "publish",
        "Prepare an archive for reading from object storage or a web server (no index download)",
    ),
    Command("completion-script", "completion", "Print the path of the shell completion script"),
    Command("__complete", "completion", HIDDEN),
)
"""Every command, in the order ``--help`` lists them (each module's together)."""

COMMAND_BY_NAME = {command.name: command for command in COMMANDS}

COMMAND_MODULES: dict[str, tuple[str, ...]] = {}
"""Each command module (in ``--help`` order) and every name its commands answer to."""
for _command in COMMANDS:
    COMMAND_MODULES.setdefault(_command.module, ())
    COMMAND_MODULES[_command.module] += (_command.name, *_command.aliases)
del _command
