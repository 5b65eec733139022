"""What a notebook reads from outside: `secrets` (Kaggle user secrets, Colab secrets, environment or
.env), `datasets` (where a Kaggle dataset or competition's files are: a given folder, the attached
input, its GCS copy, or a stand-in), `records` (a look into any TFRecord files), `digits`
(MNIST-shaped digits for notebook 01 without internet)."""
