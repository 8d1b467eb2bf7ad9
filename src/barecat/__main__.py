"""``python -m barecat`` runs the ``barecat`` command."""

from barecat.cli.main import console_main

console_main()
