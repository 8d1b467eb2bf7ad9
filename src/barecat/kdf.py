"""scrypt with its costs under a ceiling, for costs read from files nobody vouches for.

Encrypted archives and ColdCrate chunks store scrypt's salt and cost parameters beside
the data, so a file fully describes how to derive its key. Those numbers are read before
anything is authenticated: a flipped byte, or a hostile file, could ask for minutes of
work or gigabytes of memory at open. Every derivation goes through :func:`scrypt_key`,
which refuses costs above :data:`MAX_MEMORY` bytes (``128 * r * n``) or :data:`MAX_WORK`
(``n * r * p``, 64 times the default), costs scrypt is not defined for (RFC 7914), and
costs needing more memory than Python's scrypt takes, before deriving anything; whatever
OpenSSL still refuses is a :class:`KeyDerivationCostBarecatError` too. Someone who made an
archive with higher costs on purpose raises the ceiling with the environment variables
``BARECAT_SCRYPT_MAX_MEMORY`` (bytes) and ``BARECAT_SCRYPT_MAX_WORK``. Imports only
``exceptions``.
"""

from __future__ import annotations

import hashlib
import os

from barecat.exceptions import BarecatError, KeyDerivationCostBarecatError

MAX_MEMORY = 1 << 30
"""The most memory scrypt's table may use, ``128 * r * N``: 1 GiB (N=2^20 with r=8)."""
MAX_WORK = 1 << 24
"""The most work, ``N * r * p``: 64 times the default N=2^15, r=8, p=1 (5-7.5 s of one core
on the development machine, against 0.11 s for the default; longer on a busy one)."""
_HASHLIB_MAX_MEMORY = (1 << 31) - 1
"""The most memory Python's ``hashlib.scrypt`` takes as ``maxmem`` (a C ``int``)."""


def check_scrypt_costs(n: int, r: int, p: int, where: str = "") -> None:
    """Refuse scrypt costs that make no sense or exceed the ceiling.

    Args:
        n: the CPU/memory cost, a power of two greater than 1.
        r: the block size, at least 1.
        p: the parallelism, at least 1.
        where: what the costs were read from, for the message.

    Raises:
        KeyDerivationCostBarecatError: a cost out of range or above the ceiling.
    """
    source = f"{where}: " if where else ""
    if not _valid(n, r, p):
        raise KeyDerivationCostBarecatError(
            f"{source}invalid scrypt costs N={n}, r={r}, p={p} (damaged key-derivation settings)"
        )
    if _memory(n, r, p) > _HASHLIB_MAX_MEMORY:
        raise KeyDerivationCostBarecatError(
            f"{source}scrypt costs N={n}, r={r}, p={p} need {_memory(n, r, p) >> 20} MiB, "
            f"more than Python's scrypt takes ({_HASHLIB_MAX_MEMORY >> 20} MiB)"
        )
    max_memory, max_work = ceiling()
    if 128 * r * n > max_memory or n * r * p > max_work:
        raise KeyDerivationCostBarecatError(
            f"{source}scrypt costs N={n}, r={r}, p={p} need {128 * r * n >> 20} MiB and "
            f"{n * r * p / (1 << 18):g}x the default work; barecat derives keys with at most "
            f"{max_memory >> 20} MiB and {max_work / (1 << 18):g}x (the file is damaged or "
            "hostile; if its costs are meant, raise $BARECAT_SCRYPT_MAX_MEMORY or "
            "$BARECAT_SCRYPT_MAX_WORK)"
        )


def _valid(n: object, r: object, p: object) -> bool:
    """Costs scrypt is defined for (RFC 7914): N a power of two above 1 and below
    2^(16 r), r and p at least 1, r * p below 2^30."""
    if not (type(n) is int and type(r) is int and type(p) is int):
        return False
    if n < 2 or n & (n - 1) or r < 1 or p < 1 or r * p >= 1 << 30:
        return False
    return 16 * r >= 64 or n < 1 << (16 * r)  # (N is at most 64 bits anyway)


def _memory(n: int, r: int, p: int) -> int:
    """The bytes scrypt allots for costs N, r, p: its table and its p blocks."""
    return 128 * r * (n + p + 2)


def ceiling() -> tuple[int, int]:
    """(memory in bytes, work) that derivations may take: the defaults, or what the
    environment says.

    Raises:
        BarecatError: an environment value that is not a whole number.
    """
    limits = []
    for name, default in (("MEMORY", MAX_MEMORY), ("WORK", MAX_WORK)):
        text = os.environ.get(f"BARECAT_SCRYPT_MAX_{name}", "")
        try:
            limits.append(int(text) if text else default)
        except ValueError:
            raise BarecatError(
                f"$BARECAT_SCRYPT_MAX_{name} must be a whole number: {text!r}"
            ) from None
    return limits[0], limits[1]


def scrypt_key(secret: bytes, salt: bytes, n: int, r: int, p: int, where: str = "") -> bytes:
    """A 32-byte key from ``secret`` with scrypt, after :func:`check_scrypt_costs`.

    Args:
        secret: the passphrase's bytes (not empty).
        salt: the salt stored beside the costs.
        n: scrypt's N.
        r: scrypt's r.
        p: scrypt's p.
        where: what the costs were read from, for messages.

    Returns:
        The derived key.

    Raises:
        KeyDerivationCostBarecatError: costs out of range or above the ceiling.
        BarecatError: an empty secret.
    """
    if not secret:
        raise BarecatError("An empty passphrase cannot protect an archive")
    check_scrypt_costs(n, r, p, where)
    memory = min(_memory(n, r, p) + (1 << 20), _HASHLIB_MAX_MEMORY)
    try:
        return hashlib.scrypt(secret, salt=salt, n=n, r=r, p=p, maxmem=memory, dklen=32)
    except (
        ValueError,
        OverflowError,
        MemoryError,
    ) as e:  # (what OpenSSL refuses beyond the checks above)
        source = f"{where}: " if where else ""
        raise KeyDerivationCostBarecatError(
            f"{source}scrypt refused costs N={n}, r={r}, p={p}: {e}"
        ) from e


__all__ = ["MAX_MEMORY", "MAX_WORK", "ceiling", "check_scrypt_costs", "scrypt_key"]
