"""A pod slice's processes, as the environment tells them (nbkit.hosts), and what each process does
with that: the rows of each batch it feeds, the files it reads, the outputs it writes (none but process 0)."""

import numpy as np
import pytest

from nbkit import batching, hosts, staging
from nbkit.errors import AcceleratorError
from nbkit.images import pipeline

TWO = {hosts.ADDRESSES: "10.0.0.1:1234,10.0.0.2:1234", hosts.NUM_PROCESSES: "2", hosts.PROCESS_ID: "1"}


def test_the_environment_names_the_processes():
    assert hosts.from_environment({}) == hosts.Hosts()
    assert not hosts.Hosts().several and hosts.Hosts().writes_outputs
    second = hosts.from_environment(TWO)
    assert second == hosts.Hosts(1, 2, "10.0.0.1:1234")  # the first address is the coordinator's
    assert second.several and not second.writes_outputs
    assert second.describe() == "process 1 of 2" and hosts.Hosts().describe() == "one process"
    launched_alone = hosts.from_environment({**TWO, hosts.NUM_PROCESSES: "1", hosts.PROCESS_ID: "0"})
    assert launched_alone.joins_runtime and not launched_alone.several and not hosts.Hosts().joins_runtime
    assert hosts.from_environment({"TPU_WORKER_HOSTNAMES": "t1,t2,t3,t4", "TPU_WORKER_ID": "2"}) == hosts.Hosts(2, 4)
    assert hosts.from_environment({"TPU_WORKER_HOSTNAMES": "localhost"}) == hosts.Hosts()  # one TPU VM


@pytest.mark.parametrize(
    "changed, message",
    [
        ({hosts.PROCESS_ID: "2"}, "KERAS_DISTRIBUTION_PROCESS_ID=2 is not below KERAS_DISTRIBUTION_NUM_PROCESSES=2"),
        ({hosts.NUM_PROCESSES: "two"}, "KERAS_DISTRIBUTION_NUM_PROCESSES='two' is not a whole number"),
        ({hosts.ADDRESSES: ""}, "KERAS_DISTRIBUTION_JOB_ADDRESSES not set"),
    ],
)
def test_a_malformed_environment_is_named(changed, message):
    with pytest.raises(AcceleratorError, match=message):
        hosts.from_environment({**TWO, **changed})


def test_a_process_feeds_its_consecutive_rows_of_each_batch():
    whole = batching.Plan(16, 8, 6, 6)
    assert whole.local_rows == slice(0, 128) and "this process feeds" not in whole.describe()
    second = batching.Plan(16, 8, 6, 6, local_replicas=(4, 5, 6, 7))
    assert second.local_rows == slice(64, 128) and second.local_batch == 64
    assert "this process feeds replicas 4-7: 64 rows of each batch" in second.describe()
    with pytest.raises(ValueError, match="not consecutive"):
        batching.Plan(16, 8, 6, 6, local_replicas=(0, 2))


def test_each_process_reads_its_own_half_of_the_files():
    files = [f"/data/train/{i:02d}-192x192-52.tfrec" for i in range(16)]
    said = [
        pipeline.describe_reading(files, batching.Plan(16, 8, 6, 6, local_replicas=r))
        for r in ((0, 1, 2, 3), (4, 5, 6, 7))
    ]
    read = [set(line.split(": ", 1)[1].split(", ")) for line in said]
    assert "reads 8 of the 16 training files (replicas 0-3's)" in said[0]
    assert not read[0] & read[1] and len(read[0] | read[1]) == 16
    assert "reads all 16 training files" in pipeline.describe_reading(files, batching.Plan(16, 8, 6, 6))


def test_only_process_0_writes_outputs(tmp_path, monkeypatch):
    for name, value in TWO.items():
        monkeypatch.setenv(name, value)
    outputs = staging.start(tmp_path / "out")
    assert not outputs.writes and not (tmp_path / "out").exists()  # no lock, no staging folder there
    (outputs.staging / "metrics.json").write_text("{}")
    assert "process 1 of 2" in outputs.describe()
    assert outputs.publish() == [] and not outputs.staging.exists() and not (tmp_path / "out").exists()
    monkeypatch.setenv(hosts.PROCESS_ID, "0")
    first = staging.start(tmp_path / "out")
    (first.staging / "metrics.json").write_text("{}")
    assert first.writes and first.publish() == ["metrics.json"] and (tmp_path / "out" / "metrics.json").exists()


def test_the_rows_of_every_process_make_the_whole_batches(tmp_path):
    import tensorflow as tf

    from nbkit.images import layout, ordered, writer

    # 10 images in 3 files, each image's brightness its id; batches of 4 split between 2 processes.
    records = [
        {"image": tf.io.encode_jpeg(np.full((16, 16, 3), 20 * i, np.uint8)).numpy(), "class": i} for i in range(10)
    ]
    writer.write_split(records, tmp_path, 16, "val", shards=3)
    files = layout.find_files(tmp_path, 16, "val")
    halves = (slice(0, 2), slice(2, 4))
    whole = [b.numpy() for b in ordered.image_batches(files, 16, True, 4, 10)]
    parts = [[b.numpy() for b in ordered.image_batches(files, 16, True, 4, 10, rows=r)] for r in halves]
    assert len(parts[0]) == len(parts[1]) == len(whole) == 3 and all(p.shape[0] == 2 for p in parts[1])
    assert all(np.array_equal(np.concatenate(pair), w) for *pair, w in zip(*parts, whole))  # padding included
    val = [[y.numpy().tolist() for _, y in ordered.val_batches(files, 16, 4, r)] for r in halves]
    assert val == [[[0, 1], [4, 5]], [[2, 3], [6, 7]]]


def test_several_processes_need_the_jax_backend(run_python):
    found = run_python(
        """
        from nbkit import accel
        try:
            accel.setup("tensorflow")
        except Exception as error:
            print(type(error).__name__, error)
        """,
        **TWO,
    )
    assert "AcceleratorError This is process 1 of 2" in found.stdout and "use backend='jax'" in found.stdout


CHECKPOINT_FOUND = """
    import json, sys, time
    from pathlib import Path
    import jax
    from nbkit import hosts
    from nbkit.handoff import resume

    place = hosts.from_environment()
    jax.distributed.initialize(place.coordinator, place.count, place.index)  # what setup() has Keras do
    root, first = Path(sys.argv[1]), place.index == 0
    if first:  # as 05 copies RESUME_FROM's checkpoint in: late (process 1 is at the next line by then)
        time.sleep(2)
        (root / "copied").mkdir()
        (root / "copied" / "epoch-0002.weights.h5").write_bytes(b"")
        state = {"version": 1, "settings": {}, "epochs_done": 2, "weights_file": "epoch-0002.weights.h5", "history": {}}
        (root / "copied" / resume.STATE_FILE).write_text(json.dumps(state))
    print("found", resume.TrainingRun(root / "copied", {}, hosts=place).epochs_done)
    try:  # process 1 on a disk of its own (a host's local folder)
        resume.TrainingRun(root / ("copied" if first else "elsewhere"), {}, hosts=place)
    except Exception as error:
        print(type(error).__name__, error)
"""


def run_as_processes(code: str, count: int, *arguments: str) -> list[str]:
    """Run a Python snippet as `count` processes joined by JAX's distributed runtime; their outputs."""
    import subprocess
    import sys
    import textwrap

    from conftest import REPO, clean_env

    from nbkit.publish.launch import coordinator_port

    address = f"127.0.0.1:{coordinator_port()}"
    place = {hosts.ADDRESSES: address, hosts.NUM_PROCESSES: str(count)}
    started = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(code), *arguments],
            cwd=REPO,
            env=clean_env(**place, **{hosts.PROCESS_ID: str(index)}),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for index in range(count)
    ]
    return [process.communicate(timeout=300)[0] for process in started]


def test_every_process_resumes_from_the_checkpoint_process_0_put_in_place_or_stops(tmp_path):
    outputs = run_as_processes(CHECKPOINT_FOUND, 2, str(tmp_path))
    for out in outputs:
        assert "found 2" in out, out  # process 1 read the folder only once process 0 had put the checkpoint there
        # A folder process 1 does not share: both stop, saying what each found.
        assert "DataError The processes found different checkpoints" in out, out
        assert "process 0: 2 epochs done, process 1: 0 epochs done" in out and "every host mounts" in out
