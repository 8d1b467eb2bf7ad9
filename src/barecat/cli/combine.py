"""(being written)"""

from __future__ import annotations

from barecat.cli.parsing import Subparsers


def register(sub: Subparsers) -> None:
    pass
