"""`python -m nbkit`: bundle a notebook as a Kaggle kernel, push it, run it remotely, scan for leaks;
convert a competition's pictures; gather out-of-fold scores; launch a notebook as a pod slice's hosts.
`python -m nbkit <command> --help` and docs/guide.md give each command's options."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from nbkit import atomic
from nbkit.errors import DataError, NbkitError, ParameterError
from nbkit.params import check_handle
from nbkit.publish import bundle, push, scan
from nbkit.publish.bundle import CURRENT, RETIRED
from nbkit.publish.scan import redact

_ACCELERATOR_HELP = (
    f"one of {', '.join(CURRENT)} (default tpu-v5e-8); retired on Kaggle, accepted with a warning: "
    + ", ".join(name for name, (_, _, shape) in bundle.ACCELERATORS.items() if shape in RETIRED)
)


_BUNDLE_OPTIONS = (  # what `bundle.write` takes of the options `_bundle_options` declares
    "owner title accelerator_name private internet datasets competitions kernels models docker_image".split()
)


def _bundle_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebook", type=os.path.expanduser, help="notebooks/NN_name.py or .ipynb")
    parser.add_argument("--accelerator", default="tpu-v5e-8", dest="accelerator_name", help=_ACCELERATOR_HELP)
    parser.add_argument(
        "--owner", help="your Kaggle user name, needed only to push (default: KAGGLE_USERNAME or kaggle.json)"
    )
    parser.add_argument("--title", help="kernel title, 5 to 50 characters (default: from the file name)")
    parser.add_argument(
        "--competition", action="append", default=[], dest="competitions", help="competition slug (repeatable)"
    )
    parser.add_argument("--dataset", action="append", default=[], dest="datasets", help="owner/slug (repeatable)")
    parser.add_argument("--kernel", action="append", default=[], dest="kernels", help="owner/slug (repeatable)")
    parser.add_argument(
        "--model", action="append", default=[], dest="models", help="owner/model/framework/variation/version"
    )
    parser.add_argument(
        "--public", action="store_false", dest="private", help="make the kernel public (default private)"
    )
    parser.add_argument(
        "--no-internet",
        action="store_false",
        dest="internet",
        help="run with internet off (competitions often want it)",
    )
    parser.add_argument("--docker-image", help="pin a Docker image (default: none, Kaggle's current image)")
    parser.add_argument(
        "--out",
        type=os.path.expanduser,
        default="build/kernels",
        help="parent folder of the bundle (default build/kernels)",
    )


def _follow_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--outputs",
        type=os.path.expanduser,
        default="out/kaggle",
        help="outputs go to OUTPUTS/<slug>/ (default out/kaggle)",
    )
    parser.add_argument(
        "--expect", action="append", default=[], help="an output file the run must produce, e.g. metrics.json"
    )
    parser.add_argument("--timeout", type=float, default=10 * 3600, help="seconds to follow (default 10 h)")
    parser.add_argument("--interval", type=float, default=30, help="seconds between status checks (default 30)")


def _tfrecords_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("source", help="folder of pictures named in --labels, or of one sub-folder per class")
    parser.add_argument("output", help="folder to write (replaced whole): tfrecords-jpeg-NxN/, nbkit-dataset.json")
    parser.add_argument("--size", type=int, required=True, help="side of the square pictures, e.g. 512")
    parser.add_argument("--labels", help="CSV of picture ids and labels (else: one sub-folder per class)")
    parser.add_argument("--id-column", help="the labels CSV's id column (default: its first)")
    parser.add_argument("--label-column", help="the labels CSV's label column (default: its second)")
    parser.add_argument("--test", help="folder of test pictures")
    parser.add_argument("--sample-submission", help="the competition's sample_submission.csv: the test ids")
    parser.add_argument("--val-fraction", type=float, default=0.2, help="share of each class that validates")
    parser.add_argument("--folds", type=int, default=0, help="K stratified folds instead of a val split")
    parser.add_argument("--fit", default="resize", help="resize (default: squash whole), crop (centre) or pad")
    parser.add_argument("--metric", default="accuracy", help="accuracy (default), f1_macro or qwk")
    parser.add_argument("--class-names", help="JSON: {label value: readable name}, or a list of label values")
    parser.add_argument("--seed", type=int, default=42, help="seed of the split, folds and order (default 42)")
    parser.add_argument("--workers", type=int, help="processes encoding pictures (default: every core)")
    parser.add_argument("--skip-damaged", action="store_true", help="leave out pictures that cannot be decoded")
    parser.add_argument("--title", help="the Kaggle dataset's title, 6 to 50 characters (default: from OUTPUT)")
    parser.add_argument("--dataset-id", help="owner/slug of the Kaggle dataset (default: you/<OUTPUT's name>)")
    parser.add_argument("--competition", help="the competition's Kaggle slug, for the description")


def _convert(args: argparse.Namespace) -> str:
    from nbkit.convert.run import convert

    options = {k: v for k, v in vars(args).items() if k not in ("command", "source", "output", "size")}
    convert(args.source, args.output, args.size, **options)
    return ""  # convert() printed its progress and summary


def _oof(args: argparse.Namespace) -> str:
    """Gather the folds' out-of-fold predictions into one table and one score (checked against the data)."""
    from nbkit import metrics
    from nbkit.images import checks, flowers, layout, oof

    dataset = flowers.load_description(args.data)  # converted data's own, else the flowers competition's
    size = layout.choose_size(args.data, args.size)  # first: it says when --data holds no data at all
    if not dataset.folds:
        raise DataError(
            f"--data {args.data}: this data has no folds (one train/val split), so there are no out-of-fold "
            "predictions to gather: convert it with --folds K and train each fold (FOLD=0 .. K-1) first."
        )
    out = Path(args.out).expanduser()
    files = [p / "oof.csv" if p.is_dir() else p for p in (Path(f).expanduser() for f in args.files)]
    in_the_way = [p for p in (out, *out.parents) if p.exists() and not p.is_dir()]
    in_the_way += [out / name for name in ("oof.csv", "metrics.json") if (out / name).is_dir()]
    if in_the_way:
        raise ParameterError(
            f"--out {args.out}: {in_the_way[0]} is in the way of oof.csv and metrics.json; give another --out folder."
        )
    missing = [f for f in files if not f.exists()]
    if missing:
        raise ParameterError(
            f"{missing[0]}: no such file or folder. Give each fold's oof.csv, or the OUTPUT_DIR of the run that "
            "wrote it (02 or 05 with FOLD=k)."
        )
    train = checks.check_splits(layout.split_files(args.data, size, names=["train"]), size, dataset.num_classes)
    gathered = oof.gather(files, dataset, classes=train["train"].classes)
    scores = metrics.of_predictions(gathered.labels, gathered.probabilities, dataset.metric)[1]
    metrics.write_oof(gathered.ids, gathered.labels, gathered.probabilities, gathered.folds, dataset, out / "oof.csv")
    atomic.write_json(
        {**scores, "folds": len(set(gathered.folds.tolist())), "pictures": len(gathered.ids)}, out / "metrics.json"
    )
    return (
        f"out of fold, {len(set(gathered.folds.tolist()))} folds, {len(gathered.ids):,} pictures: "
        f"{metrics.describe(scores, 'OOF')}\nwrote {out / 'oof.csv'} and {out / 'metrics.json'}"
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nbkit", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    bundling = commands.add_parser("bundle", help="build/kernels/<slug>/: the notebook with nbkit inside + metadata")
    _bundle_options(bundling)
    pushing = commands.add_parser(
        "push", help="scan a bundle, then `kaggle kernels push -p` it and report URL and status"
    )
    pushing.add_argument("folder", type=os.path.expanduser, help="build/kernels/<slug>")
    run = commands.add_parser("run", help="bundle, push, follow the session, fetch its outputs into out/kaggle/<slug>/")
    _bundle_options(run)
    _follow_options(run)
    follow = commands.add_parser("follow", help="follow a pushed kernel to its end and fetch its outputs")
    follow.add_argument("kernel", type=os.path.expanduser, help="build/kernels/<slug> or owner/slug")
    _follow_options(follow)
    status = commands.add_parser("status", help="`kaggle kernels status` of a bundle folder or owner/slug")
    status.add_argument("kernel", type=os.path.expanduser, help="build/kernels/<slug> or owner/slug")
    scan = commands.add_parser("scan", help="fail if notebooks or bundles contain secrets (naming file and cell)")
    scan.add_argument("paths", nargs="+", type=os.path.expanduser, help="notebooks, bundles, or folders of them")
    tfrecords = commands.add_parser("tfrecords", help="a competition's pictures + CSV -> TFRecords for the notebooks")
    _tfrecords_options(tfrecords)
    oof = commands.add_parser("oof", help="the folds' oof.csv files -> one out-of-fold score in the data's metric")
    oof.add_argument("files", nargs="+", help="each fold's oof.csv, or the folder holding it (its OUTPUT_DIR)")
    oof.add_argument("--data", required=True, type=os.path.expanduser, help="the folded data (its DATA_ROOT)")
    oof.add_argument("--size", type=int, default=0, help="its image size (default: the smallest there)")
    oof.add_argument("--out", default="out/oof", help="where oof.csv and metrics.json go (default out/oof)")
    launch = commands.add_parser("launch", help="a notebook as local processes joined like a pod slice's hosts (JAX)")
    launch.add_argument("notebook", type=os.path.expanduser, help="notebooks/NN_name.py (its .ipynb runs) or .ipynb")
    launch.add_argument("--processes", type=int, default=2, help="processes, as hosts (default 2)")
    launch.add_argument("--devices-per-process", type=int, default=4, help="simulated CPU devices each (default 4)")
    launch.add_argument(
        "-p", nargs=2, action="append", default=[], dest="parameters", metavar=("NAME", "VALUE"), help="as papermill's"
    )
    launch.add_argument(
        "--out", type=os.path.expanduser, default="out/launch", help="executed notebooks (default out/launch)"
    )
    launch.add_argument("--timeout", type=float, default=3600, help="seconds before every process is stopped")
    return parser


def _launch(args: argparse.Namespace) -> str:
    import signal

    from nbkit.publish import launch

    # A SIGTERM (a CI job's end, `timeout`) unwinds like Ctrl-C, so every process of the run is stopped too.
    signal.signal(signal.SIGTERM, lambda number, frame: sys.exit(128 + number))
    started = launch.launch(
        args.notebook, args.processes, args.devices_per_process, args.parameters, args.out, args.timeout
    )
    return "every process ended well:\n" + launch.describe(started)


def _bundled(folder: Path) -> str:
    from nbkit.inputs.account import PLACEHOLDER_OWNER

    files = ", ".join(sorted(p.name for p in folder.iterdir()))
    metadata = push.read_metadata(folder)
    done = (
        f"wrote {folder}/ ({files}); import {folder / metadata['code_file']} into Kaggle with File -> Import Notebook"
    )
    if metadata["id"].startswith(PLACEHOLDER_OWNER + "/"):
        return f"{done}. To push it, bundle again with --owner <your Kaggle user name> (or log in first)."
    return f"{done}, or push it with: python -m nbkit push {folder}"


def _kernel(command: str, name: str) -> str:
    """The kernel id of a bundle folder, or `name` if it is a kernel handle (owner/slug)."""
    if Path(name).is_dir():
        return push.read_metadata(name)["id"]
    try:
        return check_handle("kernel", name, "owner/slug", slug=bundle.SLUG)
    except ParameterError:
        raise ParameterError(
            f"{name!r} is neither a bundle folder here nor a kernel handle: `python -m nbkit {command}` takes the "
            "folder `python -m nbkit bundle` wrote (e.g. build/kernels/02-flowers-classifier) or owner/slug as in "
            "the kernel's kaggle.com URL (e.g. alice/02-flowers-classifier)."
        ) from None


def _run(args: argparse.Namespace) -> str:
    """Do what `args` asks; the line(s) to print last."""
    if args.command in ("bundle", "run"):
        if retired := bundle.retired(args.accelerator_name):
            print(f"warning: {retired}", file=sys.stderr)
        options = {name: getattr(args, name) for name in _BUNDLE_OPTIONS}
        if args.command == "bundle":
            return _bundled(bundle.write(args.notebook, args.out, **options))
    if args.command == "push":
        return push.push(args.folder)
    if args.command in ("run", "follow"):
        following = {"expect": args.expect, "timeout_s": args.timeout, "interval_s": args.interval}
        if args.command == "run":
            folder = push.run(args.notebook, options, args.out, outputs_dir=args.outputs, **following)
        else:
            folder = push.follow_and_fetch(_kernel("follow", args.kernel), args.outputs, **following)
        return f"done: outputs in {folder}"
    if args.command == "tfrecords":
        return _convert(args)
    if args.command == "oof":
        return _oof(args)
    if args.command == "launch":
        return _launch(args)
    if args.command == "status":
        kernel = _kernel("status", args.kernel)
        return f"{kernel}: {push.status(kernel)}"
    scan.check(args.paths)
    return f"no secrets found in {', '.join(args.paths)}"


# What each command imports (here or in its worker processes), checked before it starts work.
_NEEDS = {"tfrecords": "PIL numpy", "oof": "PIL numpy", "launch": "papermill psutil", "bundle": "nbformat jupytext"}
_NEEDS |= {"run": "nbformat jupytext kaggle", "push": "kaggle", "follow": "kaggle", "status": "kaggle"}


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; exit code 0 on success, 1 with a one-paragraph error otherwise."""
    args = _parser().parse_args(argv)
    try:
        import importlib.util

        missing = [name for name in _NEEDS.get(args.command, "").split() if importlib.util.find_spec(name) is None]
        if missing:
            raise NbkitError(
                f"it needs {', '.join(missing)}, which this Python ({sys.executable}) lacks: run it with the "
                f"project's environment, `.venv/bin/python -m nbkit {args.command} ...` (`make venv` makes .venv)."
            )
        last_lines = _run(args)
        if last_lines:
            print(last_lines)
    except NbkitError as error:
        print(f"nbkit {args.command}: {type(error).__name__}: {redact(str(error))}", file=sys.stderr)
        return 1
    return 0
