"""``barecat convert``: tar and zip into barecat and back, from files or streams.

The direction comes from the names: a tar or zip name on one side (``.tar``, ``.tar.gz``,
``.tgz``, ``.tar.bz2``, ``.tar.xz``, ``.tar.zst``, ``.zip``) makes the other side the
barecat archive. ``--stdin``/``--stdout`` put a format name in place of the file. Members
that cannot be stored (devices, unsafe names) are listed on stderr and the exit code is 1,
with everything else converted. Going out to tar or zip, index paths that are not
canonical are normalized and those climbing out of the root ('../x') left out, each
reported, the latter with exit code 1.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Sequence

from barecat.archive import Barecat, Passphrase
from barecat.cli.parsing import (
    Declared,
    add_flag,
    add_passphrase_option,
    add_shard_limit_option,
    registering,
    size,
)
from barecat.cli.running import Interrupted, run_legacy
from barecat.cli.sealing import (
    PASSPHRASE_ENV,
    add_sealing_options,
    new_archive_options,
    new_passphrase,
    passphrase_source,
    read_passphrase,
)
from barecat.cli.summary import Summary, reason_kind
from barecat.cli.terminal import Progress, error, wants_progress
from barecat.coldcrate import ChunkReader
from barecat.entries import BarecatEntryInfo, BarecatFileInfo
from barecat.exceptions import BarecatError
from barecat.layout import is_sqlite_file
from barecat.transfer import (
    ExportResult,
    ImportResult,
    archive2barecat,
    barecat2archive,
    barecat2barecat,
    barecat2coldcrate,
    barecat2stream,
    coldcrate2barecat,
    format_of_name,
    parse_format,
    stream2barecat,
    wrap_archive,
)
from barecat.transfer.ingest.dictionary_samples import sample_archive

EXAMPLES = """
barecat convert dataset.tar.gz dataset.barecat        # tar/zip -> barecat
barecat convert dataset.barecat dataset.zip           # barecat -> tar/zip
barecat convert -s 10G huge.tar huge.barecat          # shards of at most 10 GB
curl -s URL | barecat convert --stdin tar.gz data.barecat
barecat convert --stdout data.barecat tar | ssh host tar xf -
barecat convert --root-dir project data.barecat data.tar.zst
barecat convert --wrap data.tar data.barecat          # index over the tar, no copy
barecat convert --wrap shard-*.tar dataset.barecat    # WebDataset shards: one archive
barecat convert images.coldcrate images.barecat       # ColdCrate chunks, both ways
barecat convert --encrypt data.barecat data.coldcrate # passphrase: $BARECAT_PASSPHRASE
barecat convert --compress zstd --encrypt plain.barecat sealed.barecat  # re-seal a copy
barecat convert sealed.barecat plain.barecat          # a plain copy (the reference reads it)
"""


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "input",
        nargs="+",
        help="Input file (a format name such as tar.gz with --stdin; with --wrap, one or "
        "more tar/zip files, each becoming a shard)",
    )
    parser.add_argument("output", help="Output file (a format name such as tar with --stdout)")
    add_shard_limit_option(parser, "Shard size limit of a barecat output (500M, 10G)")
    add_flag(parser, "-f", "Overwrite the output")
    parser.add_argument("--stdin", action="store_true", help="Read the input from stdin")
    parser.add_argument("--stdout", action="store_true", help="Write the output to stdout")
    parser.add_argument(
        "--root-dir", metavar="NAME", help="Put everything under NAME/ in a tar/zip output"
    )
    parser.add_argument(
        "--wrap",
        action="store_true",
        help="Index an uncompressed tar or stored zip in place: it becomes the shard, "
        "no bytes are copied",
    )
    add_sealing_options(parser, "a barecat output (a .coldcrate output: AES-256-XTS)")
    add_passphrase_option(parser)
    add_flag(parser, "-q", "No progress bar or summary")


def _is_barecat_side(path: str) -> bool:
    return format_of_name(path) is None or is_sqlite_file(path)


def run_convert(args: argparse.Namespace) -> int:
    summary = Summary("converted", quiet=args.quiet)
    try:
        result = _convert(args)
    except KeyboardInterrupt:
        if args.stdout:  # (a stream: what went out is out)
            raise
        raise Interrupted(
            f"nothing was written ({args.output} appears only when complete): run the command again"
        ) from None
    code = _report(result)
    for _, reason in result.skipped:
        summary.skip(reason_kind(reason))
    where = "to stdout" if args.stdout else f"into {args.output}"
    summary.finish(result.files, result.bytes, where)
    return code


def _convert(args: argparse.Namespace) -> ImportResult | ExportResult:
    """Convert as the options say; returns what went over (nothing said yet)."""
    if args.stdin and args.stdout:
        raise ValueError("--stdin and --stdout cannot be combined: one side is a barecat file")
    if args.wrap:
        if args.stdin or args.stdout:
            raise ValueError("--wrap needs an input file to index in place, not a stream")
        if args.compress or args.encrypt or args.dictionary or args.level is not None:
            raise ValueError(
                "--wrap keeps the input's bytes as they are: it cannot compress or encrypt "
                "(convert without --wrap to copy them sealed)"
            )
        return wrap_archive(args.input, args.output, overwrite=args.force)
    if len(args.input) != 1:
        raise ValueError("several inputs are only taken by --wrap (one shard each)")
    args.input = args.input[0]
    if COLDCRATE_SUFFIX in (_suffix(args.input), _suffix(args.output)):
        return _convert_coldcrate(args)
    with Progress("convert", None, wants_progress(args.quiet)) as progress:
        if args.stdout:
            exported = barecat2stream(
                args.input,
                sys.stdout.buffer,
                parse_format(args.output),
                args.root_dir,
                on_entry=lambda entry: _advance(progress, entry),
                passphrase=_source_key(args),
            )
            sys.stdout.buffer.flush()
            return exported
        if args.stdin or not _is_barecat_side(args.input) or not os.path.exists(args.input):
            if args.stdin:  # (the input names the format)
                source = functools.partial(
                    stream2barecat, sys.stdin.buffer, parse_format(args.input)
                )
            else:
                source = functools.partial(archive2barecat, args.input)
            return source(
                args.output,
                args.shard_size_limit,
                args.force,
                on_stored=progress.advance,
                archive_options=new_archive_options(args),
            )
        if format_of_name(args.output) is None:
            source_key = _source_key(args)

            def samples() -> list[bytes]:
                with Barecat(args.input, passphrase=source_key) as src:
                    return sample_archive(src)

            result = barecat2barecat(
                args.input,
                args.output,
                args.shard_size_limit,
                args.force,
                passphrase=source_key,
                archive_options=new_archive_options(args, samples),
                on_stored=progress.advance,
            )
            return result
        if args.shard_size_limit is not None:
            raise ValueError("-s/--shard-size-limit applies only to a barecat output")
        if not args.force and os.path.lexists(args.output):
            raise FileExistsError(f"{args.output} exists (use -f to overwrite)")
        exported = barecat2archive(
            args.input,
            args.output,
            args.root_dir,
            on_entry=lambda entry: _advance(progress, entry),
            passphrase=_source_key(args),
        )
    return exported


def _advance(progress: Progress, entry: BarecatEntryInfo) -> None:
    if isinstance(entry, BarecatFileInfo):  # a link's bytes are its target: not counted
        progress.advance(1, 0 if entry.is_symlink_entry else entry.size or 0)


def _report(result: ImportResult | ExportResult) -> int:
    """Tell the members left out and the index paths that went out under another name;
    returns the exit code (1 if any were left out)."""
    if isinstance(result, ExportResult):
        for name, member in result.renamed:
            error(f"{name}: written as {member!r}, its canonical form", command="convert")
    for name, reason in result.skipped:
        error(f"skipped {name}: {reason}", command="convert")
    return 1 if result.skipped else 0


def legacy_archive2barecat(argv: Sequence[str] | None = None) -> int:
    """The reference's ``archive2barecat ARCHIVE_FILE BARECAT_FILE`` script."""
    parser = argparse.ArgumentParser(
        prog="archive2barecat", description="Convert a tar or zip archive to a Barecat archive."
    )
    parser.add_argument("archive_file", help="path to the tar or zip file")
    parser.add_argument("barecat_file", help="path to the target barecat file")
    parser.add_argument("--shard-size-limit", type=size, help="maximum size of a shard")
    parser.add_argument("--overwrite", action="store_true", help="overwrite existing files")

    def body(args: argparse.Namespace) -> int:
        return _report(
            archive2barecat(
                args.archive_file, args.barecat_file, args.shard_size_limit, args.overwrite
            )
        )

    return run_legacy("archive2barecat", "barecat convert", parser, body, argv)


def legacy_barecat2archive(argv: Sequence[str] | None = None) -> int:
    """The reference's ``barecat2archive BARECAT_FILE ARCHIVE_FILE`` script."""
    parser = argparse.ArgumentParser(
        prog="barecat2archive", description="Convert a Barecat archive to a tar or zip archive."
    )
    parser.add_argument("barecat_file", help="path to the barecat file")
    parser.add_argument("archive_file", help="path to the target archive file")

    def body(args: argparse.Namespace) -> int:
        return _report(barecat2archive(args.barecat_file, args.archive_file))

    return run_legacy("barecat2archive", "barecat convert", parser, body, argv)


COLDCRATE_SUFFIX = ".coldcrate"


def _suffix(path: str) -> str:
    return os.path.splitext(path)[1].lower()


def _source_key(args: argparse.Namespace) -> Passphrase:
    """The passphrase source of the archive converted: a passphrase given says it is
    encrypted, unless ``--encrypt`` (then it is the output's, and the input may be plain)."""
    return passphrase_source(args, if_encrypted=getattr(args, "encrypt", False))


def _chunk_passphrase(args: argparse.Namespace) -> str | None:
    """The passphrase of the input chunk if its header says it is encrypted."""
    with ChunkReader.open(args.input) as probe:
        if not probe.header.encryption:
            return None
    try:
        return read_passphrase(args.passphrase_file)
    except BarecatError as e:
        raise BarecatError(f"{args.input} is encrypted: {e}") from None


def _convert_coldcrate(args: argparse.Namespace) -> ImportResult:
    """ColdCrate chunks in or out, by the mapping of barecat.transfer.convert.coldcrate."""
    if args.stdin or args.stdout or args.root_dir:
        raise ValueError("--stdin, --stdout and --root-dir do not apply to ColdCrate chunks")
    with Progress("convert", None, wants_progress(args.quiet)) as progress:
        if _suffix(args.input) == COLDCRATE_SUFFIX:
            result = coldcrate2barecat(
                args.input,
                args.output,
                args.shard_size_limit,
                args.force,
                passphrase=_chunk_passphrase(args),
                on_stored=progress.advance,
                archive_options=new_archive_options(args),
            )
        else:
            result = barecat2coldcrate(
                args.input,
                args.output,
                compression=args.compress or "zstd",
                passphrase=(
                    new_passphrase(args.passphrase_file, PASSPHRASE_ENV, "--passphrase-file")
                    if args.encrypt
                    else None
                ),
                overwrite=args.force,
                on_stored=progress.advance,
                archive_passphrase=_source_key(args),
            )
    return result


register = registering(Declared("convert", run_convert, _arguments, EXAMPLES))
