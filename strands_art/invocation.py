"""How a person can run this installation's ``strands-art`` command from where they stand.

Commands print follow-up command lines (``strands-art view RUN_DIR`` at the end of a run). After
``./scripts/migrate.sh`` the command lives in ``.venv/bin`` and is not on ``PATH``, so a bare
``strands-art`` would answer "command not found": :func:`strands_art_command` names the script
of the running interpreter's environment when ``PATH`` does not lead to it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path


def strands_art_command() -> str:
    """The shell words that run this installation's ``strands-art`` from the current directory:
    ``strands-art`` when ``PATH`` finds this environment's script, else that script's path
    (relative to the current directory when it lies below it, e.g. ``.venv/bin/strands-art``),
    else ``python -m strands_art.cli`` with this interpreter."""
    script = Path(sys.executable).parent / "strands-art"
    found = shutil.which("strands-art")
    if found is not None and script.exists() and os.path.samefile(found, script):
        return "strands-art"
    if script.exists():
        try:
            return shlex.quote(str(script.relative_to(Path.cwd())))
        except ValueError:
            return shlex.quote(str(script))
    return f"{shlex.quote(sys.executable)} -m strands_art.cli"


def view_command(run_dir: str | os.PathLike[str]) -> str:
    """The command line that opens ``run_dir`` in the viewer (printed at the end of a run)."""
    return f"{strands_art_command()} view {shlex.quote(str(run_dir))}"
