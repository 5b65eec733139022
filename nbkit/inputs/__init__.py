"""What a notebook reads from outside: secrets, datasets, KerasHub presets, TFRecord files, the Kaggle account."""
