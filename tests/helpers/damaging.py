"""Damaging archives on purpose, as bit rot would."""

from __future__ import annotations

import barecat


def damage(archive: str, path: str, at: int = 0) -> None:
    """Flip one stored byte of ``path``, ``at`` bytes into it: its CRC32C no longer matches."""
    with barecat.Barecat(archive, lookup_table=False) as bc:
        info = bc.index.lookup_file(path)
    with open(f"{archive}-shard-{info.shard:05d}", "r+b") as shard:
        shard.seek((info.offset or 0) + at)
        byte = shard.read(1)
        shard.seek((info.offset or 0) + at)
        shard.write(bytes([byte[0] ^ 0xFF]))
