"""Find the best accelerator and return one object the notebook uses for the rest of the run.

    acc = accel.setup(BACKEND, simulate_devices=SIMULATE_DEVICES)   # before anything imports keras

Search order:
1. a TPU TensorFlow can drive (TPU VM with tensorflow-tpu, Colab, a named or legacy TPU): TPUStrategy;
2. a TPU only JAX can see (today's Kaggle TPU VMs ship tensorflow-cpu): Keras 3 on the JAX
   backend with `keras.distribution.DataParallel` over every core;
3. several GPUs: MirroredStrategy (TF) or DataParallel (JAX);
4. one GPU or the CPU: the default strategy. `simulate_devices=N` splits the CPU into N
   replicas so CI runs the same 8-replica code a TPU v5e-8 runs.

Modules: `choose` (setup and the backend choice), `accelerator` (the Accelerator it returns),
`tf_devices` and `jax_devices` (what each backend finds, by device kind), `precision` (the dtype
policy for the hardware), `tpu` (which TPU: generation, chips, cores, memory), `compile_cache`
(JAX's persistent compilation cache in a folder a later session gets back).
"""

from nbkit.accel.accelerator import Accelerator
from nbkit.accel.choose import setup

__all__ = ["Accelerator", "setup"]
