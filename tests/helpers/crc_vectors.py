"""The CRC32C inputs the kernels' tests share: the published vectors, the lengths around
the blocks of the compiled core's three-stream loop, and the answer of the ``crc32c``
package (the reference every CRC32C here is checked against)."""

from __future__ import annotations

from typing import Any

import crc32c as crc32c_package

# RFC 3720 (iSCSI), appendix B.4 (with its SCSI Read (10) command PDU), the check value of
# the CRC catalogue, and nothing
ISCSI_READ_PDU = bytes.fromhex(
    "01c00000000000000000000000000000"
    "14000000000004000000001400000018"
    "28000000000000000200000000000000"
)
VECTORS = [
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (b"123456789", 0xE3069283),
    (b"", 0),
    (ISCSI_READ_PDU, 0xD9963A56),
]
VECTOR_NAMES = ["zeros", "ones", "ascending", "descending", "123456789", "empty", "iscsi-pdu"]

LONG_BLOCK, SHORT_BLOCK = 4096, 256  # bytes a stream in crc32c.h's two loops
BOUNDARIES = sorted(
    {
        n + d
        for k in (1, 2, 3)
        for n in (3 * LONG_BLOCK * k, 3 * SHORT_BLOCK * k)
        for d in (-1, 0, 1)
    }
    | {3 * LONG_BLOCK + 3 * SHORT_BLOCK + 7, 32767, 32768, 32769, 1 << 20, (1 << 20) + 13}
)
"""Lengths either side of the three-stream loops' blocks (and of 32 KiB and 1 MiB)."""


def expected(data: Any, value: int = 0) -> int:
    """The CRC32C of ``data`` continuing from ``value``, by the ``crc32c`` package."""
    return int(crc32c_package.crc32c(bytes(data), value))
