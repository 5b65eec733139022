"""The KerasHub preset a notebook fine-tunes (08, 10), found where Kaggle attaches it: a folder given, the
copy attached as a Kaggle Model, or kagglehub's; its files checked before Keras reads them."""

from __future__ import annotations

import difflib
import json
from pathlib import Path
from typing import Any

from nbkit import env as nbenv
from nbkit.errors import DataError, ParameterError
from nbkit.inputs.datasets import through_kagglehub

_PRESET_FILES = ("config.json", "metadata.json", "tokenizer.json")  # what every KerasHub preset folder has
_PRESET_KEYS = {name: ("class_name", "config", "registered_name") for name in ("config.json", "tokenizer.json")}


def find_preset(preset: str, download: bool = True, environment: Any = None) -> tuple[str | None, str]:
    """(the folder of the KerasHub preset `preset`, or None; why): a folder given as PRESET; the copy attached
    to the notebook as a Kaggle Model; else, if `download`, kagglehub's (internet on). Its files are checked."""
    environment = environment or nbenv.detect()
    if "/" in preset and not preset.startswith("kaggle://"):
        if not Path(preset).is_dir() and preset.count("/") in (3, 4) and not preset.startswith(("/", ".")):
            preset = f"kaggle://{preset}"  # a Kaggle Models handle, owner/model/keras/variation[/version]
        elif not Path(preset).is_dir():
            raise DataError(f"PRESET={preset!r} is not a folder: give a KerasHub preset's folder, or a preset name.")
        else:
            return _checked(Path(preset)), "PRESET is a folder"
    handle = _kaggle_handle(preset)
    model, framework, variation = handle.split("/")[1:4]
    for root in (environment.input_dir / model, environment.input_dir / "models" / handle.split("/")[0] / model):
        versions = sorted((root / framework / variation).glob("*"), key=lambda p: (len(p.name), p.name))
        if versions:
            return _checked(versions[-1]), f"{handle} is attached as a Kaggle Model"
    found, why_not = through_kagglehub(handle, environment.platform, "model") if download else (None, "")
    if found:
        return _checked(Path(found)), f"kagglehub fetched {handle}"
    why_not = why_not or "the smoke profile downloads none"
    return None, (
        f"the Kaggle Model {handle} is not attached and {why_not}. To use it, attach it ('Add Input' -> Models, "
        f"or `python -m nbkit bundle <the notebook> --model {handle}`) or turn the internet on"
    )


def _kaggle_handle(preset: str) -> str:
    """owner/model/framework/variation/version of a KerasHub preset name (or of kaggle://...)."""
    if preset.startswith("kaggle://"):
        return preset.removeprefix("kaggle://")
    import keras_hub

    known = keras_hub.models.Backbone.presets
    if preset not in known:
        close = difflib.get_close_matches(preset, list(known), n=3)
        raise ParameterError(f"PRESET={preset!r} is not a KerasHub preset (close: {', '.join(close) or 'none'}).")
    return known[preset]["kaggle_handle"].removeprefix("kaggle://")


def _top_level(path: Path) -> dict[str, Any]:
    """The JSON object in `path`; {} where there is none, or no file (what a check then names)."""
    try:
        found = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (ValueError, UnicodeDecodeError):
        return {}
    return found if isinstance(found, dict) else {}


def _checked(folder: Path) -> str:
    """`folder` if it holds a whole KerasHub preset, else a DataError naming what is missing or damaged (or that it is
    a Hugging Face folder)."""
    if "model_type" in _top_level(folder / "config.json"):
        raise DataError(
            f"{folder} is a Hugging Face model folder (config.json has a model_type), not a KerasHub preset: notebook "
            f"10 fine-tunes a KerasHub preset (a preset name, its Kaggle Models handle, or its folder, such as a run's "
            f"merged-preset/); a Hugging Face folder is notebook 11's and 12's MODEL."
        )
    missing = [name for name in _PRESET_FILES if not (folder / name).is_file()]
    if not any(folder.glob("*.weights.h5")) and not any(folder.glob("*.weights.json")):
        missing.append("model.weights.h5")
    if missing:
        raise DataError(
            f"The KerasHub preset in {folder} is incomplete: {', '.join(missing)} missing. Attach the whole model "
            "version again (or download it again)."
        )
    for name in _PRESET_FILES:
        try:
            content = json.loads((folder / name).read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as error:
            raise DataError(f"{folder / name} is damaged ({error}): attach the model version again.") from None
        lacking = [key for key in _PRESET_KEYS.get(name, ()) if not isinstance(content, dict) or key not in content]
        if lacking or (name == "config.json" and not isinstance(content["config"], dict)):
            raise DataError(
                f"{folder / name} is not a KerasHub preset's (it lacks {', '.join(lacking) or 'a config object'}): "
                "attach the model version again, or give a folder that KerasHub's `preset.save_to_preset` wrote."
            )
    return str(folder)


def check_sequence_length(preset_folder: str | None, sequence_length: int) -> int:
    """`sequence_length` if the preset's backbone has positions for it (`max_sequence_length` in its config.json;
    any length for the tiny BERT, built for it), else a ParameterError."""
    if preset_folder is None:
        return sequence_length
    config = json.loads((Path(preset_folder) / "config.json").read_text(encoding="utf-8"))["config"]
    most = config.get("max_sequence_length")
    if isinstance(most, int) and sequence_length > most:
        raise ParameterError(
            f"SEQUENCE_LENGTH={sequence_length}: the preset's backbone has positions for {most} tokens at most "
            f"(max_sequence_length in {preset_folder}/config.json). Give {most} or less."
        )
    return sequence_length
