"""nbkit: the shared helpers of the nbkit notebooks (TPU/GPU/CPU setup, data, training, hand-off).

The package tree says what runs where:

    errors, params, env, atomic, logs, tfrecord, staging, hosts   the core, used by every notebook
    accel, accelerator   the accelerator: backend, replicas, precision, compile cache
    models      Keras plumbing around a notebook's model: offline ImageNet backbones, input monitor, predictions
    images/     image classification from TFRecords, for any competition: flowers, description, layout, checks (the
                data found, described, checked), oof
    text/       text classification from CSV files (Kaggle's Watson and its generated stand-in)
    imagegen/   image generation: the CycleGAN's two domains, images.zip, MiFID
    llm/        language models: prompt/response pairs, the mesh, the memory plan, the sharding check
    metrics, plots   scores and submissions, pictures: shared by the classification tasks
    handoff/    training that resumes, model packages (train on TPU, predict on GPU)
    pytorch/    PyTorch/XLA: the runtime helpers of notebook 04
    inputs/     what a notebook reads: secrets, datasets, KerasHub presets, records, generated digits
    publish/    bundle, kernel metadata, push, the command line (never bundled into a notebook)

Importing nbkit is cheap: TensorFlow, JAX, torch and kaggle are imported only by the functions that
need them, so `nbkit.accel.setup()` can still choose the Keras backend first.
"""

__version__ = "0.2.0"
