"""A pod slice's processes, as the environment tells them (nbkit.hosts), and what each process does
with that: the rows of each batch it feeds, the files it reads, the outputs it writes (none but process 0)."""

import pytest

from nbkit import hosts, staging
from nbkit.errors import AcceleratorError

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
        (root / "copied" / resume._STATE_FILE).write_text(json.dumps(state))
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
