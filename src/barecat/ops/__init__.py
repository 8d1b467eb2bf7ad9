"""Algorithms over (Index, Sharder): verify and repair; reorganizing and combining archives."""

from barecat.ops.repair import RepairResult, repair
from barecat.ops.verify import VerifyReport, verify_archive

__all__ = ["RepairResult", "VerifyReport", "repair", "verify_archive"]
