"""Accelerator detection with fake TensorFlow pieces: TPUs and GPUs this machine does not have."""

import os
from types import SimpleNamespace

import pytest

from nbkit import accel, logs
from nbkit.accel import accelerator
from nbkit.errors import AcceleratorError, ParameterError

PLAIN = dict(loaded=None, env_backend=None, tpu_vm=False, tf_tpu_capable=False, jax_installed=True, tf_installed=True)


def test_kaggle_tpu_vm_with_tensorflow_cpu_picks_jax():
    backend, reason = accel._choose_backend("auto", **{**PLAIN, "tpu_vm": True})
    assert backend == "jax" and "TPU VM" in reason


def test_tpu_vm_with_tensorflow_tpu_keeps_tensorflow():
    assert accel._choose_backend("auto", **{**PLAIN, "tpu_vm": True, "tf_tpu_capable": True})[0] == "tensorflow"


def test_auto_defaults_to_tensorflow_and_respects_keras_backend_variable():
    assert accel._choose_backend("auto", **PLAIN)[0] == "tensorflow"
    assert accel._choose_backend("auto", **{**PLAIN, "env_backend": "jax"})[0] == "jax"


def test_auto_follows_an_already_imported_keras():
    assert accel._choose_backend("auto", **{**PLAIN, "loaded": "jax", "tpu_vm": False})[0] == "jax"


def test_conflicting_loaded_backend_says_how_to_fix():
    with pytest.raises(AcceleratorError) as error:
        accel._choose_backend("jax", **{**PLAIN, "loaded": "tensorflow"})
    assert "Restart the kernel" in str(error.value) and "setup(backend='jax')" in str(error.value)


def test_unsupported_loaded_backend_and_missing_jax():
    with pytest.raises(AcceleratorError, match="'torch'"):
        accel._choose_backend("auto", **{**PLAIN, "loaded": "torch"})
    with pytest.raises(AcceleratorError, match="pip install jax"):
        accel._choose_backend("jax", **{**PLAIN, "jax_installed": False})


def test_auto_without_tensorflow_picks_jax_and_a_backend_not_installed_names_the_package():
    # A GPU image with JAX and Keras but no TensorFlow (seen on an H100): "auto" crashed importing tensorflow.
    backend, reason = accel._choose_backend("auto", **{**PLAIN, "tf_installed": False})
    assert (backend, reason) == ("jax", "TensorFlow is not installed here and JAX is")
    with pytest.raises(AcceleratorError, match=r"needs TensorFlow.*`pip install tensorflow`, or use backend='jax'"):
        accel._choose_backend("tensorflow", **{**PLAIN, "tf_installed": False})
    with pytest.raises(AcceleratorError, match=r"needs TensorFlow.*`pip install tensorflow`, or use backend='jax'"):
        accel._choose_backend("auto", **{**PLAIN, "tf_installed": False, "env_backend": "tensorflow"})
    neither = {**PLAIN, "tf_installed": False, "jax_installed": False}
    with pytest.raises(AcceleratorError, match=r"`pip install tensorflow`, or `pip install jax`"):
        accel._choose_backend("auto", **neither)


@pytest.mark.parametrize(
    "flags, tpu_vm, level, expected",
    [
        ("", False, 1, "--xla_backend_optimization_level=1"),  # JAX on a CPU: LLVM -O1
        (
            "--xla_force_host_platform_device_count=8",
            False,
            1,
            "--xla_force_host_platform_device_count=8 --xla_backend_optimization_level=1",
        ),
        ("--xla_backend_optimization_level=3", False, 1, "--xla_backend_optimization_level=3"),  # the user's own kept
        ("", True, 1, ""),  # a TPU VM: XLA's default
        ("", False, None, ""),  # None: XLA's default
    ],
)
def test_jax_on_a_cpu_compiles_at_llvm_level_1_unless_the_user_set_one(monkeypatch, flags, tpu_vm, level, expected):
    monkeypatch.setenv("XLA_FLAGS", flags)
    accel._set_cpu_compile_level(level, tpu_vm)
    assert os.environ["XLA_FLAGS"] == expected


def test_unknown_backend_is_a_parameter_error():
    with pytest.raises(ParameterError, match="backend='pytorch'"):
        accel._choose_backend("pytorch", **PLAIN)


@pytest.mark.parametrize(
    "tpu_vm, platform, expected",
    [
        (True, "kaggle", ["local"]),  # TPU VM
        (False, "colab", [""]),  # Colab's resolver finds its own TPU
        (False, "local", []),  # nothing to ask
    ],
)
def test_tpu_addresses(tpu_vm, platform, expected):
    assert accel._tpu_addresses(tpu_vm, platform) == expected


@pytest.mark.parametrize("variable, value", [("COLAB_TPU_ADDR", "10.0.0.2:8470"), ("TPU_NAME", "my-tpu")])
def test_a_remote_tpu_is_refused_before_any_import_and_a_tpu_vm_goes_on(monkeypatch, variable, value):
    monkeypatch.delenv("COLAB_TPU_ADDR", raising=False)
    monkeypatch.delenv("TPU_NAME", raising=False)
    monkeypatch.setenv(variable, value)
    monkeypatch.setattr(accel.env, "is_tpu_vm", lambda: False)
    with pytest.raises(AcceleratorError) as error:
        accel.setup()
    assert f"remote TPU ({variable}={value}: a legacy TPU Node)" in str(error.value)
    assert "Choose a TPU VM runtime" in str(error.value) and "unset the variable" in str(error.value)
    monkeypatch.setattr(accel.env, "is_tpu_vm", lambda: True)  # a TPU VM naming itself: past that check
    with pytest.raises(ParameterError, match="backend='bogus'"):  # the next check, still before any import
        accel.setup("bogus")


def test_recommended_precision_policy():
    def recommended(kind, capability=None):
        return make_accelerator(kind=kind, compute_capability=capability).recommended_precision

    assert recommended("tpu") == "mixed_bfloat16"
    # bfloat16 where the GPU does it natively, with no loss scaling: A100 (8.0), L4 (8.9), H100 (9.0)
    assert [recommended("gpu", c) for c in [(8, 0), (8, 9), (9, 0), (10, 0)]] == ["mixed_bfloat16"] * 4
    assert recommended("gpu", (7, 5)) == "mixed_float16"  # T4
    assert recommended("gpu", (7, 0)) == "mixed_float16"  # V100
    assert recommended("gpu", (6, 0)) == "float32"
    assert recommended("cpu") == "float32"


@pytest.mark.parametrize(
    "requested, kind, capability, expected",
    [
        ("auto", "tpu", None, "mixed_bfloat16"),
        ("auto", "cpu", None, "float32"),
        ("mixed_bfloat16", "cpu", None, "mixed_bfloat16"),  # the TPU path in miniature: allowed on a CPU
        ("mixed_float16", "gpu", (7, 5), "mixed_float16"),
        ("mixed_bfloat16", "gpu", (8, 0), "mixed_bfloat16"),
        ("float32", "tpu", None, "float32"),
    ],
)
def test_precision_asked_for_or_chosen(requested, kind, capability, expected):
    policy, why = accelerator._precision(requested, kind, capability)
    assert policy == expected and ("asked for" in why or "policy" in why)


@pytest.mark.parametrize(
    "requested, kind, capability, message",
    [
        ("mixed_float16", "cpu", None, "a CPU emulates float16.*Use 'mixed_bfloat16' or 'float32'"),
        ("mixed_float16", "tpu", None, "TPUs compute in bfloat16"),
        ("mixed_float16", "gpu", (6, 0), "tensor cores.*this one: 6.0"),
        ("mixed_bfloat16", "gpu", (7, 5), "compute capability 8.0 or more.*this one: 7.5.*Use 'mixed_float16'"),
        ("bfloat16", "tpu", None, "PRECISION='bfloat16' is not allowed"),
    ],
)
def test_a_precision_the_hardware_cannot_do_is_refused(requested, kind, capability, message):
    with pytest.raises(ParameterError, match=message):
        accelerator._precision(requested, kind, capability)


@pytest.mark.parametrize(
    "device_kind, devices, text",
    [
        ("TPU v5 lite", 8, "TPU v5e-8: 8 chips x 1 core, 16 GiB of HBM per core"),
        ("TPU v3", 8, "TPU v3-8: 4 chips x 2 cores, 16 GiB of HBM per core"),
        ("TPU v6 lite", 8, "TPU v6e-8: 8 chips x 1 core, 32 GiB of HBM per core"),
        ("TPU v4", 4, "TPU v4-8: 4 chips x 2 cores, 16 GiB of HBM per core"),  # one megacore device per chip
    ],
)
def test_which_tpu_from_jax_device_kind(device_kind, devices, text):
    assert accel._tpu(device_kind, devices) == text


@pytest.mark.parametrize(
    "accelerator_type, name", [("v3-8", "v3-8"), ("v5litepod-8", "v5e-8"), ("v6e-8", "v6e-8"), ("v5p-8", "v5p-8")]
)
def test_which_tpu_from_the_tpu_vms_accelerator_type(accelerator_type, name):
    assert accel._tpu_type(accelerator_type).startswith(f"TPU {name}: ")
    assert accel._tpu_type("something-else") == "TPU" and accel._tpu("TPU v99", 8) == "TPU"


class FakeStrategy:
    def __init__(self, replicas):
        self.num_replicas_in_sync = replicas


def fake_tf(tpu_cores=0, gpus=(), log=None):
    """Just enough of the tensorflow module for accel._tf_accelerator."""
    log = [] if log is None else log

    def resolver(tpu):
        log.append(("resolve", tpu))
        if not tpu_cores:
            raise ValueError("Please provide a TPU Name to connect to.")
        return SimpleNamespace(tpu=tpu)

    def logical(kind):
        if kind == "TPU":
            return [SimpleNamespace(name=f"/job:worker/replica:0/task:0/device:TPU:{i}") for i in range(tpu_cores)]
        return [SimpleNamespace(name="/device:CPU:0")]

    def physical(kind):
        return [SimpleNamespace(name=f"/physical_device:GPU:{i}") for i in range(len(gpus))] if kind == "GPU" else []

    return SimpleNamespace(
        distribute=SimpleNamespace(
            cluster_resolver=SimpleNamespace(TPUClusterResolver=resolver),
            TPUStrategy=lambda r: log.append(("strategy", r.tpu)) or FakeStrategy(tpu_cores),
            MirroredStrategy=lambda *a: FakeStrategy(len(gpus)),
            get_strategy=lambda: FakeStrategy(1),
        ),
        config=SimpleNamespace(
            experimental_connect_to_cluster=lambda r: log.append(("connect", r.tpu)),
            list_logical_devices=logical,
            list_physical_devices=physical,
            experimental=SimpleNamespace(get_device_details=lambda g: dict(gpus[0])),
        ),
        tpu=SimpleNamespace(experimental=SimpleNamespace(initialize_tpu_system=lambda r: log.append(("init", r.tpu)))),
    )


def test_tpu_vm_connects_locally_with_tpu_strategy(monkeypatch):
    monkeypatch.setenv("TPU_ACCELERATOR_TYPE", "v5litepod-8")
    log = []
    acc = accel._tf_accelerator(fake_tf(tpu_cores=8, log=log), ["local"], 0)
    assert (acc.kind, acc.num_replicas, acc.recommended_precision) == ("tpu", 8, "mixed_bfloat16")
    assert acc.describe().startswith("TPU v5e-8: 8 chips x 1 core, 16 GiB of HBM per core, Keras backend tensorflow")
    assert log == [("resolve", "local"), ("init", "local"), ("strategy", "local")]  # no remote connect
    assert len(acc.device_names) == 8 and "TPUClusterResolver(tpu='local')" in acc.reason


def test_colabs_tpu_is_connected_first_as_tensorflows_tpu_guide_does():
    log = []
    accel._tf_accelerator(fake_tf(tpu_cores=8, log=log), [""], 0)
    assert log == [("resolve", ""), ("connect", ""), ("init", ""), ("strategy", "")]


def test_no_tpu_found_falls_back_to_cpu_with_a_note():
    acc = accel._tf_accelerator(fake_tf(), [""], 0)
    assert (acc.kind, acc.num_replicas) == ("cpu", 1)
    assert "ValueError" in acc.notes[0] and "No TPU found" in " ".join(acc.describe().split())


def test_two_t4_gpus_use_mirrored_strategy_and_float16():
    t4 = {"device_name": "Tesla T4", "compute_capability": (7, 5)}
    acc = accel._tf_accelerator(fake_tf(gpus=[t4, t4]), [], 8)
    assert (acc.kind, acc.num_replicas, acc.recommended_precision) == ("gpu", 2, "mixed_float16")
    assert "Tesla T4" in acc.describe() and "simulate_devices is ignored" in acc.describe()
    assert acc.max_steps_per_execution is None


def test_an_h100_gets_bfloat16_and_says_its_compute_capability():
    h100 = {"device_name": "NVIDIA H100 80GB HBM3", "compute_capability": (9, 0)}
    acc = accel._tf_accelerator(fake_tf(gpus=[h100]), [], 0)
    policy, why = accelerator._precision("auto", acc.kind, acc.compute_capability)
    assert (acc.recommended_precision, policy) == ("mixed_bfloat16", "mixed_bfloat16")
    assert why == "PRECISION='auto': the policy of a GPU of compute capability 9.0"


def test_one_old_gpu_uses_default_strategy_and_float32():
    p100 = {"device_name": "Tesla P100", "compute_capability": (6, 0)}
    acc = accel._tf_accelerator(fake_tf(gpus=[p100]), [], 0)
    assert (acc.kind, acc.num_replicas, acc.recommended_precision) == ("gpu", 1, "float32")


def make_accelerator(**overrides):
    fields = dict(
        kind="cpu",
        backend="tensorflow",
        num_replicas=8,
        device_names=[f"/device:CPU:{i}" for i in range(8)],
        strategy=FakeStrategy(8),
        max_steps_per_execution=1,
        reason="test",
    )
    fields.update(overrides)
    return accel.Accelerator(**fields)


def test_describe_mentions_simulation_and_cap():
    text = " ".join(make_accelerator().describe().split())
    assert "8 replica(s) (simulated: 8 logical CPU devices" in text
    assert "capped at 1" in text and "placeholder tensor" in text


def test_scope_without_distribution_is_a_plain_context():
    acc = make_accelerator(strategy=None, num_replicas=1, backend="jax")
    with acc.scope():
        pass
    assert acc.distribution_name == "a single device"


def test_quiet_native_logs_drops_only_known_noise(capfd):
    with logs.quiet_tensorflow():
        os.write(
            2,
            b"I0000 00:00:1 123 cudart_stub.cc:31] Could not find cuda drivers on your machine, "
            b"GPU will not be used.\n",
        )
        os.write(2, b"I0000 00:00:1795365391.575511 8757 port.cc:153] oneDNN custom operations are on. You may see\n")
        os.write(2, b"E0000 00:00:1 123 real_problem.cc:1] something that matters\n")
    assert capfd.readouterr().err == "E0000 00:00:1 123 real_problem.cc:1] something that matters\n"
