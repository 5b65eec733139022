"""The data a notebook trains on, in one object: where it is and why there, its description (classes,
the submission's form, the metric, folds), the image size, and each split's files, read once and
checked. Its methods are what the data decides: whether a batch fits the splits and the memory, the
scores in the competition's metric, and submission.csv / oof.csv in the competition's form."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from nbkit.images import checks, layout, metrics
from nbkit.images.checks import Split
from nbkit.images.description import Description


@dataclass(frozen=True)
class Data:
    """Checked data: `splits` by name ("train", "val", "test"; with a FOLD, val is that fold; no test
    split where the data has none)."""

    path: str
    reason: str  # why this folder (DATA_ROOT itself, the attached competition, the generated sample)
    dataset: Description
    image_size: int
    splits: dict[str, Split]
    fold: int = -1

    @property
    def train(self) -> Split:
        return self.splits["train"]

    @property
    def val(self) -> Split:
        return self.splits["val"]

    @property
    def test(self) -> Split | None:
        """None where the data has no test split (converted without --test; a code competition's test
        pictures appear only when Kaggle reruns the notebook)."""
        return self.splits.get("test")

    def describe(self) -> str:
        """Three lines: where the data is and why, the dataset, the images of each split."""
        sizes = f"{self.image_size}x{self.image_size} images: {checks.describe(self.splits)}"
        fold = f" (fold {self.fold} validates)" if self.fold != -1 else ""
        fold += " (no test split: no submission)" if self.test is None else ""
        return f"data: {self.reason}\ndataset: {self.dataset.describe()}\n{sizes}{fold}"

    def fingerprint(self) -> str:
        """A short hash of the training and validation files (names, sizes, first and last bytes)."""
        return checks.fingerprint(self.train.files + self.val.files)

    def check_batch(self, per_replica_batch: int, replicas: int, parameter: str = "PER_REPLICA_BATCH") -> int:
        """The global batch, or a ParameterError saying what to pass: every training step and validation
        pass needs a full batch, and the batch must fit in half the memory free here."""
        counts = {name: split.count for name, split in self.splits.items() if split.labeled}
        item_bytes = self.image_size * self.image_size * 3
        return checks.check_batch(per_replica_batch, replicas, item_bytes, counts, parameter=parameter)

    def score(self, labels: Sequence[int], probabilities: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        """(confusion matrix, scores): accuracy, macro F1 / precision / recall and the competition's metric."""
        return metrics.of_predictions(labels, probabilities, self.dataset.metric)

    def write_submission(self, ids: Sequence[str], labels: Sequence[int], path: str | Path) -> Path:
        """submission.csv in the competition's form, checked against its sample submission when there is one."""
        return metrics.write_submission(ids, labels, self.dataset, path)

    def write_oof(self, labels: Sequence[int], probabilities: np.ndarray, path: str | Path) -> Path:
        """oof.csv: this fold's validation predictions, one row per validation id (`python -m nbkit oof`)."""
        return metrics.write_oof(self.val.ids, labels, probabilities, self.fold, self.dataset, path)


def load(
    path: str, reason: str, dataset: Description, image_size: int = 0, fold: int = -1, names: Sequence[str] = ()
) -> Data:
    """The data in `path` (described by `dataset`): IMAGE_SIZE `image_size` (0: the smallest there), the
    splits `names` (default all, the test split where there is one), with fold `fold` validating when
    the data has folds; every record read and checked now, so bad data stops here with the file and record."""
    size = layout.choose_size(path, image_size)
    optional = () if names else ("test",)
    files = layout.split_files(path, size, dataset.folds, fold, names=names or layout.SPLITS, optional=optional)
    return Data(path, reason, dataset, size, checks.check_splits(files, size, dataset.num_classes), fold)
