"""Moving data into and out of archives, in three wings over two shared modules:
``ingest/`` (files and trees in), ``convert/`` (tar, zip and ColdCrate both ways, wrapping,
merges) and ``sync/`` (``barecat rsync``, which uses the other two), over ``extraction``
(archive to directory) and ``building`` (new archives that appear whole)."""

from barecat.lazy_exports import TYPE_CHECKING, lazy_exports

if TYPE_CHECKING:
    from barecat.transfer.building import building_archive
    from barecat.transfer.convert.coldcrate import barecat2coldcrate, coldcrate2barecat
    from barecat.transfer.convert.conversion import (
        archive2barecat,
        barecat2archive,
        barecat2barecat,
        barecat2stream,
        stream2barecat,
    )
    from barecat.transfer.convert.formats import FORMATS, format_of_name, parse_format
    from barecat.transfer.convert.merging import merge, merge_symlink
    from barecat.transfer.convert.tar_zip_export import ExportResult, export_tar, export_zip
    from barecat.transfer.convert.tar_zip_import import ImportResult, import_tar, import_zip
    from barecat.transfer.convert.wrapping import wrap_archive
    from barecat.transfer.extraction import (
        ExtractResult,
        copy_file_to,
        extract,
        extract_to_directory,
        open_verified,
    )
    from barecat.transfer.ingest.sources import (
        IngestPlan,
        Source,
        plan_roots,
        plan_sources,
        plan_tree,
    )
    from barecat.transfer.ingest.threads import DEFAULT_WORKERS, IngestResult, add_directory, ingest
else:  # imported on first use
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "barecat.transfer.building": ["building_archive"],
            "barecat.transfer.convert.coldcrate": ["barecat2coldcrate", "coldcrate2barecat"],
            "barecat.transfer.convert.conversion": [
                "archive2barecat",
                "barecat2archive",
                "barecat2barecat",
                "barecat2stream",
                "stream2barecat",
            ],
            "barecat.transfer.convert.formats": ["FORMATS", "format_of_name", "parse_format"],
            "barecat.transfer.convert.merging": ["merge", "merge_symlink"],
            "barecat.transfer.convert.tar_zip_export": ["ExportResult", "export_tar", "export_zip"],
            "barecat.transfer.convert.tar_zip_import": ["ImportResult", "import_tar", "import_zip"],
            "barecat.transfer.convert.wrapping": ["wrap_archive"],
            "barecat.transfer.extraction": [
                "ExtractResult",
                "copy_file_to",
                "extract",
                "extract_to_directory",
                "open_verified",
            ],
            "barecat.transfer.ingest.sources": [
                "IngestPlan",
                "Source",
                "plan_roots",
                "plan_sources",
                "plan_tree",
            ],
            "barecat.transfer.ingest.threads": [
                "DEFAULT_WORKERS",
                "IngestResult",
                "add_directory",
                "ingest",
            ],
        },
    )

__all__ = [
    "DEFAULT_WORKERS",
    "FORMATS",
    "ExportResult",
    "ExtractResult",
    "ImportResult",
    "IngestPlan",
    "IngestResult",
    "Source",
    "add_directory",
    "archive2barecat",
    "barecat2archive",
    "barecat2barecat",
    "barecat2coldcrate",
    "barecat2stream",
    "building_archive",
    "coldcrate2barecat",
    "copy_file_to",
    "export_tar",
    "export_zip",
    "extract",
    "extract_to_directory",
    "format_of_name",
    "import_tar",
    "import_zip",
    "ingest",
    "merge",
    "merge_symlink",
    "open_verified",
    "parse_format",
    "plan_roots",
    "plan_sources",
    "plan_tree",
    "stream2barecat",
    "wrap_archive",
]
