"""The custom training loop, on two simulated replicas (MirroredStrategy) in a fresh process."""

import json


def test_custom_loop_runs_several_steps_in_one_call_and_learns(run_python):
    result = run_python(
        """
        import json
        import keras
        from nbkit import accel, models
        from nbkit.guide import custom_loop, mnist
        acc = accel.setup("tensorflow", simulate_devices=2)
        data = mnist.generate(1024, 64)
        global_batch = acc.global_batch(32)
        with acc.scope():
            model = models.small_cnn(mnist.IMAGE_SHAPE, 10, filters=(8,), dense=32)
            loop = custom_loop.CustomLoop(acc.strategy, model, keras.optimizers.Adam(), global_batch)
        dist = acc.strategy.distribute_datasets_from_function(
            lambda ctx: mnist.to_dataset(data.x_train, data.y_train, ctx.get_per_replica_batch_size(global_batch), True, ctx))
        iterator = iter(dist)
        history = []
        for epoch in range(4):
            loop.reset_metrics()
            history.append(loop.train_steps(iterator, 16))
        print(json.dumps({"steps": int(loop.optimizer.iterations.numpy()), "history": history}))
        """
    )
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["steps"] == 64
    assert report["history"][-1]["loss"] < report["history"][0]["loss"]
    assert report["history"][-1]["accuracy"] > 0.3


def test_custom_loop_refuses_the_jax_backend(run_python):
    result = run_python(
        """
        from nbkit import accel
        from nbkit.guide import custom_loop
        from nbkit.errors import AcceleratorError
        acc = accel.setup("jax")
        try:
            custom_loop.CustomLoop(None, None, None, 8)
        except AcceleratorError as error:
            print("REFUSED:", error)
        """
    )
    assert "REFUSED: CustomLoop needs the TensorFlow backend" in result.stdout
