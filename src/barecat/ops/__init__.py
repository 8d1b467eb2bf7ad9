"""Algorithms over (Index, Sharder): verify and repair; reorganizing and combining archives."""

from barecat.ops.copy_files import CopyStats
from barecat.ops.merge import MergeResult, merge_archives
from barecat.ops.repair import RepairResult, repair
from barecat.ops.subset import select_entries, subset_archive
from barecat.ops.upgrade import upgrade
from barecat.ops.verify import VerifyReport, verify_archive

__all__ = [
    "CopyStats",
    "MergeResult",
    "RepairResult",
    "VerifyReport",
    "merge_archives",
    "repair",
    "select_entries",
    "subset_archive",
    "upgrade",
    "verify_archive",
]
