"""Bytes changed the ways storage and hostile writers change them, for fuzz tests of
parsers of files: bits flipped, bytes overwritten (with random bytes, or with hostile
integers of 1 to 8 bytes), inserted, deleted, or the file cut off, at random places or
at the places where a format keeps its fields (``spots``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

HOSTILE = [0, 1, 2, 7, 8, 9, 24, 0x7F, 0x80, 0xFF, 0x100, 0xFFFF, 1 << 20, (1 << 31) - 1]
HOSTILE += [1 << 31, (1 << 32) - 1, 1 << 40, (1 << 63) - 1, (1 << 64) - 1, -1, -8]
"""Integers written over fields (negative: that far below the file's size)."""


@dataclass(frozen=True)
class Mutation:
    """One change. ``at``: a byte position (modulo the size), or with ``spot`` an index
    into the format's spots (modulo their number), moved by ``nudge`` bytes. ``kind``:
    flip (bit ``value``), set (bytes ``value``), int (``value``: width and number, little
    endian), text (``value`` as ASCII digits, as tar's octal fields hold numbers), insert
    (bytes ``value``), delete (``value`` bytes) or cut."""

    kind: str
    at: int
    value: Any = None
    spot: bool = False
    nudge: int = 0


_where = {
    "at": st.integers(0, 1 << 14),
    "spot": st.booleans(),
    "nudge": st.sampled_from([0, 0, 1, 2, 3, -1]),
}
_ints = st.tuples(st.sampled_from([1, 2, 4, 8]), st.sampled_from(HOSTILE))
_texts = st.sampled_from(["0", "7", "777", "77777777777", "99999999999", "-1", " ", "\x80"])
mutation_lists = st.lists(
    st.one_of(
        st.builds(Mutation, st.just("flip"), value=st.integers(0, 7), **_where),
        st.builds(Mutation, st.just("set"), value=st.binary(min_size=1, max_size=8), **_where),
        st.builds(Mutation, st.just("int"), value=_ints, **_where),
        st.builds(Mutation, st.just("text"), value=_texts, **_where),
        st.builds(Mutation, st.just("insert"), value=st.binary(min_size=1, max_size=24), **_where),
        st.builds(Mutation, st.just("delete"), value=st.integers(1, 24), **_where),
        st.builds(Mutation, st.just("cut"), **_where),
    ),
    min_size=1,
    max_size=3,
)
"""One to three mutations."""


def mutate(data: bytes, spots: list[int], mutations: list[Mutation]) -> bytes:
    """``data`` with ``mutations`` applied in turn (positions in the data as it is then)."""
    out = bytearray(data)
    for m in mutations:
        if not out:
            break
        at = spots[m.at % len(spots)] + m.nudge if m.spot and spots else m.at
        at = max(0, min(at, len(out) - 1)) if m.spot and spots else at % len(out)
        if m.kind == "insert":
            out[at:at] = m.value
        elif m.kind == "delete":
            del out[at : at + m.value]
        elif m.kind == "cut":
            del out[at:]
        elif m.kind == "flip":
            out[at] ^= 1 << m.value
        else:
            new = _new_bytes(m, len(out))
            out[at : at + len(new)] = new[: len(out) - at]
    return bytes(out)


def _new_bytes(m: Mutation, size: int) -> bytes:
    if m.kind == "set":
        return bytes(m.value)
    if m.kind == "text":
        return str(m.value).encode("latin-1")
    width, number = m.value
    number = size + number if number < 0 else number
    return (number % (1 << 8 * width)).to_bytes(width, "little")


def first_change(original: bytes, changed: bytes) -> int:
    """The offset of the first byte where ``changed`` differs from ``original`` (the
    shorter one's length if one is the other's start)."""
    n = min(len(original), len(changed))
    lo, hi = 0, n
    while lo < hi:  # the longest common start, by halves
        mid = (lo + hi + 1) // 2
        if original[:mid] == changed[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


__all__ = ["HOSTILE", "Mutation", "first_change", "mutate", "mutation_lists"]
