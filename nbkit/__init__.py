"""nbkit: the shared helpers of the nbkit notebooks (TPU/GPU/CPU setup, data, training).

Importing the package is cheap: TensorFlow, JAX, torch and kaggle are imported only
by the functions that need them, so `nbkit.accel.setup()` can still choose the Keras
backend first.
"""

from nbkit import env, errors, params

__version__ = "0.1.0"
__all__ = ["env", "errors", "params", "__version__"]
