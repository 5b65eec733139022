import http.server
import threading

import numpy as np
import pytest

from nbkit.errors import ParameterError
from nbkit.guide import mnist


def test_generated_data_is_deterministic_and_mnist_shaped():
    first, second = mnist.generate(200, 50, seed=3), mnist.generate(200, 50, seed=3)
    assert first.x_train.shape == (200, 28, 28, 1) and first.x_train.dtype == np.uint8
    assert first.y_test.shape == (50,) and set(np.unique(first.y_train)) == set(range(10))
    assert np.array_equal(first.x_train, second.x_train) and np.array_equal(first.y_test, second.y_test)
    assert first.source == "generated"


def test_generated_data_is_learnable_by_nearest_centroid():
    data = mnist.generate(2000, 500, seed=0)
    x_train = data.x_train.reshape(len(data.x_train), -1).astype(np.float32)
    centroids = np.stack([x_train[data.y_train == c].mean(0) for c in range(10)])
    x_test = data.x_test.reshape(len(data.x_test), -1).astype(np.float32)
    predicted = np.argmin(((x_test[:, None] - centroids[None]) ** 2).sum(-1), axis=1)
    assert (predicted == data.y_test).mean() > 0.3  # 3x chance, before any training


def test_generate_rejects_empty_split():
    with pytest.raises(ParameterError, match="num_test=0"):
        mnist.generate(10, 0)


def write_fake_mnist(path, n=12):
    rng = np.random.default_rng(1)
    np.savez(
        path,
        x_train=rng.integers(0, 255, (n, 28, 28), np.uint8),
        y_train=np.arange(n) % 10,
        x_test=rng.integers(0, 255, (n, 28, 28), np.uint8),
        y_test=np.arange(n) % 10,
    )


def test_load_prefers_the_keras_cache(tmp_path):
    cache = tmp_path / "mnist.npz"
    write_fake_mnist(cache)
    data = mnist.load(prefer_real=True, num_train=5, num_test=4, cache_file=cache, url="http://127.0.0.1:9/none")
    assert data.source == "mnist" and data.x_train.shape == (5, 28, 28, 1) and data.y_test.shape == (4,)


def test_load_falls_back_to_generated_when_download_fails(tmp_path, capsys):
    closed_port = "http://127.0.0.1:9/mnist.npz"  # discard port: nothing listens, refused at once
    data = mnist.load(prefer_real=True, num_train=20, num_test=10, cache_file=tmp_path / "m.npz", url=closed_port)
    assert data.source == "generated" and len(data.x_train) == 20
    assert "MNIST could not be loaded" in capsys.readouterr().out
    assert list(tmp_path.iterdir()) == []  # no half-written cache left behind


def test_load_downloads_into_the_cache(tmp_path):
    served = tmp_path / "served"
    served.mkdir()
    write_fake_mnist(served / "mnist.npz")
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(served), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        cache = tmp_path / "cache" / "mnist.npz"
        url = f"http://127.0.0.1:{server.server_address[1]}/mnist.npz"
        data = mnist.load(prefer_real=True, num_train=12, num_test=12, cache_file=cache, url=url)
    finally:
        server.shutdown()
    assert data.source == "mnist" and cache.exists()
    assert np.array_equal(data.y_train, np.arange(12) % 10)


def test_corrupt_cache_falls_back_with_a_message(tmp_path, capsys):
    cache = tmp_path / "mnist.npz"
    cache.write_bytes(b"not a zip file")
    data = mnist.load(prefer_real=True, num_train=10, num_test=10, cache_file=cache, url="http://127.0.0.1:9/x")
    assert data.source == "generated" and "could not be loaded" in capsys.readouterr().out


def test_to_dataset_batches_and_shards():
    import tensorflow as tf

    data = mnist.generate(100, 30)
    test = mnist.to_dataset(data.x_test, data.y_test, batch_size=8, training=False)
    shapes = [tuple(images.shape) for images, _ in test]
    assert shapes == [(8, 28, 28, 1)] * 3  # drop_remainder: every replica gets full batches
    context = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=2)
    shard = mnist.to_dataset(data.x_test, data.y_test, batch_size=3, training=False, input_context=context)
    labels = np.concatenate([y.numpy() for _, y in shard])
    assert np.array_equal(labels, data.y_test[1::2][:15])
    train = mnist.to_dataset(data.x_train, data.y_train, batch_size=32, training=True)
    assert sum(1 for _ in train.take(10)) == 10  # repeats forever
