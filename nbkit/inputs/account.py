"""The Kaggle account of this machine (never the key in a message), and the `dataset-metadata.json` that
`kaggle datasets create -p FOLDER` reads."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from nbkit.errors import ParameterError
from nbkit.params import check_handle

PLACEHOLDER_OWNER = "INSERT_USERNAME_HERE"  # where the user name is not known (as `kaggle kernels init` writes)
DATASET_SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{4,48}[a-z0-9]$")  # Kaggle: 6-50 letters, digits, '-'


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


def kaggle_username() -> str | None:
    """The Kaggle user name, from KAGGLE_USERNAME or kaggle.json (only the name is read from it)."""
    return os.environ.get("KAGGLE_USERNAME") or kaggle_json().get("username")


def default_dataset_id(slug: str) -> str:
    """`<your Kaggle user name>/<slug>`, with a placeholder owner where the name is not known."""
    return f"{kaggle_username() or PLACEHOLDER_OWNER}/{slug}"


def dataset_metadata(
    dataset_id: str, title: str, resources: Sequence[Mapping[str, str]] = (), example: str = "alice/flowers-model"
) -> dict[str, Any]:
    """The `dataset-metadata.json` contents, checked as `kaggle datasets create` checks them."""
    check_handle("DATASET_ID", dataset_id, example=example, slug=DATASET_SLUG)
    if not 6 <= len(title) <= 50:
        raise ParameterError(f"The dataset title {title!r} has {len(title)} characters; Kaggle wants 6 to 50.")
    return {"title": title, "id": dataset_id, "licenses": [{"name": "CC0-1.0"}], "resources": list(resources)}
