"""JAX's persistent compilation cache through `nbkit.accel.cache.use` after `accel.setup()`: a later process loads
what an earlier one compiled and computes the same; another runtime's entries and a damaged entry are
ignored with a message or JAX's warning, never a crash or a wrong result."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from nbkit.accel import cache as compile_cache
from nbkit.accel.cache import _CompileCache, _runtime_name
from nbkit.errors import ParameterError
from nbkit.handoff import resume_from

# One fresh process, as a new session: two compiled functions, their results, what the cache did.
SESSION = """
import json, sys, warnings
from nbkit import accel
from nbkit.accel import cache
acc = accel.setup("jax", simulate_devices=2)
compile_cache = cache.use(sys.argv[1], acc)
import jax, jax.numpy as jnp
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    first = jax.jit(lambda x: jnp.tanh(x @ x.T).sum())(jnp.arange(64.0).reshape(8, 8) / 64)
    second = jax.jit(lambda x: jnp.sin(x).cumsum())(jnp.arange(16.0))
print(json.dumps({
    "describe": compile_cache.describe(), "report": compile_cache.report(), "hits": compile_cache.hits,
    "results": [float(first), second.tolist()],
    "warnings": [str(w.message) for w in caught if "compilation cache" in str(w.message)],
}))
"""


def session(cache: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", SESSION, str(cache)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_later_session_loads_what_an_earlier_one_compiled(tmp_path):
    cache = tmp_path / "compile-cache"
    cold = session(cache)
    (folder,) = [p for p in cache.iterdir() if p.is_dir()]
    assert folder.name.startswith("jax-") and folder.name.endswith("-cpu-x2")
    assert "empty, so this run compiles and stores its programs there" in cold["describe"]
    assert cold["hits"] == 0 and "nothing loaded" in cold["report"]
    stored = sorted(folder.glob("*-cache"))
    assert len(stored) >= 2

    (cache / "jax-0.0.1-tpu-v5-lite-x8").mkdir()  # another runtime's entries: never read
    (cache / "jax-0.0.1-tpu-v5-lite-x8" / "key-cache").write_bytes(b"not for this runtime")
    warm = session(cache)
    assert f"{len(stored)} compiled program(s) from earlier runs" in warm["describe"]
    assert "ignored: the entries of jax-0.0.1-tpu-v5-lite-x8, which this runtime cannot use" in warm["describe"]
    assert warm["hits"] >= 2 and f"{warm['hits']} compiled program(s) loaded" in warm["report"]
    assert warm["results"] == cold["results"] and not warm["warnings"]

    # A cache copied elsewhere (RESUME_FROM, another OUTPUT_DIR) loads as well: JAX's key held the folder's path
    # (its GPU autotune subfolder's) until cache.use turned that subcache off.
    moved = session(shutil.copytree(cache, tmp_path / "elsewhere" / "compile-cache"))
    assert moved["hits"] == warm["hits"] and moved["results"] == cold["results"]

    for entry in stored:  # every entry damaged: JAX warns and compiles again, with the same results
        entry.write_bytes(entry.read_bytes()[:40])
    damaged = session(cache)
    assert damaged["results"] == cold["results"] and damaged["hits"] == 0
    assert damaged["warnings"] and all("Error reading persistent compilation cache" in w for w in damaged["warnings"])


def test_tensorflow_and_none_say_the_cache_is_off_and_nothing_asked_says_nothing():
    from nbkit.accel.accelerator import Accelerator

    off = compile_cache.use("none", Accelerator("cpu", "jax", 1, ["cpu:0"]))
    assert off.describe() == off.report() == "compile cache: off (none was asked for)"
    tensorflow = compile_cache.use("cache", Accelerator("cpu", "tensorflow", 1, ["cpu:0"]))
    assert tensorflow.describe() == "compile cache: off (JAX's; the TensorFlow backend compiles again in every session)"
    assert compile_cache.use(None, Accelerator("cpu", "jax", 1, ["cpu:0"])).describe() == ""


def test_copying_an_earlier_runs_cache_adds_only_this_runtimes_missing_entries(tmp_path):
    here = tmp_path / "now" / _runtime_name("0.7.2", "cpu", 8)
    here.mkdir(parents=True)
    (here / "a-cache").write_bytes(b"mine")
    earlier = tmp_path / "earlier"
    (earlier / here.name).mkdir(parents=True)
    (earlier / here.name / "a-cache").write_bytes(b"theirs")
    (earlier / here.name / "b-cache").write_bytes(b"b")
    (earlier / here.name / "b-atime").write_bytes(b"t")
    cache = _CompileCache(folder=here, entries_found=1)
    assert (
        resume_from.copy_compile_cache(cache, earlier)
        == f"compile cache: 1 compiled program(s) copied from {earlier / here.name}"
    )
    assert sorted(p.name for p in here.iterdir()) == ["a-cache", "b-cache"]
    assert (here / "a-cache").read_bytes() == b"mine" and cache.entries_found == 2

    other = tmp_path / "other"
    (other / "jax-0.10.2-cpu-x8").mkdir(parents=True)
    said = resume_from.copy_compile_cache(cache, other)
    assert "nothing to copy from" in said and "holds jax-0.10.2-cpu-x8 only" in said
    assert "holds none" in resume_from.copy_compile_cache(cache, tmp_path / "missing")


def test_runtime_names_are_folder_names():
    assert _runtime_name("0.7.2", "TPU v5 lite", 8) == "jax-0.7.2-tpu-v5-lite-x8"
    assert _runtime_name("0.10.2", "NVIDIA H100 80GB HBM3", 1) == "jax-0.10.2-nvidia-h100-80gb-hbm3-x1"


def test_an_unwritable_cache_folder_is_a_parameter_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")

    class Device:
        device_kind = "cpu"

    acc = type("Accelerator", (), {"backend": "jax", "jax_devices": [Device()]})
    with pytest.raises(ParameterError, match="COMPILE_CACHE=.*cannot be written.*or 'none'"):
        compile_cache.use(blocker / "cache", acc)
