"""The command-line front end: ``barecat COMMAND ...`` and the reference's legacy scripts."""

from barecat.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
