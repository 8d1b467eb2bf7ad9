"""Writers and readers of the two index-addressed peers of the core benchmark.

- ``arrayrecord``: Google's ArrayRecord (the ``array_record`` package), one file written with
  ``group_size:1,uncompressed`` (one record per chunk, the layout meant for random access),
  read with ``readahead_buffer_size:0``; a record is addressed by its index, so a
  ``{path: index}`` dict is saved beside it with ``marshal``, as the floor keeps its offsets.
  Single read: ``reader.read([i])``; batch: ``reader.read(indices)``.
- ``lance``: a Lance dataset (the ``pylance`` package) with one ``large_binary`` column,
  written in one ``write_dataset`` call fed batch by batch from a thread; a row is addressed
  by its row number, with the same saved ``{path: row}`` dict. Single read:
  ``dataset.take([i])``; batch: ``dataset.take(indices)``.

``bench_stores`` registers these kinds next to its own. Module-level imports are the standard
library only (the packages are imported where used), so any interpreter can import this
module; :func:`unavailable` says why a kind cannot run here.
"""

from __future__ import annotations

import marshal
import os
import queue
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

KINDS = ("arrayrecord", "lance")
AR_NAME, LANCE_NAME, KEYS_NAME = "data.arrayrecord", "data.lance", "keys.marshal"
AR_WRITE_OPTIONS, AR_READ_OPTIONS = "group_size:1,uncompressed", "readahead_buffer_size:0"
LANCE_BATCH_ROWS = 1000  # rows per record batch handed to the Lance writer
SEQUENTIAL_CHUNK = 1000  # records per read in a storage-order pass

# the benchmark forks its 2-process readers before any Lance runtime of theirs starts
warnings.filterwarnings("ignore", message="lance is not fork-safe")


def unavailable(kind: str) -> str | None:
    """Why ``kind`` cannot be measured in this interpreter, or None if it can."""
    module = {"arrayrecord": "array_record.python.array_record_module", "lance": "lance"}[kind]
    package = {"arrayrecord": "array-record", "lance": "pylance"}[kind]
    try:
        __import__(module)
    except ImportError as e:
        return f"{package} is not installed ({e}; pip install -e '.[bench]')"
    return None


def _save_keys(location: str, keys: dict[str, int]) -> None:
    with open(os.path.join(location, KEYS_NAME), "wb") as f:
        marshal.dump(keys, f)


def _load_keys(location: str) -> dict[str, int]:
    with open(os.path.join(location, KEYS_NAME), "rb") as f:
        keys: dict[str, int] = marshal.load(f)
    return keys


def _read_file(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


# -- ArrayRecord -------------------------------------------------------------------------------


def arrayrecord_writer(location: str) -> tuple[Callable[[str, bytes], Any], Callable[[], Any]]:
    """(add_bytes, close) of a new ArrayRecord file in ``location``."""
    from array_record.python.array_record_module import ArrayRecordWriter

    writer = ArrayRecordWriter(os.path.join(location, AR_NAME), AR_WRITE_OPTIONS)
    keys: dict[str, int] = {}
    write = writer.write

    def add_bytes(rel: str, data: bytes) -> None:
        keys[rel] = len(keys)
        write(data)

    def close() -> None:
        writer.close()
        _save_keys(location, keys)

    return add_bytes, close


def arrayrecord_reader(location: str) -> dict[str, Any]:
    """read, read_many, storage_order and close of the ArrayRecord store at ``location``."""
    from array_record.python.array_record_module import ArrayRecordReader

    keys = _load_keys(location)
    reader = ArrayRecordReader(os.path.join(location, AR_NAME), AR_READ_OPTIONS)
    read_records = reader.read

    def read(path: str) -> bytes:
        data: bytes = read_records([keys[path]])[0]
        return data

    def read_many(paths: list[str]) -> list[bytes]:
        found: list[bytes] = read_records([keys[p] for p in paths])
        return found

    def storage_order() -> Iterator[bytes]:
        n = reader.num_records()
        for begin in range(0, n, SEQUENTIAL_CHUNK):
            yield from read_records(begin, min(n, begin + SEQUENTIAL_CHUNK))

    return {"read": read, "read_many": read_many, "storage_order": storage_order,
            "close": reader.close}  # fmt: skip


# -- Lance -------------------------------------------------------------------------------------


def lance_writer(location: str) -> tuple[Callable[[str, bytes], Any], Callable[[], Any]]:
    """(add_bytes, close) of a new Lance dataset in ``location``.

    ``write_dataset`` pulls record batches from a queue in a thread of its own, so files are
    handed over one at a time and at most a few batches are held in memory.
    """
    import lance
    import pyarrow as pa

    schema = pa.schema([("data", pa.large_binary())])
    batches: queue.Queue[Any] = queue.Queue(maxsize=4)
    failure: list[BaseException] = []

    def produce() -> Iterator[Any]:
        while (batch := batches.get()) is not None:
            yield batch

    def write() -> None:
        try:
            source = pa.RecordBatchReader.from_batches(schema, produce())
            lance.write_dataset(source, os.path.join(location, LANCE_NAME), schema=schema)
        except BaseException as e:
            failure.append(e)
            while batches.get() is not None:  # let the producer finish
                pass

    thread = threading.Thread(target=write, name="lance-writer", daemon=True)
    thread.start()
    keys: dict[str, int] = {}
    pending: list[bytes] = []

    def flush() -> None:
        if pending:
            batches.put(pa.record_batch([pa.array(pending, pa.large_binary())], schema=schema))
            pending.clear()

    def add_bytes(rel: str, data: bytes) -> None:
        keys[rel] = len(keys)
        pending.append(data)
        if len(pending) == LANCE_BATCH_ROWS:
            flush()

    def close() -> None:
        flush()
        batches.put(None)
        thread.join()
        if failure:
            raise RuntimeError("writing the Lance dataset failed") from failure[0]
        _save_keys(location, keys)

    return add_bytes, close


def lance_reader(location: str) -> dict[str, Any]:
    """read, read_many, storage_order and close of the Lance dataset at ``location``."""
    import lance

    keys = _load_keys(location)
    take = lance.dataset(os.path.join(location, LANCE_NAME)).take

    def read(path: str) -> bytes:
        data: bytes = take([keys[path]], columns=["data"]).column(0)[0].as_py()
        return data

    def read_many(paths: list[str]) -> list[bytes]:
        found: list[bytes] = take([keys[p] for p in paths], columns=["data"]).column(0).to_pylist()
        return found

    def storage_order() -> Iterator[bytes]:
        dataset = lance.dataset(os.path.join(location, LANCE_NAME))
        for batch in dataset.to_batches(columns=["data"]):
            yield from batch.column(0).to_pylist()

    return {"read": read, "read_many": read_many, "storage_order": storage_order,
            "close": lambda: None}  # fmt: skip


WRITERS: dict[str, Callable[[str], tuple[Callable[[str, bytes], Any], Callable[[], Any]]]] = {
    "arrayrecord": arrayrecord_writer,
    "lance": lance_writer,
}
READERS: dict[str, Callable[[str], dict[str, Any]]] = {
    "arrayrecord": arrayrecord_reader,
    "lance": lance_reader,
}


def add_path_of(add_bytes: Callable[[str, bytes], Any]) -> Callable[[str, str], Any]:
    """The writer's add-from-disk: open + read + ``add_bytes`` (neither has its own)."""

    def add_path(full: str, rel: str) -> None:
        add_bytes(rel, _read_file(full))

    return add_path


def contents(kind: str, location: str) -> dict[str, Any]:
    """Number of files and payload bytes, read back through the store's reader."""
    reader = READERS[kind](location)
    try:
        sizes = [len(data) for data in reader["storage_order"]()]
    finally:
        reader["close"]()
    return {"files": len(sizes), "bytes": sum(sizes)}


def index_bytes(location: str) -> int:
    """The saved ``{path: index}`` dict, what either peer needs beside itself to find a path."""
    return os.path.getsize(os.path.join(location, KEYS_NAME))
