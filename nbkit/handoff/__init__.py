"""Train on a TPU, predict elsewhere: `resume` (training that survives a killed session) and
`package` (a model plus what predicting with it needs, uploadable as a Kaggle dataset)."""
