"""What processes leave behind while building something under a name that ends in their
process id (``.out.partial-1234``, ``index.part-1234``): telling which were abandoned,
because that process is gone (killed mid-way), so the next builder may delete them.
Imports nothing from barecat.
"""

from __future__ import annotations

import os


def abandoned_pids(folder: str, prefix: str) -> set[int]:
    """Ids of the ended processes that left entries named ``PREFIX<pid>...`` in
    ``folder`` (this process and live ones, anyone's, excluded)."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return set()
    pids = set()
    for name in names:
        if name.startswith(prefix):
            digits = name[len(prefix) :].split("-", 1)[0]
            if digits.isdigit():
                pids.add(int(digits))
    pids.discard(os.getpid())
    return {pid for pid in pids if not _alive(pid)}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


__all__ = ["abandoned_pids"]
