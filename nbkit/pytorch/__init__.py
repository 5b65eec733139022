"""PyTorch, for Kaggle's TPU image (torch + torch_xla): `runtime` (device, launcher, per-core data,
all-reducing step, master) and `flowers` (the flowers classifier of notebook 02 in PyTorch).
Nothing here imports Keras or TensorFlow."""
