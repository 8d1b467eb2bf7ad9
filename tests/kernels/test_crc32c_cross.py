"""The compiled core's CRC32C (``src/barecat/kernels/crc32c.h``) on ARMv8 as well as here:
``crc32c_harness.c`` (beside this file: it is this test's alone) built with Debian's
aarch64 cross compiler, static, and run under qemu's user-mode emulation, on qemu's
default CPU and on two models of real cores; and built with the native compiler and run
here. Each run is fed the published vectors, every length up to 600, the lengths either
side of the three-stream loop's blocks (to 1 MiB), every alignment of the start and
starting values; both its CRCs (the CPU's instructions, the tables) must equal the
``crc32c`` package's, and the instructions must have been detected where the CPU has them.

Where the cross compiler, its C library or qemu is missing, the ARM tests skip naming the
Debian packages (this test installs nothing).
"""

from __future__ import annotations

import os
import platform
import random
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import TESTS
from helpers.crc_vectors import BOUNDARIES, VECTORS, expected

HARNESS = TESTS / "kernels" / "crc32c_harness.c"
CROSS_CC = "aarch64-linux-gnu-gcc"
QEMU = shutil.which("qemu-aarch64") or shutil.which("qemu-aarch64-static")
ARM_PACKAGES = "gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user (or qemu-user-static)"
ARM_DETECTED = "armv8-crc"
"""What the harness detects under qemu: every aarch64 CPU model of qemu (7.2: a64fx,
cortex-a35 to -a76, neoverse-n1, max) has the CRC extension."""

Blob = tuple[bytes, int, int]
"""A harness input: the bytes, the starting value, the start's distance from 8-byte
alignment."""


def _blobs() -> list[Blob]:
    """What every run is fed (about 9 MiB)."""
    rng = random.Random(37)
    blobs: list[Blob] = [(data, 0, 0) for data, _ in VECTORS]
    blobs += [(data, 0, 5) for data, _ in VECTORS]
    for n in range(601):
        data = rng.randbytes(n)
        blobs += [(data, 0, n % 8), (data, rng.getrandbits(32), (n + 3) % 8)]
    for n in BOUNDARIES:
        data = rng.randbytes(n)
        blobs += [(data, rng.getrandbits(32) if skew else 0, skew) for skew in (0, 1, 3, 7)]
    blobs += [(rng.randbytes(100), value, 2) for value in (1, 0x7FFFFFFF, 0xFFFFFFFF)]
    return blobs


class Cases:
    """The blobs every run is fed, framed for the harness, and their CRCs by the package."""

    def __init__(self) -> None:
        self.blobs = _blobs()
        self.frames = b"".join(
            struct.pack("<III", value, skew, len(data)) + data for data, value, skew in self.blobs
        )
        self.want = [expected(data, value) for data, value, _ in self.blobs]
        assert self.want[: len(VECTORS)] == [crc for _, crc in VECTORS]  # (as published)

    def run(self, command: list[str]) -> str:
        """Run the harness by ``command`` and check both its CRCs of every blob
        (crc32c_of, crc32c_portable_of); what it detected."""
        done = subprocess.run(command, input=self.frames, capture_output=True, timeout=300)
        assert done.returncode == 0, (command, done.returncode, done.stderr.decode()[-2000:])
        first, *lines = done.stdout.decode().splitlines()
        assert first.startswith("detected: ") and len(lines) == len(self.blobs), first
        wrong = [
            f"{len(data)} bytes at skew {skew} from {value:#010x}: {line}, not {want:08x}"
            for (data, value, skew), line, want in zip(self.blobs, lines, self.want, strict=True)
            if line != f"{want:08x} {want:08x}"
        ]
        assert not wrong, f"{len(wrong)} of {len(lines)} wrong, the first: " + "; ".join(wrong[:5])
        return first.removeprefix("detected: ")


@pytest.fixture(scope="module")
def cases() -> Cases:
    return Cases()


def _build(compiler: str, out: Path, *flags: str) -> Path:
    """``crc32c_harness.c`` built by ``compiler`` at ``out``."""
    command = [compiler, "-O2", "-Wall", "-Wextra", *flags, "-o", str(out)]
    done = subprocess.run([*command, str(HARNESS)], capture_output=True, text=True)
    assert done.returncode == 0, (command, done.stderr[-4000:])
    return out


@pytest.fixture(scope="module")
def arm_harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The harness built for aarch64 (static: it needs no aarch64 libraries to run)."""
    libc = ""
    if shutil.which(CROSS_CC):
        found = subprocess.run([CROSS_CC, "-print-file-name=libc.a"], capture_output=True)
        libc = found.stdout.decode().strip()
    if not (QEMU and os.path.isabs(libc)):  # (the compiler says a bare name: not found)
        pytest.skip(f"the ARMv8 CRC32C runs under qemu: apt-get install {ARM_PACKAGES}")
    return _build(CROSS_CC, tmp_path_factory.mktemp("arm") / "harness", "-static")


def _native_detected() -> str | None:
    """What the harness should detect on this machine's CPU, from the flags its kernel
    lists (None where it has no /proc/cpuinfo)."""
    try:
        with open("/proc/cpuinfo") as info:
            lines = info.read().splitlines()
    except FileNotFoundError:
        return None
    flags = {f for line in lines if line.startswith(("flags", "Features")) for f in line.split()}
    machine = platform.machine()
    if machine in ("x86_64", "AMD64"):
        return "sse4.2" if "sse4_2" in flags else "none"
    if machine in ("aarch64", "arm64"):
        return ARM_DETECTED if "crc32" in flags else "none"
    return "none"


@pytest.mark.parametrize("cpu", ["max", "cortex-a53", "neoverse-n1"])
def test_armv8_crc_instructions_under_qemu(arm_harness: Path, cases: Cases, cpu: str) -> None:
    """On qemu's default CPU (max), on the Cortex-A53 (ARMv8.0, the CRC extension then
    optional) and on the Neoverse N1 (ARMv8.2), the instructions are found and used, and
    both CRCs are right."""
    assert QEMU is not None
    assert cases.run([QEMU, "-cpu", cpu, str(arm_harness)]) == ARM_DETECTED


def test_armv8_without_the_instructions_takes_the_tables(arm_harness: Path, cases: Cases) -> None:
    """crc32c_of on the tables (as on a CPU without the CRC extension: qemu has no model of
    one, so the harness is told) is right too."""
    assert QEMU is not None
    assert cases.run([QEMU, str(arm_harness), "--portable"]) == ARM_DETECTED


@pytest.mark.skipif(sys.platform == "win32", reason="the harness is built with a POSIX cc")
def test_native(tmp_path: Path, cases: Cases) -> None:
    """The same harness built for this machine: the instructions detected where its CPU
    lists them (SSE4.2 on x86-64), and both CRCs right."""
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler (Debian package gcc)")
    detected = cases.run([str(_build(compiler, tmp_path / "harness"))])
    assert detected == (_native_detected() or detected)
