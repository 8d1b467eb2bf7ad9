"""Algorithms over (Index, Sharder): verification today; repair, merge, defrag later."""

from barecat.ops.verify import VerifyReport, verify_archive

__all__ = ["VerifyReport", "verify_archive"]
