"""PyTorch (and PyTorch/XLA) in a notebook: the device, a launcher, batches on the device, an
all-reducing step, the master.

Every function works the same without torch_xla, on CUDA or the CPU (one replica, no collectives),
so one notebook runs on a Kaggle TPU, a GPU or a laptop. torch and torch_xla are imported when a
function needs them, never when nbkit is imported.

Uses only APIs common to torch_xla 2.8 (Kaggle's TPU image) and 2.9: `torch_xla.device`,
`torch_xla.launch`, `torch_xla.runtime.{world_size, global_ordinal, device_type}`,
`xm.{optimizer_step, mesh_reduce, save}` and `MpDeviceLoader`; not the deprecated
`xm.xla_device` / `xm.mark_step` nor the removed `xm.xrt_world_size` / `xm.get_ordinal`.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from nbkit import atomic
from nbkit.errors import AcceleratorError, DataError, ParameterError
from nbkit.params import check_choice

_RUNTIMES = ("auto", "xla", "cuda", "cpu")  # the DEVICE parameter: how torch drives the hardware
_PRECISIONS = ("auto", "float32", "mixed_bfloat16")  # the PRECISION parameter (no float16: TPUs compute in bfloat16)
_XLA_KINDS = {"TPU": "tpu", "CUDA": "gpu", "GPU": "gpu"}  # torch_xla's device type -> device kind


@dataclass(frozen=True)
class _TorchAccelerator:
    """Where PyTorch trains, chosen before any process starts. `kind` is the hardware in
    nbkit.accel's words ("tpu", "gpu", "cpu"); `runtime` is how torch drives it ("xla", "cuda", "cpu")."""

    kind: str
    runtime: str
    hardware: str  # torch_xla's device type ("TPU", "CPU", ...), the GPU's name, or "cpu"
    reason: str

    @property
    def xla(self) -> bool:
        return self.runtime == "xla"

    def describe(self) -> str:
        """One line for the notebook."""
        if self.xla:
            return f"PyTorch/XLA on {self.hardware}: {self.reason}"
        where = f"CUDA ({self.hardware})" if self.runtime == "cuda" else "the CPU"
        return f"PyTorch on {where}: {self.reason}"


def _torch_xla_available() -> bool:
    """True if torch_xla imports (it needs exactly the torch of its own version)."""
    try:
        importlib.import_module("torch_xla")
    except ImportError:
        return False
    return True


def select(runtime: str = "auto") -> _TorchAccelerator:
    """Pick the runtime: XLA when torch_xla is installed, else CUDA, else the CPU ("auto"), or the
    one asked for. The XLA runtime is not started here: `launch` needs it untouched."""
    check_choice("DEVICE", runtime, _RUNTIMES)
    configured = os.environ.get("PJRT_DEVICE")
    if runtime in ("auto", "xla") and _torch_xla_available():  # importing it sets PJRT_DEVICE when unset
        import torch_xla.runtime as xr

        device_type = xr.device_type() or "CPU"
        reason = f"torch_xla is installed, PJRT_DEVICE={device_type}" + ("" if configured else " (chosen by torch_xla)")
        return _TorchAccelerator(_XLA_KINDS.get(device_type, "cpu"), "xla", device_type, reason)
    if runtime == "xla":
        raise AcceleratorError(
            "DEVICE='xla' but torch_xla does not import here. On a Kaggle TPU it is preinstalled; elsewhere "
            "`pip install torch==2.9.0 torch_xla==2.9.0` (the versions must match), or use DEVICE='auto'."
        )
    import torch

    if runtime in ("auto", "cuda") and torch.cuda.is_available():
        why = "no torch_xla; CUDA is available" if runtime == "auto" else "DEVICE='cuda'"
        return _TorchAccelerator("gpu", "cuda", torch.cuda.get_device_name(0), why)
    if runtime == "cuda":
        raise AcceleratorError("DEVICE='cuda' but torch sees no GPU: pick a GPU accelerator, or use DEVICE='auto'.")
    return _TorchAccelerator(
        "cpu", "cpu", "cpu", "no torch_xla and no GPU, so the CPU" if runtime == "auto" else "DEVICE='cpu'"
    )


def precision(acc: _TorchAccelerator, requested: str) -> tuple[str, str]:
    """(policy, a line saying which and why) for PRECISION=`requested`: "auto" is bfloat16 on a TPU,
    float32 elsewhere; bfloat16 on a GPU that lacks it is a ParameterError."""
    check_choice("PRECISION", requested, _PRECISIONS)
    policy = ("mixed_bfloat16" if acc.kind == "tpu" else "float32") if requested == "auto" else requested
    why = (
        f"PRECISION='auto' on a {acc.kind.upper()}" if requested == "auto" else f"PRECISION={requested!r} was asked for"
    )
    if policy == "mixed_bfloat16" and acc.runtime == "cuda":
        import torch

        if not torch.cuda.is_bf16_supported():
            raise ParameterError(
                f"PRECISION='mixed_bfloat16': this GPU ({acc.hardware}) has no bfloat16. Use 'float32'."
            )
    what = "convolutions and matrix products in bfloat16 (torch.autocast), loss and weights in float32"
    return policy, f"precision {policy} ({why}): " + (what if policy == "mixed_bfloat16" else "everything in float32")


def autocast(acc: _TorchAccelerator, policy: str) -> contextlib.AbstractContextManager[Any]:
    """`torch.autocast` to bfloat16 on this runtime for "mixed_bfloat16" (on XLA: the "xla" device
    type, the same in torch_xla 2.8 and 2.9), nothing for "float32"."""
    if policy != "mixed_bfloat16":
        return contextlib.nullcontext()
    import torch

    return torch.autocast(device_type="xla" if acc.xla else acc.runtime, dtype=torch.bfloat16)


# ---- inside a worker (the function `launch` runs once per core) --------------------------------


def device(acc: _TorchAccelerator) -> Any:
    """This worker's torch.device: `xla:0` in each XLA process, `cuda` or `cpu` otherwise."""
    import torch

    if acc.xla:
        import torch_xla

        return torch_xla.device()
    return torch.device(acc.runtime)


def world_size(acc: _TorchAccelerator) -> int:
    """Replicas taking part (XLA processes; 1 without XLA)."""
    if acc.xla:
        import torch_xla.runtime as xr

        return xr.world_size()
    return 1


def ordinal(acc: _TorchAccelerator) -> int:
    """This replica's global index, 0 on the master."""
    if acc.xla:
        import torch_xla.runtime as xr

        return xr.global_ordinal()
    return 0


def _is_master(acc: _TorchAccelerator) -> bool:
    return ordinal(acc) == 0


def master_print(acc: _TorchAccelerator, *values: Any) -> None:
    """print() on the master replica only (every replica runs the same code)."""
    # Not xm.master_print: its `flush` argument is not in every torch_xla release (2.8 unverified),
    # and a forked worker must flush or its line is lost.
    if _is_master(acc):
        print(*values, flush=True)


def mesh_reduce(acc: _TorchAccelerator, tag: str, value: Any, reduce: Callable[[list[Any]], Any]) -> Any:
    """`reduce` over every replica's `value` (any picklable Python value), returned on all of them."""
    if acc.xla and world_size(acc) > 1:
        import torch_xla.core.xla_model as xm

        return xm.mesh_reduce(tag, value, reduce)
    return reduce([value])


def device_loader(acc: _TorchAccelerator, loader: Iterable[Any], torch_device: Any) -> Iterable[Any]:
    """Batches of `loader` on the device: `MpDeviceLoader` on XLA (uploads in the background and
    ends each step's graph), else a plain copy of each batch."""
    if acc.xla:
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


def optimizer_step(acc: _TorchAccelerator, optimizer: Any) -> None:
    """optimizer.step(), after averaging the gradients over the replicas on XLA (`xm.optimizer_step`)."""
    if acc.xla:
        import torch_xla.core.xla_model as xm

        xm.optimizer_step(optimizer)
    else:
        optimizer.step()


def save(acc: _TorchAccelerator, state: Any, path: str | Path) -> Path:
    """Save a state dict from the master (moved to the CPU first), through a partial file; every
    replica must call it (on XLA the replicas meet there)."""
    path = Path(path)
    if not acc.xla:
        import torch

        with atomic.replacing(path) as partial:
            torch.save(state, partial)
        return path
    import torch_xla.core.xla_model as xm

    if not _is_master(acc):  # writes nothing: meets the master, which writes
        xm.save(state, str(path), master_only=True, global_master=True)
        return path
    with atomic.replacing(path) as partial:
        xm.save(state, str(partial), master_only=True, global_master=True)
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

    def __init__(self, fn: Callable[..., Any], acc: _TorchAccelerator, path: Path) -> None:
        self.fn, self.acc, self.path = fn, acc, path

    def __call__(self, index: int, *args: Any) -> None:
        result = self.fn(index, *args)
        if _is_master(self.acc):
            self.path.write_bytes(pickle.dumps(result))


def launch(
    acc: _TorchAccelerator,
    fn: Callable[..., Any],
    *args: Any,
    start_method: str = "fork",
    debug_single_process: bool = False,
) -> Any:
    """Run fn(index, *args) once per XLA device (`torch_xla.launch`), or once here without XLA, and
    return the master's return value (picklable).

    `start_method="fork"` lets a function defined in a notebook run: the default "spawn" would have
    to pickle it. Do not touch the XLA device in this process before: torch_xla refuses to start
    workers once the runtime is up.
    """
    if not acc.xla:
        return fn(0, *args)
    import torch_xla

    with tempfile.TemporaryDirectory(prefix="nbkit-xla-") as folder:
        result = Path(folder) / "master.pickle"
        torch_xla.launch(
            _MasterResult(fn, acc, result),
            args=args,
            start_method=start_method,
            debug_single_process=debug_single_process,
        )
        if not result.is_file():
            raise AcceleratorError("The XLA workers ended without a result from the master (ordinal 0).")
        return pickle.loads(result.read_bytes())
