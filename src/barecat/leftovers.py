"""What processes leave behind while building something under a name that ends in their
process id (``.out.partial-1234``, ``.out.partial-1234.part0-shard-00000``,
``index.part-1234``): telling which were abandoned, because that process is gone (killed
mid-way), so the next builder may delete them. Imports nothing from barecat.
"""

from __future__ import annotations

import os
import re

_PID = re.compile(r"(\d+)(?:\D|$)")


def abandoned_entries(folder: str, prefix: str) -> dict[int, list[str]]:
    """Names in ``folder`` of the form ``PREFIX<pid>`` (possibly followed by more, after
    a non-digit) left by processes that ended, by process id; this process and live ones,
    anyone's, are left out."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return {}
    found: dict[int, list[str]] = {}
    for name in names:
        if name.startswith(prefix) and (m := _PID.match(name, len(prefix))):
            found.setdefault(int(m.group(1)), []).append(name)
    found.pop(os.getpid(), None)
    return {pid: sorted(entries) for pid, entries in found.items() if not _alive(pid)}


def abandoned_pids(folder: str, prefix: str) -> set[int]:
    """Ids of the ended processes that left entries named ``PREFIX<pid>...`` in
    ``folder`` (this process and live ones, anyone's, excluded)."""
    return set(abandoned_entries(folder, prefix))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


__all__ = ["abandoned_entries", "abandoned_pids"]
