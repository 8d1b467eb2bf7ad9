"""Moving data into and out of archives: directory trees today; tar/zip and sync later."""

from barecat.transfer.extraction import (
    ExtractResult,
    copy_file_to,
    extract,
    extract_to_directory,
)
from barecat.transfer.ingest import DEFAULT_WORKERS, IngestResult, add_directory, ingest
from barecat.transfer.sources import IngestPlan, Source, plan_sources, plan_tree

__all__ = [
    "DEFAULT_WORKERS",
    "ExtractResult",
    "IngestPlan",
    "IngestResult",
    "Source",
    "add_directory",
    "copy_file_to",
    "extract",
    "extract_to_directory",
    "ingest",
    "plan_sources",
    "plan_tree",
]
