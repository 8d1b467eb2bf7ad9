"""Where barecat's shell completion scripts are installed: ``barecat.bash`` and, for zsh,
``_barecat``, shipped in ``cli/completion_scripts/``. One answer for the package's
:func:`get_completion_script` and the CLI's ``completion-script`` command (which imports
it from here: the package's face never imports the CLI). Names and paths only: it reads
no file.
"""

from __future__ import annotations

from pathlib import Path

SCRIPT_NAMES = {"bash": "barecat.bash", "zsh": "_barecat"}
"""The script's file name, per shell."""


def script_path(shell: str) -> Path:
    """Where the installed completion script for ``shell`` (a key of
    :data:`SCRIPT_NAMES`) lives (a real file)."""
    return Path(__file__).resolve().parent / "cli" / "completion_scripts" / SCRIPT_NAMES[shell]


def get_completion_script(shell: str = "bash") -> str:
    """The path of barecat's completion script for ``shell``, to source from its startup
    file (as ``barecat completion-script SHELL`` prints).

    Args:
        shell: ``'bash'`` or ``'zsh'``.

    Returns:
        The script's absolute path.

    Raises:
        ValueError: another shell.
    """
    if shell not in SCRIPT_NAMES:
        raise ValueError(f"Unknown shell: {shell}. Use 'bash' or 'zsh'.")
    return str(script_path(shell))


__all__ = ["SCRIPT_NAMES", "get_completion_script", "script_path"]
