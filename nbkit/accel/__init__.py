"""`acc = accel.setup(BACKEND, ...)`, before anything imports keras: a TPU TensorFlow can drive
(TPUStrategy), else one only JAX sees (Kaggle's TPU VMs ship tensorflow-cpu: DataParallel on JAX),
else GPUs, else the CPU (`simulate_devices=N` splits it so CI runs a TPU v5e-8's 8-replica code)."""

from nbkit.accel.accelerator import Accelerator
from nbkit.accel.choose import setup

__all__ = ["Accelerator", "setup"]
