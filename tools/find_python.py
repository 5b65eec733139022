"""Print the path of a working Python of the asked version, or exit 1 when this machine has none.

    python tools/find_python.py 3.12

Looks for `python3.12` on PATH (pyenv's shims only work for the selected versions, so each candidate
is run), then for pyenv's installs (~/.pyenv/versions/3.12.*).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys


def works(path: str, version: str) -> bool:
    try:
        done = subprocess.run(
            [path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except OSError:
        return False
    return done.returncode == 0 and done.stdout.strip() == version


def find(version: str) -> str | None:
    root = os.environ.get("PYENV_ROOT", os.path.expanduser("~/.pyenv"))
    candidates = [
        shutil.which(f"python{version}"),
        *sorted(glob.glob(f"{root}/versions/{version}.*/bin/python{version}")),
    ]
    return next((c for c in candidates if c and works(c, version)), None)


if __name__ == "__main__":
    found = find(sys.argv[1])
    if found is None:
        sys.exit(1)
    print(found)
