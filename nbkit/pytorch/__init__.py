"""PyTorch, for Kaggle's TPU image (torch + torch_xla): `runtime` (device, launcher, per-core data,
all-reducing step, master) and `classifier` (the image classifier of notebook 02 in PyTorch).
Nothing here imports Keras or TensorFlow."""
