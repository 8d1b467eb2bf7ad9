"""Algorithms over (Index, Sharder): verify, repair, defrag, reshard, merge, subset, upgrade.

The operations live in submodules of the same names (``barecat.ops.defrag.defrag``, ...);
only result types and the functions whose names differ from their module are re-exported
here, so no function hides its module.
"""

from barecat.lazy_exports import TYPE_CHECKING, lazy_exports

if TYPE_CHECKING:
    from barecat.ops.copy_files import CopyStats
    from barecat.ops.defrag import DefragResult
    from barecat.ops.merge import MergeResult, merge_archives
    from barecat.ops.repair import RepairResult
    from barecat.ops.subset import select_entries, subset_archive
    from barecat.ops.verify import VerifyReport, verify_archive
else:  # imported on first use
    __getattr__, __dir__ = lazy_exports(
        __name__,
        {
            "barecat.ops.copy_files": ["CopyStats"],
            "barecat.ops.defrag": ["DefragResult"],
            "barecat.ops.merge": ["MergeResult", "merge_archives"],
            "barecat.ops.repair": ["RepairResult"],
            "barecat.ops.subset": ["select_entries", "subset_archive"],
            "barecat.ops.verify": ["VerifyReport", "verify_archive"],
        },
    )

__all__ = [
    "CopyStats",
    "DefragResult",
    "MergeResult",
    "RepairResult",
    "VerifyReport",
    "merge_archives",
    "select_entries",
    "subset_archive",
    "verify_archive",
]
