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
# # Private datasets and secrets on Kaggle (and Colab, and your laptop)
#
# Private data, one call per step: read a user secret without ever printing it, find where the
# dataset's files are (attached under `/kaggle/input` on TPU VMs and GPU/CPU kernels alike, else
# fetched by kagglehub with your Kaggle credentials), then list and read a few records. Outside
# Kaggle it reads the local sample data instead and says so, and a missing secret is reported with
# where to add it.
#
# On Kaggle: **Add Input** your private dataset, **Add-ons -> Secrets** for the secret, then run all.
#
# `papermill notebooks/03_private_dataset.ipynb out/03.ipynb -p DATASET you/your-tfrecords -p SECRET_NAME WANDB_API_KEY`

# %% tags=["parameters"]
DATASET: str = "your-name/your-private-tfrecords"  # the Kaggle dataset to read, owner/slug (attach it with Add Input)
DATA_ROOT: str = "auto"  # "auto" (on Kaggle the attached dataset; elsewhere kagglehub, else the sample) or a folder
SECRET_NAME: str = "NBKIT_EXAMPLE_TOKEN"  # Kaggle Add-ons -> Secrets, Colab secrets, an env variable or a .env line
SECRET_REQUIRED: bool = False  # True stops here when the secret is missing; False says where it looked and goes on
RECORDS: int = 3  # how many records to show

# %% [markdown]
# ## Setup
# Parameters are checked first; then where this notebook runs.

# %%
from nbkit import env, params
from nbkit.inputs import datasets, secrets

params.check_parameters(globals(), RECORDS=1)
params.check_handle("DATASET", DATASET, example="alice/my-private-tfrecords")
environment = env.detect()
print(environment.describe())

# %% [markdown]
# ## Credentials
# One call looks in Kaggle user secrets, Colab secrets, or the environment and `./.env`. The value
# stays in `token.value`; printing `token` shows only where it came from and its length.

# %%
token = secrets.secret(SECRET_NAME, required=SECRET_REQUIRED)
print(token.describe())

# %% [markdown]
# ## Dataset path
# On Kaggle, TPU VMs and GPU/CPU kernels read the attached `/kaggle/input/<slug>` directly (a
# private dataset attaches for its owner and collaborators). Elsewhere kagglehub fetches it with
# your Kaggle credentials; without them the flowers sample stands in.

# %%
from nbkit.images import flowers

where = datasets.locate(DATA_ROOT, DATASET, fallback=flowers.sample_source, environment=environment)
print(f"reading {DATASET} from {where.describe()}")

# %% [markdown]
# ## List and read a few records
# Any TFRecord dataset works: each record is shown as its features, long byte strings by length.

# %%
from nbkit.inputs import records

files = records.list_files(where.path)
print(f"{len(files)} .tfrec files, e.g. {files[0].removeprefix(where.path)}")
for number, record in enumerate(records.peek(files, RECORDS), start=1):
    print(f"record {number}: {record}")
