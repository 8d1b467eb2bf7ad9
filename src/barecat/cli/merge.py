"""``barecat merge`` and ``barecat subset``: archives combined, or cut down, into a new one.

Thin front ends over ``barecat.ops.merge`` and ``barecat.ops.subset``: they check the
option combinations and whether the output may be written (it must not exist unless
``-f`` replaces it or ``-a`` appends to it; it must not be one of the inputs), show a
progress bar on a terminal, and end with a one-line summary. A new or replaced output
is built under a temporary name and renamed into place when complete
(``building_archive``), so a killed run leaves no output (or the old one) rather than a
partial archive that would pass ``verify``; only ``-a`` adds to an existing output in
place, one whole input at a time. Also the reference's legacy ``barecat-merge`` and
``barecat-merge-symlink`` scripts (:func:`legacy_merge`, :func:`legacy_merge_symlink`),
which append to an existing output like the originals.
"""

from __future__ import annotations

import argparse
import contextlib
import os
from collections.abc import Callable, Iterator, Sequence

from barecat.archive import Barecat
from barecat.cli.parsing import (
    Declared,
    add_filter_options,
    add_flag,
    add_passphrase_option,
    add_shard_limit_option,
    check_pattern_alone,
    registering,
    size,
)
from barecat.cli.running import run_legacy
from barecat.cli.sealing import open_archive, passphrase_source
from barecat.cli.summary import Summary
from barecat.cli.terminal import Progress, describe, error, wants_progress
from barecat.exceptions import BarecatError, BarecatIntegrityError, FileExistsBarecatError
from barecat.glob import PathFilter
from barecat.layout import archive_exists, base_path, index_path
from barecat.ops.copy_files import CopyStats
from barecat.ops.merge import check_source
from barecat.transfer.convert.merging import barecat_inputs, is_tar_or_zip, merge_output

MERGE_EXAMPLES = """
barecat merge -o all.barecat train.barecat val.barecat test.barecat
barecat merge -o all.barecat -s 50G --ignore-duplicates day*.barecat
barecat merge -o all.barecat -a day8.barecat          # add to an existing output
barecat merge -o view.barecat --symlink a.barecat b.barecat   # no copying: links shards
barecat merge -o all.barecat --as-subdirs train.barecat val.barecat  # train/..., val/...
barecat merge -o all.barecat old.barecat new-photos.tar.gz extra.zip   # tar/zip inputs too
"""

SUBSET_EXAMPLES = """
barecat subset photos.barecat -o jpgs.barecat --pattern '**/*.jpg'
barecat subset photos.barecat -o some.barecat -x '*.tmp' -x 'thumbs/'
barecat subset photos.barecat -o train.barecat -x '*.tmp' -i 'train/' -x '**'   # train only
barecat subset photos.barecat -o part.barecat -f -s 1G --pattern 'train/**'
"""


MERGE_ABOUT = (
    "Merge archives into one output archive, copying their bytes (or, with --symlink, "
    "linking their shards). The first archive to have a path keeps it."
)
SUBSET_ABOUT = (
    "Copy the files of ARCHIVE chosen by a glob or by include/exclude rules into a new "
    "archive, in storage order."
)


def _merge_arguments(merge: argparse.ArgumentParser) -> None:
    merge.add_argument(
        "archives", nargs="+", metavar="ARCHIVE", help="Archives to merge (barecat, tar or zip)"
    )
    _output_options(merge)
    mode = merge.add_mutually_exclusive_group()
    add_flag(mode, "-f", "Overwrite OUTPUT if it exists")
    mode.add_argument(
        "-a",
        "--append",
        action="store_true",
        help="Add to OUTPUT if it exists; paths it has are kept (implies --ignore-duplicates)",
    )
    merge.add_argument(
        "--symlink",
        action="store_true",
        help="Link the inputs' shards instead of copying them (inputs must stay in place "
        "and unchanged; not with -a)",
    )
    merge.add_argument(
        "--ignore-duplicates",
        action="store_true",
        help="Skip files whose path is already in the output (default: error)",
    )
    merge.add_argument(
        "--as-subdirs",
        action="store_true",
        help="Put each archive in a directory named after it (minus its extension)",
    )
    merge.add_argument("--prefix", metavar="PATH", default="", help="Put everything under PATH")
    _filter_options(merge)


def _subset_arguments(subset: argparse.ArgumentParser) -> None:
    subset.add_argument("archive", help="Source archive")
    _output_options(subset)
    add_flag(subset, "-f", "Overwrite OUTPUT if it exists")
    _filter_options(subset)


def _output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", required=True, help="Output archive")
    add_shard_limit_option(
        parser, "Start a new output shard beyond SIZE (e.g. 1G, 500M). Default: unlimited"
    )
    add_flag(parser, "-q", "No progress bar or summary")
    add_passphrase_option(parser)


PATTERN_HELP = (
    "Only files matching GLOB ('**' spans directories; 'dir/' means 'dir/**'); "
    "incompatible with -i/-x"
)


def _filter_options(parser: argparse.ArgumentParser) -> None:
    add_filter_options(parser, ["-x", "--exclude"], ordered=True, pattern=PATTERN_HELP)


def _path_filter(args: argparse.Namespace, command: str) -> PathFilter | None:
    """The -i/-x rules in the order given (rsync's: the first match decides)."""
    check_pattern_alone(args)
    path_filter = PathFilter.from_rules(args.filter_rules)
    if path_filter.ignored_includes:
        error(
            "warning: -i after the last -x changes nothing, since what no rule matches is "
            "kept (as in rsync); to keep only what -i matches, end with -x '**'",
            command=command,
        )
    return None if path_filter.selects_everything else path_filter


def _check_output(output: str, inputs: Sequence[str], allowed: bool, hint: str) -> None:
    """Refuse before anything is opened: every input must be readable, an existing output
    needs to be ``allowed`` (-f, -a), and the output must not be an input (-f would
    delete it)."""
    for source in inputs:
        check_source(source)
        if _same_archive(output, source):
            raise ValueError(f"The output {output} is also an input")
    if archive_exists(output) and not allowed:
        raise ValueError(f"Output {output!r} already exists; {hint}")


def _same_archive(a: str, b: str) -> bool:
    left, right = index_path(base_path(a)), index_path(base_path(b))
    try:
        return os.path.samefile(left, right)
    except OSError:
        return os.path.abspath(left) == os.path.abspath(right)


def _count_files(paths: Sequence[str]) -> int | None:
    total = 0
    for path in paths:
        if not archive_exists(path):
            return None
        with Barecat(path) as bc:
            total += bc.num_files
    return total


def run_merge(args: argparse.Namespace) -> int:
    if args.symlink and args.append:
        raise ValueError("--append is not supported with --symlink")
    with _converted_inputs(args.archives, args.output, args.symlink) as inputs:
        return _merge(args, inputs, dict(zip(inputs, args.archives, strict=True)))


@contextlib.contextmanager
def _converted_inputs(inputs: list[str], output: str, symlink: bool) -> Iterator[list[str]]:
    """Tar and zip inputs converted to temporary archives beside the output, removed
    afterwards (``barecat_inputs``); refused with ``--symlink``."""
    if symlink and any(is_tar_or_zip(p) for p in inputs):
        raise ValueError(
            "--symlink is not supported with tar/zip inputs: it links archives' shards, and "
            "a tar or zip file has none; drop --symlink, or make it an archive first with "
            "'barecat convert --wrap'"
        )

    def skipped(path: str, name: str, reason: str) -> None:
        error(f"{path}: skipped {name}: {reason}", command="merge")

    with barecat_inputs(inputs, output, skipped) as converted:
        yield converted


def _merge(args: argparse.Namespace, inputs: list[str], names: dict[str, str]) -> int:
    summary = Summary("merged", quiet=args.quiet)
    path_filter = _path_filter(args, "merge")
    _check_output(
        args.output, inputs, args.force or args.append, "use -f to overwrite or -a to append"
    )
    show = wants_progress(args.quiet)
    filtered = args.pattern is not None or path_filter is not None
    total = _count_files(inputs) if show and not filtered else None
    current = [""]

    def on_input(path: str, num_files: int) -> None:
        current[0] = names.get(path, path)

    output = _output_archive(args, args.output, args.force, args.shard_size_limit)
    with output as out, Progress("merge", total, show) as bar:
        try:
            result = out.merge(
                inputs,
                ignore_duplicates=args.ignore_duplicates or args.append,
                symlink=args.symlink,
                prefix=args.prefix,
                as_subdirs=args.as_subdirs,
                pattern=args.pattern,
                path_filter=path_filter,
                on_progress=bar.advance,
                on_input=on_input,
            )
        except BarecatError as e:
            bar.close()
            if isinstance(e, BarecatIntegrityError):
                raise  # an input that fails its checks: a new output does not appear at all
            hint = ""
            if isinstance(e, FileExistsBarecatError):
                hint = ". Use --ignore-duplicates to keep the first copy and skip later ones"
            error(
                f"{describe(e)} (in {current[0]}; nothing of it was added){hint}", command="merge"
            )
            return 1
    _summary(summary, result.total, _archives(len(inputs)), args.output)
    return 0


def _output_archive(
    args: argparse.Namespace, output: str, replace: bool, shard_size_limit: int | None
) -> contextlib.AbstractContextManager[Barecat]:
    """The output archive, for writing (``merge_output``: an existing one is added to in
    place unless ``replace``), with the passphrase source: encrypted files it takes need
    it for its index digest."""
    passphrase = passphrase_source(args, if_encrypted=True)
    return merge_output(output, replace, shard_size_limit, {"passphrase": passphrase})


def run_subset(args: argparse.Namespace) -> int:
    summary = Summary("copied", quiet=args.quiet)
    path_filter = _path_filter(args, "subset")
    _check_output(args.output, [args.archive], args.force, "use -f to overwrite")
    show = wants_progress(args.quiet)
    with open_archive(args.archive, args) as src:
        selection = src.select_entries(args.pattern, path_filter)
        total = src.num_files if selection is None else len(selection.files)
        output = _output_archive(args, args.output, args.force, args.shard_size_limit)
        with output as out, Progress("subset", total, show) as bar:
            stats = out.take_subset(src, selection, bar.advance)
    _summary(summary, stats, args.archive, args.output)
    return 0


def _archives(count: int) -> str:
    return f"{count} archive" + ("" if count == 1 else "s")


def _summary(summary: Summary, stats: CopyStats, source: str, output: str) -> None:
    """End with the summary: the files taken, the shards linked, those already present."""
    where = f"from {source} into {output}"
    if stats.shards_linked:
        n = stats.shards_linked
        where += f" ({n} shard{'' if n == 1 else 's'} linked)"
    summary.skip("already present", stats.skipped)
    summary.finish(stats.files, stats.bytes, where)


# -- the reference's legacy scripts --------------------------------------------------------


def _legacy_parser(prog: str, with_size: bool) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog, description="Merge existing Barecat archives into one."
    )
    parser.add_argument("input_paths", metavar="N", nargs="+", help="paths to the archives")
    parser.add_argument("--output", required=True, help="output path")
    if with_size:
        parser.add_argument(
            "--shard-size-limit", type=size, default=None, help="maximum size of a shard"
        )
    parser.add_argument("--overwrite", action="store_true", help="overwrite an existing output")
    parser.add_argument(
        "--ignore-duplicates",
        action="store_true",
        help="skip a file whose path an earlier archive had (default: error)",
    )
    return parser


def _legacy_body(symlink: bool) -> Callable[[argparse.Namespace], int]:
    def body(args: argparse.Namespace) -> int:
        summary = Summary("merged")
        _check_output(args.output, args.input_paths, True, "")  # an existing one is added to
        limit = getattr(args, "shard_size_limit", None)
        with _output_archive(args, args.output, args.overwrite, limit) as out:
            result = out.merge(
                args.input_paths, ignore_duplicates=args.ignore_duplicates, symlink=symlink
            )
        _summary(summary, result.total, _archives(len(args.input_paths)), args.output)
        return 0

    return body


def legacy_merge(argv: Sequence[str] | None = None) -> int:
    """``barecat-merge --output OUT [--shard-size-limit N] [--overwrite] [--ignore-duplicates]
    ARCHIVES...``."""
    parser = _legacy_parser("barecat-merge", with_size=True)
    return run_legacy("barecat-merge", "barecat merge", parser, _legacy_body(False), argv)


def legacy_merge_symlink(argv: Sequence[str] | None = None) -> int:
    """``barecat-merge-symlink --output OUT [--overwrite] [--ignore-duplicates] ARCHIVES...``."""
    parser = _legacy_parser("barecat-merge-symlink", with_size=False)
    return run_legacy(
        "barecat-merge-symlink", "barecat merge --symlink", parser, _legacy_body(True), argv
    )


register = registering(
    Declared("merge", run_merge, _merge_arguments, MERGE_EXAMPLES, MERGE_ABOUT),
    Declared("subset", run_subset, _subset_arguments, SUBSET_EXAMPLES, SUBSET_ABOUT),
)
