"""Moving data into and out of archives: directory trees today; tar/zip and sync later."""

from barecat.transfer.directory import add_directory, extract, extract_to_directory

__all__ = ["add_directory", "extract", "extract_to_directory"]
