"""A remote run with the real kaggle CLI against a local stub of Kaggle: bundle -> push -> follow the
session (status and log lines) -> fetch its outputs, and the ways it ends badly."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from test_bundle import snapshot
from test_push import NOTEBOOK_03, STATUS, kaggle_api, logged_in  # noqa: F401  (fixtures)

from nbkit.errors import ParameterError, RunError
from nbkit.publish import push

OUTPUT = "/api/v1/kernels.KernelsApiService/ListKernelSessionOutput"
STREAM = "/api/v1/kernels/logs/stream/alice/03-private-dataset"
KERNEL = "alice/03-private-dataset"
STORAGE = "http://storage.example.invalid/files"  # reached through the stub as proxy, like the API
LOG = [
    {"stream_name": "stdout", "time": 1.0, "data": "platform=kaggle\n"},
    {"stream_name": "stdout", "time": 2.0, "data": "epoch 1/2 loss 4.1\n"},
    {"stream_name": "stderr", "time": 3.0, "data": "epoch 2/2 loss 3.2\n"},
]
METRICS = {"accuracy": 0.91, "f1_macro": 0.88}


def states(*sequence: str):
    """A status route answering each state in turn, then the last one for ever."""
    answers = list(sequence)

    def route(body: dict, headers: dict) -> tuple:
        state = answers.pop(0) if len(answers) > 1 else answers[0]
        failure = {"failureMessage": "Your notebook tried to allocate more memory"} if state == "ERROR" else {}
        return 200, {"status": state, **failure}

    return route


def sse(entries: list[dict]) -> bytes:
    return "".join(f"data: {json.dumps(e)}\n\n" for e in entries).encode() + b"data: END_OF_LOG\n\n"


def outputs(files: dict[str, bytes], stub) -> None:
    """Serve `files` as the session's outputs (listed by ListKernelSessionOutput, then downloaded by URL)."""
    listed = [{"fileName": name, "url": f"{STORAGE}/{name}"} for name in files]
    stub.routes[OUTPUT] = lambda body, headers: (200, {"files": listed, "log": json.dumps(LOG), "nextPageToken": ""})
    for name, data in files.items():
        stub.routes[f"GET /files/{name}"] = lambda body, headers, data=data: (200, data)


@pytest.fixture
def session(logged_in):
    """A kernel that queues, runs (logging LOG) and completes with submission.csv and metrics.json."""
    stub, _ = logged_in
    stub.routes[STATUS] = states("QUEUED", "RUNNING", "COMPLETE")
    stub.routes[f"GET {STREAM}"] = lambda body, headers: (200, sse(LOG), {"Content-Type": "text/event-stream"})
    files = {"submission.csv": b"id,label\n1,3\n", "flowers/metrics.json": json.dumps(METRICS).encode()}
    outputs(files, stub)
    return stub


def run_03(tmp_path, lines, **options):
    options = {"expect": ["submission.csv"], "timeout_s": 60, "interval_s": 0.05, **options}
    bundle_options = {"owner": "alice", "accelerator_name": "tpu-v5e-8"}
    return push.run(
        NOTEBOOK_03, bundle_options, tmp_path / "kernels", outputs_dir=tmp_path / "out", echo=lines.append, **options
    )


def test_a_run_follows_the_session_and_fetches_its_outputs(session, tmp_path):
    lines: list[str] = []
    folder = run_03(tmp_path, lines)
    assert folder == tmp_path / "out" / "03-private-dataset"
    assert (folder / "submission.csv").read_bytes() == b"id,label\n1,3\n"
    assert json.loads((folder / "flowers" / "metrics.json").read_text()) == METRICS
    text = "\n".join(lines)
    assert lines[0] == f"bundled {tmp_path / 'kernels' / '03-private-dataset'}"
    assert "pushed alice/03-private-dataset version 4" in text
    order = ["status: queued", "status: running", "platform=kaggle", "epoch 2/2 loss 3.2", "status: complete"]
    assert [text.index(line) for line in order] == sorted(text.index(line) for line in order)
    assert f"flowers/metrics.json:\n{json.dumps(METRICS, indent=2)}" in text
    requests = [(r.method, r.path) for r in session.requests]
    assert ("GET", STREAM) in requests and ("GET", "/files/flowers/metrics.json") in requests
    assert [r for r in session.requests if r.path == OUTPUT][0].body["kernelSlug"] == "03-private-dataset"


def test_a_failed_kernel_is_an_error_with_the_log_tail_and_its_outputs_so_far(session, tmp_path):
    session.routes[STATUS] = states("RUNNING", "ERROR")
    outputs({"flowers/metrics.json": b"{}"}, session)
    with pytest.raises(RunError) as error:
        run_03(tmp_path, [])
    message = str(error.value)
    assert "alice/03-private-dataset ended with status error: Your notebook tried to allocate more memory" in message
    assert message.count("epoch 2/2 loss 3.2") == 1 and "The log's last lines:\nplatform=kaggle" in message
    assert (tmp_path / "out" / "03-private-dataset" / "flowers" / "metrics.json").is_file()  # kept for a look
    bundle = tmp_path / "kernels" / "03-private-dataset"
    assert f"The bundle in {bundle} is kept" in message and (bundle / "kernel-metadata.json").is_file()


def test_a_kernel_still_running_at_the_time_limit(session, tmp_path):
    session.routes[STATUS] = states("RUNNING")
    with pytest.raises(RunError) as error:
        run_03(tmp_path, [], timeout_s=0.2)
    message = str(error.value)
    assert "alice/03-private-dataset had not finished after 0.2 s; it goes on on Kaggle" in message
    assert "python -m nbkit follow alice/03-private-dataset" in message
    assert "The log's last lines:\nplatform=kaggle" in message  # what the stream showed so far
    assert not [r for r in session.requests if r.path == OUTPUT] and not (tmp_path / "out").exists()


def test_a_missing_output_is_an_error(session, tmp_path):
    with pytest.raises(RunError, match="completed but its outputs in .* lack model.keras: did the notebook write"):
        run_03(tmp_path, [], expect=["submission.csv", "model.keras"])


def test_a_new_fetch_replaces_the_old_outputs_only_once_complete(session, tmp_path):
    folder = run_03(tmp_path, [])
    (folder / "old.txt").write_text("from the run before")
    before = snapshot(folder)
    session.routes[OUTPUT] = lambda body, headers: (500, {"code": 500, "message": "Internal error"})
    with pytest.raises(RunError, match="its outputs could not be downloaded: .*Internal error"):
        push.follow_and_fetch(KERNEL, tmp_path / "out", interval_s=0.05, echo=lambda line: None)
    assert snapshot(folder) == before


def test_run_from_the_command_line(session, tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "nbkit", "run", str(NOTEBOOK_03), "--owner", "alice", "--accelerator", "tpu-v3-8"]
        + ["--dataset", "alice/my-tfrecords", "--out", str(tmp_path / "kernels"), "--outputs", str(tmp_path / "out")]
        + ["--expect", "metrics.json", "--interval", "0.05"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert "warning: tpu-v3-8 (machine shape TpuV38) is retired on Kaggle" in result.stderr
    assert (result.stdout + result.stderr).count("is retired on Kaggle") == 1  # once, not again after the push
    assert "epoch 1/2 loss 4.1" in result.stdout and '"f1_macro": 0.88' in result.stdout
    assert result.stdout.rstrip().endswith(f"done: outputs in {tmp_path / 'out' / '03-private-dataset'}")


def test_losing_the_session_says_how_to_follow_it_again(session, tmp_path):
    session.routes[STATUS] = lambda body, headers: (500, {"code": 500, "message": "Internal error"})
    with pytest.raises(RunError) as error:
        push.follow_and_fetch(KERNEL, tmp_path / "out", interval_s=0.05, echo=lambda line: None)
    assert str(error.value).startswith(f"Lost track of {KERNEL}: `kaggle kernels status {KERNEL}` failed: Internal")
    assert f"python -m nbkit follow {KERNEL}" in str(error.value) and not (tmp_path / "out").exists()


def test_a_warning_of_the_status_command_is_shown_once(session, tmp_path):
    answers = states("RUNNING", "RUNNING", "COMPLETE")
    session.routes[STATUS] = lambda body, headers: (*answers(body, headers), {"X-Kaggle-APIVersion": "99.0.0"})
    lines: list[str] = []
    push.follow_and_fetch(KERNEL, tmp_path / "out", interval_s=0.05, echo=lines.append)
    warnings = [line for line in lines if "Looks like you're using an outdated `kaggle` version" in line]
    assert len(warnings) == 1 and "(99.0.0)" in warnings[0]


@pytest.mark.parametrize("command", ["follow", "status"])
@pytest.mark.parametrize("kernel", ["notaslug", "alice/Not A Slug", "build/kernels/nope"])
def test_follow_and_status_refuse_what_is_neither_a_bundle_nor_a_handle(kaggle_api, command, kernel):  # noqa: F811
    from nbkit.publish import cli

    with pytest.raises(ParameterError) as error:
        cli._run(cli._parser().parse_args([command, kernel]))
    assert str(error.value) == (
        f"{kernel!r} is neither a bundle folder here nor a kernel handle: `python -m nbkit {command}` takes the "
        "folder `python -m nbkit bundle` wrote (e.g. build/kernels/02-flowers-classifier) or owner/slug as in the "
        "kernel's kaggle.com URL (e.g. alice/02-flowers-classifier)."
    )
    assert kaggle_api.requests == []  # refused before the kaggle CLI ran


def test_run_without_an_owner_says_to_pass_it_to_run(kaggle_api, tmp_path, capsys):  # noqa: F811
    from nbkit.publish import cli

    out = ["--out", str(tmp_path / "kernels"), "--outputs", str(tmp_path / "out")]
    assert cli.main(["run", str(NOTEBOOK_03), *out]) == 1
    assert capsys.readouterr().err.strip() == (
        f"nbkit run: RunError: {tmp_path / 'kernels' / '03-private-dataset'}/kernel-metadata.json has no owner yet "
        "(id INSERT_USERNAME_HERE/03-private-dataset): a kernel id needs your Kaggle user name to push. Log in "
        "(kaggle.json or KAGGLE_USERNAME) or pass --owner <you> to `python -m nbkit run`, then run again."
    )
    assert kaggle_api.requests == []
