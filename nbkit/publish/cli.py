"""`python -m nbkit`: bundle a notebook as a Kaggle kernel, push it, ask its status, scan for leaks.

python -m nbkit bundle notebooks/02_flowers_classifier.py --accelerator tpu-v5e-8 --competition flower-classification-with-tpus
python -m nbkit push build/kernels/02-flowers-classifier
python -m nbkit status build/kernels/02-flowers-classifier      (or owner/slug)
python -m nbkit scan notebooks build/kernels
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from nbkit.errors import NbkitError
from nbkit.publish import scan
from nbkit.publish.kernel_metadata import ACCELERATORS
from nbkit.publish.scan import redact


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nbkit", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)

    bundle = commands.add_parser(
        "bundle", help="write build/kernels/<slug>/: the notebook with nbkit inside + kernel-metadata.json"
    )
    bundle.add_argument("notebook", help="notebooks/NN_name.py or .ipynb")
    bundle.add_argument(
        "--accelerator", default="tpu-v5e-8", help=f"one of {', '.join(ACCELERATORS)} (default tpu-v5e-8)"
    )
    bundle.add_argument("--owner", help="your Kaggle user name (default: KAGGLE_USERNAME or kaggle.json)")
    bundle.add_argument("--title", help="kernel title, 5 to 50 characters (default: from the file name)")
    bundle.add_argument("--slug", help="kernel slug; must match the title (default: from the title)")
    bundle.add_argument(
        "--competition", action="append", default=[], dest="competitions", help="competition slug (repeatable)"
    )
    bundle.add_argument("--dataset", action="append", default=[], dest="datasets", help="owner/slug (repeatable)")
    bundle.add_argument("--kernel", action="append", default=[], dest="kernels", help="owner/slug (repeatable)")
    bundle.add_argument(
        "--model",
        action="append",
        default=[],
        dest="models",
        help="owner/model/framework/variation/version (repeatable)",
    )
    bundle.add_argument("--public", action="store_true", help="make the kernel public (default private)")
    bundle.add_argument(
        "--no-internet", action="store_true", help="run with internet off (competitions often require it)"
    )
    bundle.add_argument("--docker-image", help="pin a Docker image (default: none, Kaggle's current image)")
    bundle.add_argument("--out", default="build/kernels", help="parent folder of the bundle (default build/kernels)")

    push = commands.add_parser("push", help="scan a bundle, then `kaggle kernels push -p` it and report URL and status")
    push.add_argument("folder", help="build/kernels/<slug>")
    push.add_argument("--no-status", action="store_true", help="do not ask the status after pushing")

    status = commands.add_parser("status", help="`kaggle kernels status` of a bundle folder or owner/slug")
    status.add_argument("kernel")

    scan = commands.add_parser("scan", help="fail if notebooks or bundles contain secrets (naming file and cell)")
    scan.add_argument("paths", nargs="+")
    return parser


def run(args: argparse.Namespace) -> str:
    """Do what `args` asks; the line(s) to print."""
    if args.command == "bundle":
        from nbkit.publish import bundle

        folder = bundle.write(
            args.notebook,
            args.out,
            owner=args.owner,
            title=args.title,
            slug=args.slug,
            accelerator_name=args.accelerator,
            private=not args.public,
            internet=not args.no_internet,
            datasets=args.datasets,
            competitions=args.competitions,
            kernels=args.kernels,
            models=args.models,
            docker_image=args.docker_image,
        )
        return f"wrote {folder}/ ({', '.join(sorted(p.name for p in folder.iterdir()))}); push it with: python -m nbkit push {folder}"
    if args.command == "push":
        from nbkit.publish import push

        return push.push(args.folder, check_status=not args.no_status).describe()
    if args.command == "status":
        from nbkit.publish import push

        kernel = push.read_metadata(args.kernel)["id"] if Path(args.kernel).is_dir() else args.kernel
        return f"{kernel}: {push.status(kernel)}"
    scan.check(args.paths)
    return f"no secrets found in {', '.join(args.paths)}"


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; exit code 0 on success, 1 with a one-paragraph error otherwise."""
    args = _parser().parse_args(argv)
    try:
        print(run(args))
    except NbkitError as error:
        print(f"nbkit {args.command}: {type(error).__name__}: {redact(str(error))}", file=sys.stderr)
        return 1
    return 0
