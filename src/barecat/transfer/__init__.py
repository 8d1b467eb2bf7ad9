"""Moving data into and out of archives: directories today; tar/zip and sync later."""

from barecat.transfer.directory import extract, extract_to_directory

__all__ = ["extract", "extract_to_directory"]
