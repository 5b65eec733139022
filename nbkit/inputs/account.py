"""The Kaggle account of this machine: kaggle.json and the user name (never the key in a message)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

PLACEHOLDER_OWNER = "INSERT_USERNAME_HERE"  # where the user name is not known (as `kaggle kernels init` writes)


def kaggle_json(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """This machine's kaggle.json (in KAGGLE_CONFIG_DIR, ~/.kaggle or ~/.config/kaggle), or {}."""
    environ = os.environ if environ is None else environ
    for folder in filter(None, [environ.get("KAGGLE_CONFIG_DIR"), "~/.kaggle", "~/.config/kaggle"]):
        try:
            config = json.loads((Path(folder).expanduser() / "kaggle.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(config, dict):
            return config
    return {}


def kaggle_username(environ: Mapping[str, str] | None = None) -> str | None:
    """The Kaggle user name, from KAGGLE_USERNAME or kaggle.json (only the name is read from it)."""
    environ = os.environ if environ is None else environ
    return environ.get("KAGGLE_USERNAME") or kaggle_json(environ).get("username")
