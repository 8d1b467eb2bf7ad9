"""How long fuzz tests run: briefly in ``./run test``, long in ``./run fuzz``.

Every parser of bytes from disk or network has a fuzz test marked ``fuzz`` that takes its
hypothesis settings from :func:`fuzz_settings`. By default a test tries its quick count
of inputs; with ``BARECAT_FUZZ=1`` (what ``./run fuzz`` sets) it tries
``BARECAT_FUZZ_EXAMPLES`` inputs (default 20,000) with no deadline. Inputs that once
broke a parser stay as ``@example`` cases on its test, so they run every time.
"""

from __future__ import annotations

import contextlib
import os
import tracemalloc
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, settings


def fuzzing_long() -> bool:
    return os.environ.get("BARECAT_FUZZ", "") not in ("", "0")


def fuzz_settings(quick_examples: int) -> Any:
    """Hypothesis settings for a fuzz test: ``quick_examples`` inputs in a normal run."""
    examples = (
        int(os.environ.get("BARECAT_FUZZ_EXAMPLES", "20000")) if fuzzing_long() else quick_examples
    )
    return settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        derandomize=not fuzzing_long(),
    )


@contextlib.contextmanager
def bounded_memory(max_peak: int) -> Iterator[None]:
    """No allocation sized by a hostile length field: the block's peak of traced memory
    stays under ``max_peak`` bytes."""
    tracemalloc.start()
    try:
        yield
        peak = tracemalloc.get_traced_memory()[1]
        assert peak < max_peak, f"{peak:,} bytes allocated at once"
    finally:
        tracemalloc.stop()
