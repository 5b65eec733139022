"""What a notebook reads from outside: secrets, datasets, TFRecord files, the Kaggle account."""
