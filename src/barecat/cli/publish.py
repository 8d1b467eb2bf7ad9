"""``barecat publish ARCHIVE``: prepare a local archive for lazy reading from object
storage or a web server (``barecat.ops.publish`` does the work); this module words what
was done: whether the index was rewritten, the sidecar's parts and their sizes, the check.
Exit codes: 0 published (or already published), 1 an error.
"""

from __future__ import annotations

import argparse

from barecat.cli.parsing import Declared, registering
from barecat.cli.terminal import byte_count
from barecat.ops.publish import PublishSummary, publish

PUBLISH_EXAMPLES = """
barecat publish photos.barecat     # then upload photos.barecat, its -sidecar and -shard-*
barecat publish photos.barecat     # again after a change: rebuilds the stale sidecar
"""

PUBLISH_ABOUT = (
    "Prepare a local archive for reading from object storage or a web server without "
    "downloading its index: 64 KiB pages, a rollback journal, vacuumed, and a sidecar "
    "(ARCHIVE-sidecar) with the pages every lookup needs and a lookup table, so a remote "
    "reader finds a file with one request and reads it with one more. Checked after; run "
    "it again after any change (an archive already published is left untouched). barecat "
    "0.3.1 reads and writes a published archive as any other (a write makes the sidecar "
    "stale: readers then ignore it)."
)


def _arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("archive", help="Barecat archive path (local; publish before uploading)")


def run_publish(args: argparse.Namespace) -> int:
    result = publish(args.archive)
    if result.already_published:
        print(
            f"{args.archive}: already published ({result.files_checked} files checked, "
            f"sidecar {byte_count(result.sidecar_size)}, {result.seconds:.2f} s); "
            "nothing changed."
        )
        return 0
    for line in _lines(result):
        print(line)
    print(f"Published {args.archive} in {result.seconds:.2f} s.")
    return 0


def _lines(result: PublishSummary) -> list[str]:
    before, sidecar = result.layout_before, result.sidecar
    assert sidecar is not None
    lines = []
    if result.rewritten:
        lines.append(
            f"index rewritten: {before.page_size // 1024} KiB pages, {before.journal_mode} "
            f"journal, {before.free_pages} free pages -> 64 KiB pages, rollback journal, "
            f"vacuumed ({byte_count(result.index_size_before)} -> {byte_count(result.index_size)}, "
            f"{result.index_size // sidecar.page_size} pages)"
        )
    else:
        lines.append(
            f"index kept as it is: 64 KiB pages, rollback journal, vacuumed "
            f"({byte_count(result.index_size)}, {result.index_size // sidecar.page_size} pages)"
        )
    lines += [
        f"sidecar {result.sidecar_path}: {byte_count(sidecar.total_bytes)}",
        f"  head      {byte_count(sidecar.head_bytes):>10}  (directory of {sidecar.num_buckets} "
        f"buckets {byte_count(sidecar.directory_bytes)}, {sidecar.eager_pages} eager pages "
        f"{byte_count(sidecar.eager_bytes)} compressed, {sidecar.num_shards} shard sizes)",
        f"  interior  {byte_count(sidecar.interior_bytes):>10}  ({sidecar.interior_pages} "
        "interior b-tree pages, compressed)",
        f"  buckets   {byte_count(sidecar.bucket_bytes):>10}  ({sidecar.num_files} files in "
        f"{sidecar.num_buckets} buckets)",
        f"checked: {result.files_checked} files' addresses, absent paths, every copied page",
    ]
    return lines


register = registering(
    Declared("publish", run_publish, _arguments, PUBLISH_EXAMPLES, PUBLISH_ABOUT),
)
