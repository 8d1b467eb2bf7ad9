"""The commands of ``barecat shell`` that change the archive, each refused unless the
shell was opened with ``-w``: put and mput (local files in), rm, mv and mkdir. An
existing archive file is never overwritten. :class:`~barecat.cli.shell.BarecatShell`
has them; everything goes through the public ``Barecat`` API.
"""

from __future__ import annotations

import glob
import os
import posixpath
import sys

from barecat.cli.shell_engine import ShellEngine, ShellError, has_magic
from barecat.entries import BarecatFileInfo
from barecat.paths import basename, join


class ShellEdits(ShellEngine):
    """put, mput, rm, mv and mkdir; each ``do_*`` docstring is its help text."""

    def _edit_args(
        self,
        arg: str,
        options: str = "",
        counts: range = range(1, sys.maxsize),
        usage: str = "missing operand",
    ) -> tuple[dict[str, str], list[str]]:
        """The options and operands of a command that changes the archive, once the shell
        may change it (``-w``) and the operands are as many as ``counts`` allows (else
        ``usage`` is the error)."""
        self.require_writable()
        opts, operands = self.parse(arg, options)
        if len(operands) not in counts:
            raise ShellError(usage)
        return opts, operands

    def do_put(self, arg: str) -> None:
        """put LOCAL [PATH]: add a local file to the archive (needs -w).

        It is stored as PATH (into it if that is a directory), else under its own name in
        the current archive directory. An existing archive file is never overwritten.
        """
        _, operands = self._edit_args(arg, counts=range(1, 3), usage="usage: put LOCAL [PATH]")
        local = self.local_path(operands[0])
        if os.path.isdir(local):
            raise ShellError(f"{operands[0]}: Is a directory (use mput)")
        if not os.path.exists(local):
            raise ShellError(f"{operands[0]}: No such local file")
        target = self.resolve(operands[1] if len(operands) == 2 else ".")
        if self.bc.isdir(target):
            target = join(target, os.path.basename(local))
        self._add_local(local, target)

    def do_mput(self, arg: str) -> None:
        """mput LOCAL|GLOB...: add local files and whole directories (needs -w).

        They go under the current archive directory, keeping their paths relative to the
        local directory (see lcd); '**' matches at any depth.
        """
        _, operands = self._edit_args(arg)
        for operand in operands:
            pattern = os.path.expanduser(operand)
            matches = sorted(glob.glob(pattern, root_dir=self.local_cwd, recursive=True))
            if not matches and not has_magic(operand):
                matches = [pattern]
            if not matches:
                self.fail(f"{operand}: No match")
            self.each(matches, self._put_tree)

    def _put_tree(self, match: str) -> None:
        """Add one local file, or a directory with everything below it, under the cwd."""
        local = self.local_path(match)
        if not os.path.exists(local):
            raise ShellError(f"{match}: No such local file")
        relative = os.path.relpath(local, self.local_cwd)
        if os.path.isabs(match) or relative.startswith(".."):
            relative = os.path.basename(local)
        base = self.resolve(relative.replace(os.sep, "/"))
        if not os.path.isdir(local):
            self._add_local(local, base)
            return
        files: list[tuple[str, str]] = []
        for root, dirs, names in os.walk(local):
            dirs.sort()
            inner = os.path.relpath(root, local).replace(os.sep, "/")
            here = base if inner == "." else join(base, inner)
            self.bc.add_by_path(root, here, dir_exist_ok=True)
            files += [(os.path.join(root, name), join(here, name)) for name in sorted(names)]
        self.each(files, lambda pair: self._add_local(*pair))

    def _add_local(self, local: str, target: str) -> None:
        if self.bc.exists(target):
            raise ShellError(f"/{target}: already in the archive (rm it first)")
        self.bc.add_by_path(local, target)

    def do_rm(self, arg: str) -> None:
        """rm [-r] PATH|GLOB...: remove files; -r: directories with their contents (needs -w)."""
        opts, operands = self._edit_args(arg, "r")
        recursive = "-r" in opts
        self.each(self.expand(operands), lambda item: self._remove(item[0], item[1], recursive))

    def _remove(self, shown: str, path: str, recursive: bool) -> None:
        info = self.lookup("/" + path, shown)
        if isinstance(info, BarecatFileInfo):
            self.bc.remove(path)
        elif not recursive:
            raise ShellError(f"{shown}: Is a directory (use rm -r)")
        elif not path:
            raise ShellError("refusing to remove the root directory")
        else:
            self.bc.rmtree(path)
            if self.cwd == path or self.cwd.startswith(path + "/"):
                self.cwd = posixpath.dirname(path)  # do not stay in a directory that is gone
                self.update_prompt()

    def do_mv(self, arg: str) -> None:
        """mv SRC DST: rename a file or directory, into DST if that is a directory (needs -w)."""
        _, operands = self._edit_args(arg, counts=range(2, 3), usage="usage: mv SRC DST")
        source = self.lookup(operands[0]).path
        if not source:
            raise ShellError("cannot move the root directory")
        target = self.resolve(operands[1])
        if self.bc.isdir(target):
            target = join(target, basename(source))
        if target == source or target.startswith(source + "/"):
            raise ShellError(f"cannot move '{operands[0]}' into itself")
        if self.bc.exists(target):
            raise ShellError(f"{operands[1]}: File exists")
        self.bc.rename(source, target)

    def do_mkdir(self, arg: str) -> None:
        """mkdir [-p] DIR...: create directories; -p: parents too, fine if present (needs -w)."""
        opts, operands = self._edit_args(arg, "p")

        def make(operand: str) -> None:
            path = self.resolve(operand)
            if "-p" in opts:
                self.bc.makedirs(path, exist_ok=True)
            elif self.bc.exists(path):
                raise ShellError(f"{operand}: File exists")
            elif not self.bc.isdir(posixpath.dirname(path)):
                raise ShellError(f"{operand}: No such parent directory (use mkdir -p)")
            else:
                self.bc.mkdir(path)

        self.each(operands, make)
