"""nbkit: the shared helpers of the nbkit notebooks (TPU/GPU/CPU setup, data, training, hand-off). One room
per task (images/, imagegen/, text/, llm/) over shared ones; docs/architecture.md maps them. Importing nbkit
is cheap: TensorFlow, JAX, torch and kaggle are imported only by the functions that need them, so
`nbkit.accel.setup()` can still choose the Keras backend first."""

__version__ = "0.2.0"
