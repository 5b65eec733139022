"""nbkit.pytorch.runtime through torch_xla on the CPU (PJRT_DEVICE=CPU, one XLA device), and the same code with
torch_xla blocked (the plain-torch fallback). Runs in .venv-xla (see the Makefile's `test`).

Each run is a fresh interpreter: torch_xla starts its workers only while the calling process has
not used the XLA device yet.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys

import pytest
from conftest import REPO, clean_env

WITHOUT_TORCH_XLA = str(REPO / "tests" / "xla" / "without_torch_xla")

# Trains a linear model for two steps in each worker and reports what the worker saw.
WORKER = """
import json, sys, tempfile
from pathlib import Path

import torch

from nbkit.pytorch import runtime as xla

target = xla.select("auto")
folder = Path(tempfile.mkdtemp())


def worker(index, scale):
    device = xla.device(target)
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1).to(device)
    before = model.weight.detach().cpu().clone()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    dataset = [(torch.tensor([float(i), 1.0]), torch.tensor([float(i)])) for i in range(8)]
    sampler = torch.utils.data.DistributedSampler(
        dataset, num_replicas=xla.world_size(target), rank=xla.ordinal(target), shuffle=False
    )
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, sampler=sampler)
    batch_devices = []
    for x, y in xla.device_loader(target, loader, device):
        batch_devices.append(str(x.device))
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        xla.optimizer_step(target, optimizer)
    xla.save(target, model.state_dict(), folder / "model.pt")
    xla.master_print(target, "the master prints this")
    return {
        "index": index,
        "device": str(device),
        "world": xla.world_size(target),
        "ordinal": xla.ordinal(target),
        "master": xla.ordinal(target) == 0,
        "indices": list(sampler),
        "batch_devices": batch_devices,
        "reduced": xla.mesh_reduce(target, "sum", scale, sum),
        "trained": not torch.equal(before, model.weight.cpu()),
    }


def failing_worker(index):
    raise ValueError("broken worker")


result = xla.launch(target, worker, 2.5)
try:
    xla.launch(target, failing_worker)
except ValueError as error:
    result["worker_error"] = str(error)
state = xla.load(folder / "model.pt")
result.update(
    kind=target.kind,
    runtime=target.runtime,
    device_kind=target.hardware,
    describe=target.describe(),
    saved_devices=sorted({str(v.device) for v in state.values()}),
    files=sorted(p.name for p in folder.iterdir()),
    torch_xla_imported="torch_xla" in sys.modules,
)
print("RESULT " + json.dumps(result))
"""


@functools.cache
def run_worker(blocked: bool) -> tuple[dict, str]:
    """(the worker's report, the whole output) of WORKER in a new interpreter."""
    env = clean_env(PJRT_DEVICE="CPU", **({"PYTHONPATH": WITHOUT_TORCH_XLA} if blocked else {}))
    done = subprocess.run(
        [sys.executable, "-c", WORKER], cwd=REPO, env=env, capture_output=True, text=True, timeout=600
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    line = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")][-1]
    return json.loads(line.removeprefix("RESULT ")), output


def test_runs_on_an_xla_device_through_torch_xla():
    report, output = run_worker(blocked=False)
    assert (report["kind"], report["runtime"], report["device_kind"]) == ("cpu", "xla", "CPU") and report[
        "torch_xla_imported"
    ]
    assert report["describe"] == "PyTorch/XLA on CPU: torch_xla is installed, PJRT_DEVICE=CPU"
    assert report["device"] == "xla:0"
    assert report["batch_devices"] == ["xla:0", "xla:0"]  # MpDeviceLoader put each batch on the device


@pytest.mark.parametrize("blocked", [False, True], ids=["torch_xla", "plain_torch"])
def test_one_replica_trains_saves_and_reports_to_the_caller(blocked):
    report, output = run_worker(blocked)
    assert (report["world"], report["ordinal"], report["master"], report["index"]) == (1, 0, True, 0)
    assert report["indices"] == list(range(8))  # one replica: the sampler gives it everything, in order
    assert report["reduced"] == 2.5
    assert report["trained"]  # optimizer_step applied the gradients
    assert report["saved_devices"] == ["cpu"]  # the master's state dict loads without a device
    assert report["files"] == ["model.pt"]  # no .partial left behind
    assert "the master prints this" in output
    assert report["worker_error"] == "broken worker"  # a worker's exception reaches the caller


def test_without_torch_xla_it_uses_the_cpu_and_says_so():
    report, _ = run_worker(blocked=True)
    assert not report["torch_xla_imported"]
    assert (report["runtime"], report["device"], report["batch_devices"]) == ("cpu", "cpu", ["cpu", "cpu"])
    assert report["describe"] == "PyTorch on the CPU: no torch_xla and no GPU, so the CPU"


def test_asking_for_xla_without_torch_xla_says_how_to_install_it(run_python):
    result = run_python(
        """
        from nbkit.pytorch import runtime as xla
        from nbkit.errors import AcceleratorError
        try:
            xla.select("xla")
        except AcceleratorError as error:
            print(error)
        """,
        PYTHONPATH=WITHOUT_TORCH_XLA,
    )
    assert "DEVICE='xla' but torch_xla does not import here" in result.stdout
    assert "pip install torch==2.9.0 torch_xla==2.9.0" in result.stdout


def test_unknown_device_and_missing_gpu_are_refused():
    from nbkit.errors import AcceleratorError, ParameterError
    from nbkit.pytorch import runtime as xla

    with pytest.raises(ParameterError, match="DEVICE='tpu'"):
        xla.select("tpu")
    with pytest.raises(AcceleratorError, match="torch sees no GPU"):  # CI has no GPU
        xla.select("cuda")
    assert (xla.select("cpu").kind, xla.select("cpu").runtime) == ("cpu", "cpu")


def test_load_says_what_is_wrong_with_a_state_file(tmp_path):
    from nbkit.errors import DataError
    from nbkit.pytorch import runtime as xla

    with pytest.raises(DataError, match="does not exist: train first"):
        xla.load(tmp_path / "model.pt")
    (tmp_path / "model.pt").write_bytes(b"not a state dict")
    with pytest.raises(DataError, match="not a readable torch state dict"):
        xla.load(tmp_path / "model.pt")


def test_bfloat16_autocast_on_the_xla_device(run_python):
    result = run_python(
        """
        import torch
        from nbkit.pytorch import runtime
        acc = runtime.select("xla")
        device = runtime.device(acc)
        conv = torch.nn.Conv2d(3, 4, 3).to(device)
        with runtime.autocast(acc, "mixed_bfloat16"):
            out = conv(torch.zeros((1, 3, 8, 8), device=device))
        plain = conv(torch.zeros((1, 3, 8, 8), device=device))
        print("DTYPES", out.dtype, plain.dtype, out.device)
        """,
        PJRT_DEVICE="CPU",
    )
    assert "DTYPES torch.bfloat16 torch.float32 xla:0" in result.stdout


def test_precision_choices():
    from nbkit.errors import ParameterError
    from nbkit.pytorch import runtime as xla

    cpu = xla.select("cpu")
    assert xla.precision(cpu, "auto")[0] == "float32"
    assert xla.precision(xla._TorchAccelerator("tpu", "xla", "TPU", ""), "auto")[0] == "mixed_bfloat16"
    assert xla.precision(cpu, "mixed_bfloat16")[1].startswith(
        "precision mixed_bfloat16 (PRECISION='mixed_bfloat16' was asked"
    )
    with pytest.raises(ParameterError, match="PRECISION='mixed_float16' is not allowed"):
        xla.precision(cpu, "mixed_float16")


@pytest.mark.parametrize(
    "name, capability, expected",
    [
        ("NVIDIA H100 80GB HBM3", (9, 0), "mixed_bfloat16"),
        ("NVIDIA A100", (8, 0), "mixed_bfloat16"),
        ("Tesla T4", (7, 5), "float32"),
    ],
)
def test_auto_precision_on_cuda_follows_the_compute_capability(monkeypatch, name, capability, expected):
    # Faked device properties: this machine has no GPU. GPUs of compute capability 8+ do bfloat16 natively.
    import torch

    from nbkit.pytorch import runtime as xla

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: name)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=0: capability)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)
    gpu = xla.select("cuda")
    assert (gpu.kind, gpu.runtime, gpu.hardware, gpu.compute_capability) == ("gpu", "cuda", name, capability)
    policy, line = xla.precision(gpu, "auto")
    said = ".".join(map(str, capability))
    assert (policy, line.split(":")[0]) == (
        expected,
        f"precision {expected} (PRECISION='auto' on a GPU of compute capability {said})",
    )


def test_bfloat16_autocast_on_the_cpu_computes_convolutions_in_bfloat16_and_nothing_for_float32():
    import torch

    from nbkit.pytorch import runtime as xla

    cpu = xla.select("cpu")
    conv = torch.nn.Conv2d(3, 4, 3)
    with xla.autocast(cpu, "mixed_bfloat16"):
        assert conv(torch.zeros((1, 3, 8, 8))).dtype == torch.bfloat16
    with xla.autocast(cpu, "float32"):
        assert conv(torch.zeros((1, 3, 8, 8))).dtype == torch.float32


def test_a_model_whose_outputs_are_not_the_classes_is_named_before_training():
    import torch

    from nbkit.errors import ParameterError
    from nbkit.pytorch import runtime

    image = torch.zeros(3, 4, 4, dtype=torch.uint8)  # one item of the dataset, as 04's TFRecordImages gives it

    def model(classes):
        return torch.nn.Sequential(
            torch.nn.Flatten(), torch.nn.Linear(48, 16), torch.nn.Dropout(), torch.nn.Linear(16, classes)
        )

    threads, good = torch.get_num_threads(), model(104)
    runtime.check_outputs(rescaled(good), image, 104)
    assert good.training and torch.get_num_threads() == threads  # left as it was found
    with pytest.raises(
        ParameterError, match=r"build_model\(\) gives 10 logits per input, but the data has 104 classes"
    ):
        runtime.check_outputs(rescaled(model(10)), image, 104)  # nn.Linear(128, 10) edited in
    source = (REPO / "notebooks" / "04_pytorch_xla.py").read_text()
    built = source.index("\nmodel = build_model()\n")
    assert source[built:].split("\n")[2].startswith("runtime.check_outputs(model, val_set[0][0], dataset.num_classes)")
    assert built < source.index("runtime.launch(")


def rescaled(model):
    """`model` after 04's Rescale: uint8 pixels in, floats on."""
    import torch

    class Rescale(torch.nn.Module):
        def forward(self, images):
            return images.float() / 255.0

    return torch.nn.Sequential(Rescale(), model)
