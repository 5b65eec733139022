# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Your own competition: a competition's pictures and CSV -> TFRecords for the TPU notebooks
#
# TPU notebooks read TFRecords: big files of JPEGs that many cores read at once. Kaggle's image
# competitions ship pictures instead, in many forms (a folder of JPEGs plus `train.csv`, one folder
# per class, PNGs, phone photos turned by their EXIF orientation, mixed sizes). This notebook turns
# them into the layout notebooks 02, 04, 05 and 06 read, `tfrecords-jpeg-<size>x<size>/{train,val,
# test}/*.tfrec`, with `nbkit-dataset.json` beside it (the classes, the label values and columns of
# `submission.csv`, the metric) and `dataset-metadata.json` to publish it as a Kaggle dataset.
#
# On Kaggle: **Add Input** the competition, run all, then attach this notebook's output to notebook
# 02 (**Add Input -> Notebook Output**) and set its `DATA_ROOT` to the folder written here. Anywhere
# else it converts a small generated competition in the layout of Cassava Leaf Disease Classification.
# The same from a shell: `python -m nbkit tfrecords SOURCE OUTPUT --size N --labels train.csv ...`.
#
# `papermill notebooks/07_make_tfrecords.ipynb out/07.ipynb -p IMAGE_SIZE 512 -p FOLDS 5`

# %% tags=["parameters"]
COMPETITION: str = "cassava-leaf-disease-classification"  # the Kaggle competition whose pictures to convert (attach it)
DATA_ROOT: str = "auto"  # the competition's folder; "auto": on Kaggle attached (else kagglehub), elsewhere generated
PICTURES: str = "train_images"  # training pictures in DATA_ROOT: a folder of the files LABELS names, or one per class
LABELS: str = "train.csv"  # the CSV of ids and labels in DATA_ROOT; "none": PICTURES holds one folder per class
ID_COLUMN: str = "auto"  # the id column of LABELS; "auto": its first
LABEL_COLUMN: str = "auto"  # the label column of LABELS; "auto": its second
TEST: str = "test_images"  # the test pictures in DATA_ROOT; "none": no test split
SAMPLE_SUBMISSION: str = "sample_submission.csv"  # in DATA_ROOT: the submission's header and ids; "none": there is none
CLASS_NAMES: str = "label_num_to_disease_map.json"  # JSON in DATA_ROOT naming each label; "none": the labels are names
IMAGE_SIZE: int = 512  # every picture becomes a square JPEG of this size
FIT: str = "resize"  # how non-square pictures become square: "resize" (squashed, nothing cut), "crop" (centre) or "pad"
VAL_FRACTION: float = 0.2  # the share of each class held out for validation
FOLDS: int = 0  # 0: a train/val split; 2+: that many stratified folds, each in its own files (02 and 05 take FOLD)
METRIC: str = "accuracy"  # how the competition scores: "accuracy", "f1_macro" or "qwk" (quadratic weighted kappa)
SEED: int = 42  # fixes the split and the order of the records
OUTPUT_DIR: str = "auto"  # where the dataset goes; "auto": the working folder's <COMPETITION>-tfrecords
DATASET_ID: str = "auto"  # Kaggle dataset to publish it as, "owner/slug"; "auto": your user name + /<the folder's name>

# %% [markdown]
# ## Setup
# Parameters are checked first, so a misspelt or mistyped one stops here.

# %%
from nbkit import env, metrics, params
from nbkit.convert import pictures

params.check_parameters(globals(), FIT=pictures.FITS, METRIC=metrics.METRICS)  # and every int >= 0
environment = env.detect()
output = environment.working_dir / f"{COMPETITION}-tfrecords" if OUTPUT_DIR == "auto" else OUTPUT_DIR
print(environment.describe())

# %% [markdown]
# ## The competition's pictures
# As a decoder that ignores EXIF orientation sees them (`tf.io.decode_jpeg` does): mixed sizes and
# kinds (grayscale, CMYK, RGBA, palette, 16-bit), phone pictures turned (their EXIF orientation in
# red). The converter turns them upright, converts every kind to RGB and makes each one square.

# %%
from pathlib import Path

from nbkit.convert import example, pictures
from nbkit.inputs import datasets

data = datasets.locate(DATA_ROOT, COMPETITION, fallback=example.stand_in, environment=environment)
print(f"data: {data.reason}")
where = Path(data.path)
shown = sorted(p for p in (where / PICTURES).rglob("*") if p.is_file() and not p.name.startswith("."))[:12]
figure = pictures.preview(shown)

# %% [markdown]
# ## Convert
# Every core encodes pictures; the records are written in seeded order (each file mixes the
# classes), in files of about 100 MB. The whole output is written aside and moved into place at
# the end: a failed conversion leaves an earlier one as it was.

# %% tags=["nbval-ignore-output"]
from nbkit.convert.run import convert


def in_data(name: str) -> Path | None:
    return None if name == "none" else where / name


converted = convert(
    where / PICTURES,
    output,
    IMAGE_SIZE,
    labels=in_data(LABELS),
    id_column=None if ID_COLUMN == "auto" else ID_COLUMN,
    label_column=None if LABEL_COLUMN == "auto" else LABEL_COLUMN,
    test=in_data(TEST),
    sample_submission=in_data(SAMPLE_SUBMISSION),
    class_names=in_data(CLASS_NAMES),
    fit=FIT,
    val_fraction=VAL_FRACTION,
    folds=FOLDS,
    metric=METRIC,
    seed=SEED,
    competition=COMPETITION,
    dataset_id=None if DATASET_ID == "auto" else DATASET_ID,
)

# %% [markdown]
# ## The dataset the notebooks will read
# Its description, every record read back and checked as the training notebooks check them, and
# a batch of the converted pictures: upright, square, with their classes.

# %%
import io

import numpy as np
from PIL import Image

from nbkit.images import checks, description, grids, layout

dataset = description.load(converted)
print(f"dataset: {dataset.describe()}")
files = layout.split_files(converted, IMAGE_SIZE, names=["train"])
splits = checks.check_splits(files, IMAGE_SIZE, dataset.num_classes, keep_items=True)
print(f"{checks.describe(splits)} checked")
first = splits["train"].items[:20]
images = np.stack([np.asarray(Image.open(io.BytesIO(jpeg))) for jpeg, _ in first])
figure = grids.batch(images, [label for _, label in first], dataset.classes)

# %% [markdown]
# ## Next
# On Kaggle, **Save Version**: the output stays with the notebook. Attach it to notebook 02 (or 05)
# with **Add Input -> Notebook Output** and set `DATA_ROOT` to this folder under `/kaggle/input`;
# or publish it as a dataset with the command below. Locally, point `DATA_ROOT` at it.

# %% tags=["nbval-ignore-output"]
print(f"papermill notebooks/02_flowers_classifier.ipynb out/02.ipynb -p DATA_ROOT {Path(converted).resolve()}")
print(f"kaggle datasets create -p {Path(converted).resolve()} --dir-mode zip")
