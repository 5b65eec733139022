"""Which TPU this is, from JAX's `device_kind` or (TensorFlow cannot name it) TPU_ACCELERATOR_TYPE."""

from __future__ import annotations

import re
from dataclasses import dataclass

# JAX device_kind -> (generation, TensorCores per chip, JAX devices per chip, HBM GiB per chip).
# v4 and v5p join their two cores into one "megacore" device per chip.
_GENERATIONS = {
    "TPU v2": ("v2", 2, 2, 16),
    "TPU v3": ("v3", 2, 2, 32),
    "TPU v4": ("v4", 2, 1, 32),
    "TPU v5 lite": ("v5e", 1, 1, 16),
    "TPU v5": ("v5p", 2, 1, 95),
    "TPU v6 lite": ("v6e", 1, 1, 32),
}
_ACCELERATOR_TYPE = re.compile(r"^(v\d+)(litepod|lite|e|p)?-(\d+)$")  # v3-8, v5litepod-8, v6e-8, v5p-8


@dataclass(frozen=True)
class TpuInfo:
    """A TPU slice: e.g. v5e-8 is 8 chips x 1 core, 16 GiB each; v3-8 is 4 chips x 2 cores, 16 GiB per core."""

    generation: str  # "v5e", "v3", ...
    chips: int
    cores_per_chip: int
    gib_per_core: float

    @property
    def name(self) -> str:
        return f"{self.generation}-{self.chips * self.cores_per_chip}"

    def describe(self) -> str:
        cores = "1 core" if self.cores_per_chip == 1 else f"{self.cores_per_chip} cores"
        return f"TPU {self.name}: {self.chips} chips x {cores}, {self.gib_per_core:g} GiB of HBM per core"


def from_device_kind(device_kind: str, devices: int) -> TpuInfo | None:
    """The slice `devices` JAX devices of `device_kind` make up (None for an unknown kind)."""
    if device_kind not in _GENERATIONS:
        return None
    generation, cores, per_chip, gib = _GENERATIONS[device_kind]
    return TpuInfo(generation, max(1, devices // per_chip), cores, gib / cores)


def from_accelerator_type(value: str | None) -> TpuInfo | None:
    """The slice a TPU VM's TPU_ACCELERATOR_TYPE names ("v3-8", "v5litepod-8", "v6e-8"), if known."""
    match = _ACCELERATOR_TYPE.match(value or "")
    if not match:
        return None
    version, variant, cores = match[1], match[2] or "", int(match[3])
    kind = {"v2": "TPU v2", "v3": "TPU v3", "v4": "TPU v4", "v6": "TPU v6 lite"}.get(version)
    if version == "v5":
        kind = "TPU v5" if variant == "p" else "TPU v5 lite"
    if kind is None:
        return None
    _, per_chip_cores, per_chip_devices, _ = _GENERATIONS[kind]
    return from_device_kind(kind, cores // per_chip_cores * per_chip_devices)
