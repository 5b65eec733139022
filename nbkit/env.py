"""Where the notebook runs (Kaggle, Colab or a local machine), its folders, and whether it is a TPU VM;
standard library only, as it runs before any heavy import."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class _Environment:
    platform: str  # "kaggle", "colab" or "local"
    input_dir: Path  # where attached datasets live (read-only on Kaggle)
    working_dir: Path  # where outputs go (kept by Kaggle after a commit)
    tpu_vm: bool  # a TPU is attached to this very machine (TPU VM)

    def describe(self) -> str:
        tpu = "TPU VM" if self.tpu_vm else "no TPU VM"
        return f"platform={self.platform}; input={self.input_dir}; working={self.working_dir}; {tpu}"


def platform(environ: Mapping[str, str] | None = None) -> str:
    environ = os.environ if environ is None else environ
    if "KAGGLE_KERNEL_RUN_TYPE" in environ or "KAGGLE_URL_BASE" in environ:
        return "kaggle"
    if "COLAB_RELEASE_TAG" in environ or "COLAB_GPU" in environ or "google.colab" in sys.modules:
        return "colab"
    return "local"


def is_tpu_vm(environ: Mapping[str, str] | None = None, dev: Path = Path("/dev")) -> bool:
    """True where a TPU is attached to this machine (Kaggle's and Colab's TPU VMs, Cloud TPU VMs)."""
    environ = os.environ if environ is None else environ
    if environ.get("ISTPUVM") == "1" or "TPU_ACCELERATOR_TYPE" in environ:
        return True
    if environ.get("TPU_PROCESS_ADDRESSES") == "local":
        return True
    # The TPU chips themselves: /dev/accel* (v2-v4) or /dev/vfio/* (v5e and later).
    return any(dev.glob("accel[0-9]*")) or any((dev / "vfio").glob("[0-9]*"))


def detect(environ: Mapping[str, str] | None = None, dev: Path = Path("/dev")) -> _Environment:
    """The running environment; NBKIT_INPUT_DIR / NBKIT_WORKING_DIR override the folders anywhere."""
    environ = os.environ if environ is None else environ
    where = platform(environ)
    folders = {"kaggle": ("/kaggle/input", "/kaggle/working"), "colab": ("/content", "/content")}
    input_dir, working_dir = folders.get(where, ("data", "out"))  # locally: under the current folder
    return _Environment(
        platform=where,
        input_dir=Path(environ.get("NBKIT_INPUT_DIR", input_dir)),
        working_dir=Path(environ.get("NBKIT_WORKING_DIR", working_dir)),
        tpu_vm=is_tpu_vm(environ, dev),
    )


def installed_versions(names: Iterable[str]) -> dict[str, str]:
    """{distribution: version} for those of `names` that are installed, read without importing them."""
    from importlib import metadata

    found = {}
    for name in names:
        with contextlib.suppress(metadata.PackageNotFoundError):
            found[name] = metadata.version(name)
    return found
