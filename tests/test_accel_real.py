"""accel.setup() for real on this CPU, in fresh processes, with simulated TPU-shaped replicas; notebook 01's
cells that place a product on one device and replicate it on every replica, run on each backend."""

import json

# Run in a snippet after `acc = accel.setup(...)`: notebook 01's placement and replication cells, placing on the
# last device rather than the first (the default device, where an ignored placement would land too).
RUN_01_CELLS = """
cell = {"acc": acc}
cells = jupytext.read("notebooks/01_tpu_setup.py").cells
for source in [c.source for c in cells if "with tf.device(" in c.source or "shard_map(" in c.source]:
    exec(source.replace("s[0]", "s[-1]"), cell)
"""


def last_json(result):
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_tensorflow_with_eight_simulated_replicas_and_the_keras_bug_behind_its_steps_cap(run_python):
    """One process: 8 logical CPUs under MirroredStrategy. The cap on steps_per_execution exists because
    of an upstream bug: when the FIT line fails, TensorFlow/Keras fixed it: remove the cap in nbkit.accel."""
    result = run_python(
        """
        import json
        import numpy as np
        from nbkit import accel
        acc = accel.setup("tensorflow", simulate_devices=8)
        import jupytext, keras, tensorflow as tf
        RUN_01_CELLS
        results, placed = cell["results"], cell["c"].device
        again = accel.setup("tensorflow", simulate_devices=8)  # re-running the cell works
        with acc.scope():
            model = keras.Sequential([
                keras.Input((8, 8, 1)),
                keras.layers.Rescaling(1 / 255),
                keras.layers.Conv2D(4, 3, padding="same", activation="relu"),
                keras.layers.MaxPooling2D(),
                keras.layers.Flatten(),
                keras.layers.Dense(4, dtype="float32"),
            ])
            model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), steps_per_execution=2)
        ds = tf.data.Dataset.from_tensor_slices((np.zeros((64, 8, 8, 1), "uint8"), np.zeros(64, "int64"))).batch(16)
        try:
            model.fit(ds, epochs=1, verbose=0)
            fit = "FIT-OK"
        except tf.errors.InvalidArgumentError as error:
            fit = f"FIT-FAILED {'placeholder' in str(error)}"
        print(json.dumps({"kind": acc.kind, "backend": acc.backend, "replicas": acc.num_replicas,
                          "strategy": acc.distribution_name, "simulated": acc.simulated,
                          "spe": acc.max_steps_per_execution, "again": again.num_replicas,
                          "results": [r.numpy().tolist() for r in results], "fit": fit,
                          "placed": placed.endswith(acc.device_names[-1])}))
        """.replace("RUN_01_CELLS", RUN_01_CELLS.strip().replace("\n", "\n        "))
    )
    report = last_json(result)
    assert report["kind"] == "cpu" and report["backend"] == "tensorflow" and report["simulated"]
    assert report["replicas"] == 8 and report["again"] == 8
    assert report["strategy"] == "MirroredStrategy"
    assert report["spe"] == 1  # the MirroredStrategy-on-CPU bug: the notebooks lower to it
    assert report["results"] == [[[22.0, 28.0], [49.0, 64.0]]] * 8 and report["placed"]
    assert report["fit"] == "FIT-FAILED True"


def test_jax_with_eight_simulated_replicas_trains_with_steps_per_execution_and_says_what_it_set(run_python):
    """One process: 8 JAX devices train with steps_per_execution; setup() lists what it set in the process;
    PJRT_NPROC is twice the device count (the all-reduce deadlock, see bench/jax_deadlock.py) and jaxlib still
    reads that undocumented knob: its intra-op pool has that many threads."""
    result = run_python(
        """
        import collections, glob, json, os
        import numpy as np
        from nbkit import accel
        acc = accel.setup("jax", simulate_devices=8)
        import jupytext, keras
        RUN_01_CELLS
        results, placed = cell["results"], [str(d) for d in cell["c"].devices()]
        with acc.scope():
            model = keras.Sequential([
                keras.Input((8, 8, 1)),
                keras.layers.Rescaling(1 / 255),
                keras.layers.Conv2D(4, 3, padding="same", activation="relu"),
                keras.layers.MaxPooling2D(),
                keras.layers.Flatten(),
                keras.layers.Dense(2, dtype="float32"),
            ])
            model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                          steps_per_execution=4)
        x = np.zeros((64, 8, 8, 1), "uint8"); y = np.zeros(64, "int64"); x[::2] = 255; y[::2] = 1
        history = model.fit(x, y, batch_size=2 * acc.num_replicas, epochs=3, verbose=0)
        kernel = model.layers[1].kernel.value
        from nbkit import models
        from nbkit.errors import AcceleratorError
        logits = np.asarray(model.predict(x[:16], batch_size=16, verbose=0), np.float64)
        models.check_rows(model, x[:16], logits)  # its own rows, undistributed in one compiled call: no error
        try:
            models.check_rows(model, x[:16], np.roll(logits, 1, axis=0))  # other images' rows
            rows_caught = False
        except AcceleratorError:
            rows_caught = True
        threads = collections.Counter(open(p).read().strip() for p in glob.glob("/proc/self/task/*/comm"))
        print(json.dumps({"kind": acc.kind, "replicas": acc.num_replicas, "simulated": acc.simulated,
                          "distribution": acc.distribution_name, "spe": model.steps_per_execution,
                          "results": [r.tolist() for r in results], "loss": history.history["loss"],
                          "kernel_devices": len(kernel.sharding.device_set), "nproc": os.environ["PJRT_NPROC"],
                          "eigen": threads.get("tf_XLAEigen", 0), "said": " ".join(acc.describe().split()),
                          "placed": placed == acc.device_names[-1:], "rows_caught": rows_caught}))
        """.replace("RUN_01_CELLS", RUN_01_CELLS.strip().replace("\n", "\n        "))
    )
    report = last_json(result)
    assert (report["kind"], report["replicas"], report["simulated"]) == ("cpu", 8, True)
    assert report["distribution"] == "keras.distribution.DataParallel"
    assert report["spe"] == 4
    assert report["results"] == [[[22.0, 28.0], [49.0, 64.0]]] * 8 and report["placed"]
    assert report["kernel_devices"] == 8  # weights replicated on all 8 devices
    assert report["loss"][-1] < report["loss"][0]
    assert report["rows_caught"]  # models.check_rows on JAX: rows of other images are an AcceleratorError
    assert int(report["nproc"]) >= 16 and report["eigen"] == int(report["nproc"])
    said = report["said"].split("For this process: ", 1)[1]
    assert "KERAS_BACKEND=jax" in said and "--xla_force_host_platform_device_count=8" in said
    assert "--xla_backend_optimization_level=1" in said  # LLVM -O1 for JAX on a CPU
    assert f"PJRT_NPROC={report['nproc']}" in said and "`shuffle=True` was passed" in said


def test_jax_split_after_jax_started_says_how_to_fix(run_python):
    result = run_python(
        """
        import jax
        jax.devices()  # JAX starts with one CPU device
        from nbkit import accel
        from nbkit.errors import AcceleratorError
        try:
            accel.setup("jax", simulate_devices=4)
        except AcceleratorError as error:
            print("REFUSED:", error)
        """
    )
    assert "REFUSED: JAX already started with 1 CPU device(s)" in result.stdout


def test_single_cpu_then_keras_shuffle_warning_then_a_backend_switch_refused(run_python):
    """One process, three steps: setup() on one CPU (the default strategy); Keras still warns about shuffle on
    every fit() with a tf.data dataset (the workaround in nbkit.accel, _SHUFFLE_WARNING: when it stops, the filter
    can go); and once Keras runs on TensorFlow, asking for JAX says how to fix it."""
    result = run_python(
        """
        import json, warnings
        import numpy as np
        from nbkit import accel
        from nbkit.errors import AcceleratorError
        acc = accel.setup()
        print(json.dumps({"backend": acc.backend, "replicas": acc.num_replicas, "cap": acc.max_steps_per_execution,
                          "policy": acc.recommended_precision, "strategy": acc.distribution_name}))
        import keras, tensorflow as tf
        model = keras.Sequential([keras.Input((1,)), keras.layers.Dense(1)])
        model.compile("sgd", "mse")
        data = tf.data.Dataset.from_tensor_slices((np.zeros((4, 1)), np.zeros((4, 1)))).batch(2)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model.fit(data, epochs=1, verbose=0)
        print("WARNED", any(accel._SHUFFLE_WARNING in str(w.message) for w in caught))
        try:
            accel.setup("jax")
        except AcceleratorError as error:
            print("REFUSED:", error)
        """
    )
    assert json.loads(next(line for line in result.stdout.splitlines() if line.startswith("{"))) == {
        "backend": "tensorflow",
        "replicas": 1,
        "cap": None,
        "policy": "float32",
        "strategy": "_DefaultDistributionStrategy",
    }
    assert "cuda drivers" not in result.stderr  # known start-up noise is filtered
    assert "WARNED True" in result.stdout
    assert "REFUSED: Keras was already imported with the 'tensorflow' backend" in result.stdout
    assert "Restart the kernel" in result.stdout
