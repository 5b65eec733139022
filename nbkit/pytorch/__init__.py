"""PyTorch, for Kaggle's TPU image (torch + torch_xla): `runtime` (device, launcher, all-reducing step,
master, saving). Notebook 04 holds the machine learning. Nothing here imports Keras or TensorFlow."""
