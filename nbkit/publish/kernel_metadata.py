"""Kaggle's kernel-metadata.json, checked before anything is written. No `docker_image` unless asked: a
pinned image (e.g. from `kaggle kernels pull -m`) once made TPU pushes silently run on the CPU image."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from nbkit.errors import ParameterError
from nbkit.inputs.account import PLACEHOLDER_OWNER
from nbkit.params import check_handle

# Accelerator name -> (enable_gpu, enable_tpu, machine_shape): today's first. Raw machine shapes work too.
ACCELERATORS: dict[str, tuple[bool, bool, str | None]] = {
    "tpu-v5e-8": (False, True, "TpuV5E8"),
    "tpu-v6e-8": (False, True, "TpuV6E8"),
    "gpu-t4x2": (True, False, "NvidiaTeslaT4"),
    "cpu": (False, False, None),
    "tpu-v3-8": (False, True, "TpuV38"),
    "tpu-vm-v3-8": (False, True, "Tpu1VmV38"),
    "gpu-p100": (True, False, "NvidiaTeslaP100"),
}
# Machine shapes Kaggle retired (kaggle CLI 2.2.5's table): a push still goes through, and the
# session runs on the replacement instead. Accepted, with a warning that says so.
RETIRED = {"TpuV38": "tpu-v5e-8", "Tpu1VmV38": "tpu-v5e-8", "NvidiaTeslaP100": "gpu-t4x2"}
CURRENT = [name for name, (_, _, shape) in ACCELERATORS.items() if shape not in RETIRED]
_TITLE_LENGTH = (5, 50)
SLUG = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def slugify(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def _accelerator(name: str) -> tuple[bool, bool, str | None]:
    if name in ACCELERATORS:
        return ACCELERATORS[name]
    for gpu, tpu, shape in ACCELERATORS.values():
        if shape and name.lower() == shape.lower():
            return gpu, tpu, shape
    raise ParameterError(
        f"Unknown accelerator {name!r}: use one of {', '.join(CURRENT)} (or a machine shape such as TpuV5E8)."
    )


def retired(name_or_shape: str | None) -> str | None:
    """The warning for an accelerator (name or machine shape) Kaggle retired, else None."""
    shape = ACCELERATORS[name_or_shape][2] if name_or_shape in ACCELERATORS else name_or_shape
    shape = next((known for known in RETIRED if shape and shape.lower() == known.lower()), None)
    if shape is None:
        return None
    instead = RETIRED[shape]
    asked = f"{name_or_shape} (machine shape {shape})" if name_or_shape != shape else shape
    return (
        f"{asked} is retired on Kaggle: sessions that ask for it run on {instead} ({ACCELERATORS[instead][2]}) "
        f"instead. Ask for --accelerator {instead}."
    )


def _check_sources(option: str, sources: Sequence[str], form: str, example: str) -> list[str]:
    return [check_handle(option, source, form, example) for source in sources]


def build(
    owner: str | None,
    title: str,
    code_file: str,
    accelerator_name: str = "tpu-v5e-8",
    *,
    slug: str | None = None,
    private: bool = True,
    internet: bool = True,
    datasets: Sequence[str] = (),
    competitions: Sequence[str] = (),
    kernels: Sequence[str] = (),
    models: Sequence[str] = (),
    docker_image: str | None = None,
) -> dict[str, Any]:
    """A checked kernel-metadata.json dict; without an owner the id is INSERT_USERNAME_HERE/<slug>."""
    low, high = _TITLE_LENGTH
    if not low <= len(title.strip()) <= high:
        raise ParameterError(
            f"Title {title!r} has {len(title.strip())} characters; Kaggle needs {low} to {high} (--title)."
        )
    owner = owner or PLACEHOLDER_OWNER  # enough for File -> Import Notebook; `push` asks for the real one
    check_handle("--owner", owner, "a user name", example="alice")
    slug = slug or slugify(title)
    if not SLUG.match(slug) or slug != slugify(title):
        raise ParameterError(
            f"The id {owner}/{slug} does not match the title {title!r} (its slug is {slugify(title)!r}); "
            "Kaggle links the two, so change --title or --slug."
        )
    enable_gpu, enable_tpu, machine_shape = _accelerator(accelerator_name)
    if any(not SLUG.match(c) for c in competitions):
        raise ParameterError(
            f"--competition {list(competitions)} must be slugs as in the URL, e.g. flower-classification-with-tpus."
        )
    metadata = {
        "id": f"{owner}/{slug}",
        "title": title.strip(),
        "code_file": code_file,
        "language": "python",
        "kernel_type": "notebook",
        "is_private": private,
        "enable_gpu": enable_gpu,
        "enable_tpu": enable_tpu,
        "enable_internet": internet,
        "machine_shape": machine_shape,
        "dataset_sources": _check_sources("--dataset", datasets, "owner/slug", "alice/my-tfrecords"),
        "competition_sources": list(competitions),
        "kernel_sources": _check_sources("--kernel", kernels, "owner/slug", "alice/my-notebook"),
        "model_sources": _check_sources(
            "--model",
            models,
            "owner/model/framework/variation[/version]",
            "keras/efficientnet/keras/efficientnet_b0_ra_imagenet/1",
        ),
    }
    if docker_image:
        metadata["docker_image"] = docker_image
    return metadata
