"""Files grouped into samples by key, as WebDataset and LitData group them.

A sample is the files whose paths share everything up to the first dot of the file
name: ``train/0001.jpg``, ``train/0001.json`` and ``train/0001.seg.png`` are the sample
``train/0001``, with the extensions ``jpg``, ``json`` and ``seg.png``. A leading dot (a
hidden name) belongs to the key. The engines that offer ``group_by_stem`` (Ray Data's
source, Dask's and Hugging Face's readers, PyTorch's ``BarecatDataset``) all group
through this module. Pure: strings in,
strings out; imports only ``exceptions``.
"""

from __future__ import annotations

from collections.abc import Iterable

from barecat.exceptions import BarecatError


def sample_key(path: str) -> tuple[str, str]:
    """A file's sample key and extension, as WebDataset splits them: at the first dot of
    the file name (``a/b/0001.seg.png`` -> ``('a/b/0001', 'seg.png')``).

    Args:
        path: the file's archive path.

    Returns:
        (key, extension); the extension is ``''`` for a name without a dot.
    """
    slash = path.rfind("/") + 1
    dot = path.find(".", slash + 1)  # a leading dot (hidden name) is part of the key
    if dot < 0:
        return path, ""
    return path[:dot], path[dot + 1 :]


def sample_part(path: str) -> tuple[str, str]:
    """:func:`sample_key` for a file that must belong to a sample.

    Args:
        path: the file's archive path.

    Returns:
        (key, extension), the extension never empty.

    Raises:
        BarecatError: the file name has no extension, so no place in a sample.
    """
    key, ext = sample_key(path)
    if not ext:
        raise BarecatError(
            f"{path}: group_by_stem needs every file to have an extension (key.ext); "
            "leave such files out (pattern=, where= or paths=)"
        )
    return key, ext


def group_by_stem(paths: Iterable[str]) -> dict[str, dict[str, int]]:
    """The samples ``paths`` make, each with the position of its files in ``paths``.

    Args:
        paths: archive paths; a sample's files need not be neighbours.

    Returns:
        ``{key: {extension: position}}``, keys in the order they first appear, a
        sample's extensions in the order of its files.

    Raises:
        BarecatError: a file name without an extension (see :func:`sample_part`).
    """
    samples: dict[str, dict[str, int]] = {}
    for position, path in enumerate(paths):
        key, ext = sample_part(path)
        samples.setdefault(key, {})[ext] = position
    return samples


__all__ = ["group_by_stem", "sample_key", "sample_part"]
