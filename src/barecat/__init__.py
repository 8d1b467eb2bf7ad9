"""barecat: millions of small files in a few big ones, with fast random access by path.

The public face; names follow barecat 0.3.x so existing code keeps working.
"""

from __future__ import annotations

from barecat.lazy_exports import TYPE_CHECKING, lazy_exports

__version__ = "0.4.0.dev0"

if TYPE_CHECKING:
    from barecat.archive import Barecat, ReadableArchive
    from barecat.codecs import DecodedView, UnsafePickleWarning
    from barecat.entries import (
        SHARD_SIZE_UNLIMITED,
        BarecatDirInfo,
        BarecatEntryInfo,
        BarecatFileInfo,
        Order,
    )
    from barecat.exceptions import (
        ArchiveClosedBarecatError,
        ArchiveLockedBarecatError,
        BarecatError,
        BarecatIntegrityError,
        CommitFailedBarecatError,
        CorruptIndexBarecatError,
        DamagedEntryBarecatError,
        DamagedIndexBarecatError,
        DirectoryNotEmptyBarecatError,
        FileExistsBarecatError,
        FileNotFoundBarecatError,
        FileTooLargeBarecatError,
        ForeignSchemaBarecatError,
        InvalidPathBarecatError,
        IsADirectoryBarecatError,
        NotADirectoryBarecatError,
        NotADirectoryLookupBarecatError,
        NotEnoughSpaceBarecatError,
        NotStoredBarecatError,
        OutOfRangeBarecatError,
        PathTypeBarecatError,
        ReadOnlyBarecatError,
        SchemaVersionBarecatError,
    )
    from barecat.index import Index
    from barecat.legacy_api import exists, get_cached_reader, open, read_index, remove, write_index
    from barecat.ops.publish import PublishSummary, publish
    from barecat.shards import (
        BarecatFileObject,
        BarecatReadOnlyFileObject,
        BarecatReadWriteFileObject,
        Sharder,
    )
    from barecat.shell_completion import get_completion_script
    from barecat.transfer import archive2barecat, barecat2archive, extract, merge, merge_symlink
    from barecat.web.server.client import HttpBarecat as HttpBarecat  # the optional httpx
    from barecat.web.server.client import RemoteBarecat as RemoteBarecat
else:  # imported on first use: the face loads nothing up front
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "barecat.archive": ["Barecat", "ReadableArchive"],
            "barecat.codecs": ["DecodedView", "UnsafePickleWarning"],
            "barecat.entries": [
                "SHARD_SIZE_UNLIMITED",
                "BarecatDirInfo",
                "BarecatEntryInfo",
                "BarecatFileInfo",
                "Order",
            ],
            "barecat.exceptions": [
                "ArchiveClosedBarecatError",
                "ArchiveLockedBarecatError",
                "BarecatError",
                "BarecatIntegrityError",
                "CommitFailedBarecatError",
                "CorruptIndexBarecatError",
                "DamagedEntryBarecatError",
                "DamagedIndexBarecatError",
                "DirectoryNotEmptyBarecatError",
                "FileExistsBarecatError",
                "FileNotFoundBarecatError",
                "FileTooLargeBarecatError",
                "ForeignSchemaBarecatError",
                "InvalidPathBarecatError",
                "IsADirectoryBarecatError",
                "NotADirectoryBarecatError",
                "NotADirectoryLookupBarecatError",
                "NotEnoughSpaceBarecatError",
                "NotStoredBarecatError",
                "OutOfRangeBarecatError",
                "PathTypeBarecatError",
                "ReadOnlyBarecatError",
                "SchemaVersionBarecatError",
            ],
            "barecat.index": ["Index"],
            "barecat.legacy_api": [
                "exists",
                "get_cached_reader",
                "open",
                "read_index",
                "remove",
                "write_index",
            ],
            "barecat.web.server.client": ["HttpBarecat", "RemoteBarecat"],
            "barecat.ops.publish": ["PublishSummary", "publish"],
            "barecat.shards": [
                "BarecatFileObject",
                "BarecatReadOnlyFileObject",
                "BarecatReadWriteFileObject",
                "Sharder",
            ],
            "barecat.shell_completion": ["get_completion_script"],
            "barecat.transfer": [
                "archive2barecat",
                "barecat2archive",
                "extract",
                "merge",
                "merge_symlink",
            ],
        },
    )


def connect(url: str, token: str | None = None) -> HttpBarecat:
    """An archive served by ``barecat serve`` at ``url`` (``http://HOST:PORT/a/NAME``;
    ``http://HOST:PORT`` for a server of one archive; ``barecat://HOST[:PORT]/NAME[::PATH]``),
    with the read API of :class:`Barecat` (the ``server`` extra: httpx)."""
    from barecat.web.server.client import HttpBarecat

    return HttpBarecat(url, token)


# HttpBarecat (and its old name RemoteBarecat) are exported but left out of __all__: they
# need the optional httpx, which ``from barecat import *`` must not
__all__ = [
    "SHARD_SIZE_UNLIMITED",
    "connect",
    "ArchiveClosedBarecatError",
    "ArchiveLockedBarecatError",
    "Barecat",
    "BarecatDirInfo",
    "BarecatEntryInfo",
    "BarecatError",
    "BarecatFileInfo",
    "BarecatFileObject",
    "BarecatIntegrityError",
    "BarecatReadOnlyFileObject",
    "BarecatReadWriteFileObject",
    "CommitFailedBarecatError",
    "CorruptIndexBarecatError",
    "DamagedEntryBarecatError",
    "DamagedIndexBarecatError",
    "DecodedView",
    "DirectoryNotEmptyBarecatError",
    "FileExistsBarecatError",
    "FileNotFoundBarecatError",
    "FileTooLargeBarecatError",
    "ForeignSchemaBarecatError",
    "Index",
    "InvalidPathBarecatError",
    "IsADirectoryBarecatError",
    "NotADirectoryBarecatError",
    "NotADirectoryLookupBarecatError",
    "NotEnoughSpaceBarecatError",
    "Order",
    "NotStoredBarecatError",
    "OutOfRangeBarecatError",
    "PathTypeBarecatError",
    "PublishSummary",
    "ReadOnlyBarecatError",
    "ReadableArchive",
    "SchemaVersionBarecatError",
    "Sharder",
    "UnsafePickleWarning",
    "__version__",
    "archive2barecat",
    "barecat2archive",
    "exists",
    "extract",
    "get_cached_reader",
    "get_completion_script",
    "merge",
    "merge_symlink",
    "open",
    "publish",
    "read_index",
    "remove",
    "write_index",
]
