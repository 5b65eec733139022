"""PyTorch (and PyTorch/XLA) in a notebook: the device, a launcher, batches on the device, an
all-reducing step, the master. Without torch_xla every function works on CUDA or the CPU (one replica),
so one notebook runs on a Kaggle TPU, a GPU or a laptop. Only APIs common to torch_xla 2.8 (Kaggle's TPU
image) and 2.9 are used (not `xm.xla_device`, `xm.mark_step`, `xm.xrt_world_size`, `xm.get_ordinal`)."""

from __future__ import annotations

import contextlib
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
    """Where PyTorch trains, chosen before any process starts."""

    kind: str  # the hardware, as nbkit.accel names it: "tpu", "gpu", "cpu"
    runtime: str  # how torch drives it: "xla", "cuda", "cpu"
    hardware: str  # torch_xla's device type ("TPU", "CPU", ...), the GPU's name, or "cpu"
    reason: str
    compute_capability: tuple[int, int] | None = None  # a CUDA GPU's, as (8, 0)

    @property
    def xla(self) -> bool:
        return self.runtime == "xla"

    def describe(self) -> str:
        if self.xla:
            return f"PyTorch/XLA on {self.hardware}: {self.reason}"
        where = f"CUDA ({self.hardware})" if self.runtime == "cuda" else "the CPU"
        return f"PyTorch on {where}: {self.reason}"


def select(runtime: str = "auto") -> _TorchAccelerator:
    """The runtime asked for, or ("auto") XLA where torch_xla imports, else CUDA, else the CPU. The XLA
    runtime is not started here: `launch` needs it untouched."""
    check_choice("DEVICE", runtime, _RUNTIMES)
    configured = os.environ.get("PJRT_DEVICE")
    xr = None
    if runtime in ("auto", "xla"):
        # torch_xla imports only beside the torch of its own version; importing it sets PJRT_DEVICE when unset.
        with contextlib.suppress(ImportError):
            import torch_xla.runtime as xr
    if xr is not None:
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
        capability = tuple(torch.cuda.get_device_capability(0))
        return _TorchAccelerator("gpu", "cuda", torch.cuda.get_device_name(0), why, capability)
    if runtime == "cuda":
        raise AcceleratorError("DEVICE='cuda' but torch sees no GPU: pick a GPU accelerator, or use DEVICE='auto'.")
    return _TorchAccelerator(
        "cpu", "cpu", "cpu", "no torch_xla and no GPU, so the CPU" if runtime == "auto" else "DEVICE='cpu'"
    )


def precision(acc: _TorchAccelerator, requested: str) -> tuple[str, str]:
    """(policy, a line saying which and why): "auto" is bfloat16 on a TPU and on a CUDA GPU of compute capability
    8.0 or more (A100, L4, H100: no loss scaling), float32 elsewhere (float16 autocast would need a GradScaler)."""
    check_choice("PRECISION", requested, _PRECISIONS)
    capability = acc.compute_capability or (0, 0)
    bf16 = acc.kind == "tpu" or (acc.runtime == "cuda" and capability >= (8, 0))
    policy = ("mixed_bfloat16" if bf16 else "float32") if requested == "auto" else requested
    why = f"PRECISION={requested!r} was asked for"
    if requested == "auto":
        said = f" of compute capability {'.'.join(map(str, capability))}" if acc.compute_capability else ""
        why = f"PRECISION='auto' on a {acc.kind.upper()}{said}"
    if policy == "mixed_bfloat16" and acc.runtime == "cuda":
        import torch

        if not torch.cuda.is_bf16_supported():
            raise ParameterError(
                f"PRECISION='mixed_bfloat16': this GPU ({acc.hardware}) has no bfloat16. Use 'float32'."
            )
    what = "convolutions and matrix products in bfloat16 (torch.autocast), loss and weights in float32"
    return policy, f"precision {policy} ({why}): " + (what if policy == "mixed_bfloat16" else "everything in float32")


def autocast(acc: _TorchAccelerator, policy: str) -> contextlib.AbstractContextManager[Any]:
    """`torch.autocast` to bfloat16 for "mixed_bfloat16", nothing for "float32"."""
    if policy != "mixed_bfloat16":
        return contextlib.nullcontext()
    import torch

    return torch.autocast(device_type="xla" if acc.xla else acc.runtime, dtype=torch.bfloat16)


def check_outputs(model: Any, item: Any, num_classes: int) -> None:
    """A ParameterError, before any training, unless `model` (the notebook's `build_model()`, on the CPU)
    gives one row of `num_classes` logits for one dataset `item` (a wrong head fails only at the first step,
    inside a worker). One thread: OpenMP threads started here would not survive `launch`'s fork."""
    import torch

    threads, training = torch.get_num_threads(), model.training
    torch.set_num_threads(1)
    try:
        with torch.no_grad():
            shape = tuple(model.eval()(item.unsqueeze(0)).shape)
    finally:
        torch.set_num_threads(threads)
        model.train(training)
    if shape != (1, num_classes):
        got = f"{shape[-1]} logits per input" if len(shape) == 2 else f"outputs of shape {shape} for one input"
        raise ParameterError(
            f"build_model() gives {got}, but the data has {num_classes} classes: end the model in one output of "
            f"{num_classes} logits per input, e.g. nn.Linear(..., {num_classes}) "
            "(the number of classes, not a constant)."
        )


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
    if not acc.xla:
        return 1
    import torch_xla.runtime as xr

    return xr.world_size()


def ordinal(acc: _TorchAccelerator) -> int:
    """This replica's global index, 0 on the master."""
    if not acc.xla:
        return 0
    import torch_xla.runtime as xr

    return xr.global_ordinal()


def master_print(acc: _TorchAccelerator, *values: Any) -> None:
    """print() on the master replica only, flushed (a forked worker's unflushed line is lost; not
    xm.master_print, whose `flush` not every torch_xla release has)."""
    if ordinal(acc) == 0:
        print(*values, flush=True)


def mesh_reduce(acc: _TorchAccelerator, tag: str, value: Any, reduce: Callable[[list[Any]], Any]) -> Any:
    """`reduce` over every replica's (picklable) `value`, returned on all of them."""
    if acc.xla and world_size(acc) > 1:
        import torch_xla.core.xla_model as xm

        return xm.mesh_reduce(tag, value, reduce)
    return reduce([value])


def device_loader(acc: _TorchAccelerator, loader: Iterable[Any], torch_device: Any) -> Iterable[Any]:
    """`loader`'s batches on the device: `MpDeviceLoader` on XLA (uploads in the background, ends each
    step's graph), else a plain copy of each batch (re-iterable)."""
    if acc.xla:
        import torch_xla.distributed.parallel_loader as pl

        return pl.MpDeviceLoader(loader, torch_device)
    return _OnDevice(loader, torch_device)


class _OnDevice:
    def __init__(self, loader: Iterable[Any], torch_device: Any) -> None:
        self.loader, self.device = loader, torch_device

    def __iter__(self) -> Iterator[Any]:
        for batch in self.loader:
            yield [part.to(self.device, non_blocking=True) for part in batch]


def optimizer_step(acc: _TorchAccelerator, optimizer: Any) -> None:
    """optimizer.step(), on XLA after averaging the gradients over the replicas."""
    if acc.xla:
        import torch_xla.core.xla_model as xm

        xm.optimizer_step(optimizer)
    else:
        optimizer.step()


def save(acc: _TorchAccelerator, state: Any, path: str | Path) -> Path:
    """Save a state dict from the master, on the CPU, through a partial file; every replica must call it
    (on XLA the replicas meet there)."""
    path = Path(path)
    if acc.xla:
        import torch_xla.core.xla_model as xm

        if ordinal(acc) != 0:  # writes nothing: meets the master, which writes
            xm.save(state, str(path), master_only=True, global_master=True)
            return path
    with atomic.replacing(path) as partial:
        if acc.xla:
            xm.save(state, str(partial), master_only=True, global_master=True)
        else:
            import torch

            torch.save(state, partial)
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
    """fn(index, *args), the master's return value left in a file for the caller."""

    def __init__(self, fn: Callable[..., Any], acc: _TorchAccelerator, path: Path) -> None:
        self.fn, self.acc, self.path = fn, acc, path

    def __call__(self, index: int, *args: Any) -> None:
        result = self.fn(index, *args)
        if ordinal(self.acc) == 0:
            self.path.write_bytes(pickle.dumps(result))


def launch(acc: _TorchAccelerator, fn: Callable[..., Any], *args: Any) -> Any:
    """Run fn(index, *args) once per XLA device (`torch_xla.launch`; once here without XLA) and return the
    master's (picklable) result. "fork" runs a function defined in a notebook, which "spawn" would have to
    pickle; torch_xla refuses to start workers once this process has touched the XLA device."""
    if not acc.xla:
        return fn(0, *args)
    import torch_xla

    with tempfile.TemporaryDirectory(prefix="nbkit-xla-") as folder:
        result = Path(folder) / "master.pickle"
        torch_xla.launch(_MasterResult(fn, acc, result), args=args, start_method="fork")
        if not result.is_file():
            raise AcceleratorError("The XLA workers ended without a result from the master (ordinal 0).")
        return pickle.loads(result.read_bytes())
