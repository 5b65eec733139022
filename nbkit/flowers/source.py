"""DATA_ROOT of the flowers notebooks: a folder or gs:// URL; "auto" (the attached competition on
Kaggle, else kagglehub: attached on Kaggle, downloaded elsewhere with Kaggle credentials; else the
generated sample); or "sample"."""

from __future__ import annotations

from typing import Any

from nbkit import env as nbenv
from nbkit.errors import DataError
from nbkit.inputs.datasets import DataSource, locate

COMPETITION = "flower-classification-with-tpus"


def sample_source(environment: Any) -> DataSource:
    """The generated sample in the working folder (written the first time)."""
    try:
        from nbkit.flowers import sample
    except ImportError:  # a kernel bundle leaves the generator out: on Kaggle the data is attached
        raise DataError(
            "This notebook's bundled nbkit has no sample generator (a kernel bundle is made for Kaggle, where "
            "the data is attached): on Kaggle, attach the competition with 'Add Input'; elsewhere set DATA_ROOT "
            "to a copy of the data, or run the notebook from a clone of nbkit."
        ) from None
    folder = sample.ensure_sample(environment.working_dir / "sample-data")
    return DataSource(str(folder), f"the generated sample in {folder} stands in")


def locate_data(data_root: str, remote_tpu: bool = False, environment: Any = None) -> DataSource:
    """Where the competition's TFRecords are, and why there."""
    environment = environment or nbenv.detect(probe_internet=lambda: False)
    if data_root == "sample":
        stand_in = sample_source(environment)
        return DataSource(stand_in.path, "DATA_ROOT='sample', so " + stand_in.reason.removesuffix(" stands in"))
    return locate(data_root, COMPETITION, remote_tpu=remote_tpu, fallback=sample_source, environment=environment)
