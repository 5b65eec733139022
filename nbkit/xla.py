"""PyTorch/XLA in a notebook: the device, a launcher, per-core data, an all-reducing step, the master.

Every function works the same without torch_xla, on CUDA or the CPU (one replica, no collectives),
so one notebook runs on a Kaggle TPU, a GPU or a laptop. torch and torch_xla are imported when a
function needs them, never when nbkit is imported.

Uses only APIs common to torch_xla 2.8 (Kaggle's TPU image) and 2.9: `torch_xla.device`,
`torch_xla.sync`, `torch_xla.launch`, `torch_xla.runtime.{world_size, global_ordinal, device_type}`,
`xm.{optimizer_step, mesh_reduce, save}` and `MpDeviceLoader`; not the deprecated
`xm.xla_device` / `xm.mark_step` nor the removed `xm.xrt_world_size` / `xm.get_ordinal`.
"""

from __future__ import annotations

import importlib
import os
import pickle
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from nbkit.errors import AcceleratorError, DataError
from nbkit.params import check_choice

KINDS = ("auto", "xla", "cuda", "cpu")


@dataclass(frozen=True)
class Target:
    """Where training runs: `kind` "xla", "cuda" or "cpu", chosen before any process starts."""

    kind: str
    hardware: str  # the XLA device type ("TPU", "CPU", ...), the GPU's name, or "cpu"
    reason: str

    @property
    def xla(self) -> bool:
        return self.kind == "xla"

    def describe(self) -> str:
        """One line for the notebook."""
        return f"PyTorch on {self.kind} ({self.hardware}): {self.reason}"


def torch_xla_available() -> bool:
    """True if torch_xla imports (it needs exactly the torch of its own version)."""
    try:
        importlib.import_module("torch_xla")
    except ImportError:
        return False
    return True


def select(kind: str = "auto") -> Target:
    """Pick the device kind: XLA when torch_xla is installed, else CUDA, else the CPU ("auto"),
    or the one asked for. The XLA runtime is not started here: `launch` needs it untouched."""
    check_choice("DEVICE", kind, KINDS)
    configured = os.environ.get("PJRT_DEVICE")
    if kind in ("auto", "xla") and torch_xla_available():  # importing it sets PJRT_DEVICE when unset
        import torch_xla.runtime as xr

        hardware = xr.device_type() or "CPU"
        reason = f"torch_xla is installed, PJRT_DEVICE={hardware}" + ("" if configured else " (chosen by torch_xla)")
        return Target("xla", hardware, reason)
    if kind == "xla":
        raise AcceleratorError(
            "DEVICE='xla' but torch_xla does not import here. On a Kaggle TPU it is preinstalled; elsewhere "
            "`pip install torch==2.9.0 torch_xla==2.9.0` (the versions must match), or use DEVICE='auto'."
        )
    import torch

    if kind in ("auto", "cuda") and torch.cuda.is_available():
        return Target("cuda", torch.cuda.get_device_name(0), "no torch_xla; CUDA is available" if kind == "auto" else "DEVICE='cuda'")
    if kind == "cuda":
        raise AcceleratorError("DEVICE='cuda' but torch sees no GPU: pick a GPU accelerator, or use DEVICE='auto'.")
    return Target("cpu", "cpu", "no torch_xla and no GPU, so the CPU" if kind == "auto" else "DEVICE='cpu'")


# ---- inside a worker (the function `launch` runs once per core) --------------------------------


def device(target: Target) -> Any:
    """This worker's torch.device: `xla:0` in each XLA process, `cuda` or `cpu` otherwise."""
    import torch

    if target.xla:
        import torch_xla

        return torch_xla.device()
    return torch.device(target.kind)


def world_size(target: Target) -> int:
    """Replicas taking part (XLA processes; 1 without XLA)."""
    if target.xla:
        import torch_xla.runtime as xr

        return xr.world_size()
    return 1


def ordinal(target: Target) -> int:
    """This replica's global index, 0 on the master."""
    if target.xla:
        import torch_xla.runtime as xr

        return xr.global_ordinal()
    return 0


def is_master(target: Target) -> bool:
    return ordinal(target) == 0


def master_print(target: Target, *values: Any) -> None:
    """print() on the master replica only (every replica runs the same code)."""
    # Not xm.master_print: its `flush` argument is not in every torch_xla release (2.8 unverified),
    # and a forked worker must flush or its line is lost.
    if is_master(target):
        print(*values, flush=True)


def sync(target: Target) -> None:
    """Run the lazily recorded XLA graph now (a no-op elsewhere)."""
    if target.xla:
        import torch_xla

        torch_xla.sync()


def mesh_reduce(target: Target, tag: str, value: Any, reduce: Callable[[list[Any]], Any]) -> Any:
    """`reduce` over every replica's `value` (any picklable Python value), returned on all of them."""
    if target.xla and world_size(target) > 1:
        import torch_xla.core.xla_model as xm

        return xm.mesh_reduce(tag, value, reduce)
    return reduce([value])


def sampler(target: Target, dataset: Any, shuffle: bool, seed: int = 0, drop_last: bool = False) -> Any:
    """A DistributedSampler giving this replica its share of `dataset` (all of it on one replica)."""
    from torch.utils.data.distributed import DistributedSampler

    return DistributedSampler(dataset, num_replicas=world_size(target), rank=ordinal(target), shuffle=shuffle,
                              seed=seed, drop_last=drop_last)


def device_loader(target: Target, loader: Iterable[Any], torch_device: Any) -> Iterable[Any]:
    """Batches of `loader` on the device: `MpDeviceLoader` on XLA (uploads in the background and
    ends each step's graph), else a plain copy of each batch."""
    if target.xla:
        import torch_xla.distributed.parallel_loader as pl

        return pl.MpDeviceLoader(loader, torch_device)
    return _OnDevice(loader, torch_device)


class _OnDevice:
    """Re-iterable: each pass moves the tensors of every batch to the device."""

    def __init__(self, loader: Iterable[Any], torch_device: Any) -> None:
        self.loader, self.device = loader, torch_device

    def __iter__(self) -> Iterator[Any]:
        for batch in self.loader:
            yield [part.to(self.device, non_blocking=True) for part in batch]

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]


def optimizer_step(target: Target, optimizer: Any) -> None:
    """optimizer.step(), after averaging the gradients over the replicas on XLA (`xm.optimizer_step`)."""
    if target.xla:
        import torch_xla.core.xla_model as xm

        xm.optimizer_step(optimizer)
    else:
        optimizer.step()


def save(target: Target, state: Any, path: str | Path) -> Path:
    """Save a state dict from the master (moved to the CPU first), through a `.partial` file; every
    replica must call it (on XLA the replicas meet there)."""
    path = Path(path)
    partial = path.with_name(path.name + ".partial")
    if is_master(target):
        path.parent.mkdir(parents=True, exist_ok=True)
    if target.xla:
        import torch_xla.core.xla_model as xm

        xm.save(state, str(partial), master_only=True, global_master=True)
    else:
        import torch

        torch.save(state, partial)
    if is_master(target):
        os.replace(partial, path)
    return path


def load(path: str | Path) -> Any:
    """A state dict saved by `save`, on the CPU; a DataError if it is missing or unreadable."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path} does not exist: train first (the master saves it), or give the right path.")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (RuntimeError, pickle.UnpicklingError, EOFError) as error:
        raise DataError(f"{path} is not a readable torch state dict ({error}). Train again to rewrite it.") from None


# ---- launching the workers ---------------------------------------------------------------------


class _MasterResult:
    """Runs fn(index, *args) and has the master leave its return value in a file for the caller."""

    def __init__(self, fn: Callable[..., Any], target: Target, path: Path) -> None:
        self.fn, self.target, self.path = fn, target, path

    def __call__(self, index: int, *args: Any) -> None:
        result = self.fn(index, *args)
        if is_master(self.target):
            self.path.write_bytes(pickle.dumps(result))


def launch(target: Target, fn: Callable[..., Any], *args: Any, start_method: str = "fork",
           debug_single_process: bool = False) -> Any:
    """Run fn(index, *args) once per XLA device (`torch_xla.launch`), or once here without XLA, and
    return the master's return value (picklable).

    `start_method="fork"` lets a function defined in a notebook run: the default "spawn" would have
    to pickle it. Do not touch the XLA device in this process before: torch_xla refuses to start
    workers once the runtime is up.
    """
    if not target.xla:
        return fn(0, *args)
    import torch_xla

    with tempfile.TemporaryDirectory(prefix="nbkit-xla-") as folder:
        result = Path(folder) / "master.pickle"
        torch_xla.launch(_MasterResult(fn, target, result), args=args, start_method=start_method,
                         debug_single_process=debug_single_process)
        if not result.is_file():
            raise AcceleratorError("The XLA workers ended without a result from the master (ordinal 0).")
        return pickle.loads(result.read_bytes())
