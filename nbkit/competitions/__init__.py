"""Competitions whose facts are built in, so their data needs no nbkit-dataset.json: `flowers`
(Kaggle's "Flower Classification with TPUs", the kit's worked example and default)."""
