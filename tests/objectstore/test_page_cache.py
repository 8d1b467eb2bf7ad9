"""The bounded page cache of remote index pages (``barecat.objectstore.page_cache``),
against a model (a dict and a recency order), and its configured size."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barecat.objectstore.page_cache import DEFAULT_PAGE_CACHE_BYTES, PageCache, page_cache_bytes

operations = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.integers(0, 12), st.integers(0, 120)),
        st.tuples(st.just("get"), st.integers(0, 12), st.just(0)),
    ),
    max_size=80,
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(max_bytes=st.integers(0, 300), ops=operations)
def test_the_cache_behaves_as_a_bounded_lru_model(
    max_bytes: int, ops: list[tuple[str, int, int]]
) -> None:
    cache = PageCache(max_bytes)
    model: dict[int, bytes] = {}  # insertion order = recency order, oldest first
    hits = misses = 0
    for op, key, size in ops:
        if op == "put":
            value = bytes([key]) * size
            model.pop(key, None)
            if size <= max_bytes:
                model[key] = value
                while sum(map(len, model.values())) > max_bytes:
                    del model[next(iter(model))]
            cache.put(key, value)
        else:
            expected = model.pop(key, None)
            if expected is None:
                misses += 1
            else:
                hits += 1
                model[key] = expected
            assert cache.get(key) == expected
        assert len(cache) == len(model)
        assert cache.nbytes == sum(map(len, model.values())) <= max_bytes
    assert (cache.hits, cache.misses) == (hits, misses)
    assert all(cache.get(k) == v for k, v in model.items())


def test_threads_sharing_a_cache_keep_it_within_its_bound() -> None:
    cache = PageCache(64 << 10)
    errors: list[BaseException] = []

    def work(seed: int) -> None:
        try:
            for i in range(2000):
                key = (seed * 7 + i) % 97
                value = cache.get(key)
                if value is None:
                    cache.put(key, bytes([key]) * (1024 + key))
                else:
                    assert value == bytes([key]) * (1024 + key)
        except BaseException as e:  # reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert cache.nbytes <= 64 << 10 and cache.hits + cache.misses == 6 * 2000


def test_a_value_larger_than_the_bound_is_not_kept() -> None:
    cache = PageCache(100)
    cache.put("a", b"x" * 60)
    cache.put("a", b"y" * 101)  # replaces, but is too large: the key holds nothing
    assert cache.get("a") is None and cache.nbytes == 0 and len(cache) == 0
    cache.put("b", b"z" * 100)
    assert cache.get("b") == b"z" * 100
    cache.clear()
    assert len(cache) == 0 and cache.nbytes == 0
    with pytest.raises(ValueError):
        PageCache(-1)


def test_the_size_comes_from_the_caller_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("BARECAT_PAGE_CACHE", raising=False)
    assert page_cache_bytes() == DEFAULT_PAGE_CACHE_BYTES == 64 << 20
    assert page_cache_bytes(1000) == 1000
    assert page_cache_bytes("2M") == 2 << 20
    monkeypatch.setenv("BARECAT_PAGE_CACHE", "256M")
    assert page_cache_bytes() == 256 << 20
    assert page_cache_bytes("1K") == 1024
    monkeypatch.setenv("BARECAT_PAGE_CACHE", "lots")
    with pytest.raises(ValueError, match="BARECAT_PAGE_CACHE"):
        page_cache_bytes()
