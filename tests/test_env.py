from pathlib import Path

from nbkit import env


def test_platform_detection():
    assert env.platform({"KAGGLE_KERNEL_RUN_TYPE": "Interactive"}) == "kaggle"
    assert env.platform({"COLAB_RELEASE_TAG": "release-colab_2026"}) == "colab"
    assert env.platform({}) == "local"


def test_tpu_vm_from_kaggle_variables(tmp_path):
    assert env.is_tpu_vm({"ISTPUVM": "1"}, dev=tmp_path)
    assert env.is_tpu_vm({"TPU_PROCESS_ADDRESSES": "local"}, dev=tmp_path)
    assert not env.is_tpu_vm({}, dev=tmp_path)


def test_tpu_vm_from_device_files(tmp_path):
    (tmp_path / "accel0").touch()
    assert env.is_tpu_vm({}, dev=tmp_path)
    other = tmp_path / "v5e"
    (other / "vfio").mkdir(parents=True)
    assert not env.is_tpu_vm({}, dev=other)
    (other / "vfio" / "0").touch()
    assert env.is_tpu_vm({}, dev=other)


def test_detect_kaggle(tmp_path):
    found = env.detect({"KAGGLE_KERNEL_RUN_TYPE": "Batch", "ISTPUVM": "1"}, dev=tmp_path)
    assert (found.platform, found.tpu_vm) == ("kaggle", True)
    assert found.input_dir == Path("/kaggle/input") and found.working_dir == Path("/kaggle/working")
    assert found.describe() == "platform=kaggle; input=/kaggle/input; working=/kaggle/working; TPU VM"


def test_detect_local_honours_overrides(tmp_path):
    found = env.detect(
        {"NBKIT_INPUT_DIR": str(tmp_path / "in"), "NBKIT_WORKING_DIR": str(tmp_path / "w")}, dev=tmp_path
    )
    assert found.platform == "local"
    assert found.input_dir == tmp_path / "in" and found.working_dir == tmp_path / "w"
