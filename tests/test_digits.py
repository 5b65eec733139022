"""The generated MNIST-shaped digits notebook 01 trains on without internet."""

import numpy as np

from nbkit.inputs import digits


def test_generated_digits_are_deterministic_and_shaped_as_keras_mnist():
    (x_train, y_train), (x_test, y_test) = digits.generate(200, 50, seed=3)
    (x_again, y_again), (x_test_again, _) = digits.generate(200, 50, seed=3)
    assert x_train.shape == (200, 28, 28) and x_train.dtype == np.uint8 and y_test.shape == (50,)
    assert set(np.unique(y_train)) == set(range(10))
    assert (
        np.array_equal(x_train, x_again) and np.array_equal(y_train, y_again) and np.array_equal(x_test, x_test_again)
    )
    assert not np.array_equal(x_train, digits.generate(200, 50, seed=4)[0][0])


def test_generated_digits_are_learnable_by_nearest_centroid():
    (x_train, y_train), (x_test, y_test) = digits.generate(2000, 500)
    x_train, x_test = x_train.reshape(2000, -1).astype(np.float32), x_test.reshape(500, -1).astype(np.float32)
    centroids = np.stack([x_train[y_train == c].mean(0) for c in range(10)])
    predicted = np.argmin(((x_test[:, None] - centroids[None]) ** 2).sum(-1), axis=1)
    assert (predicted == y_test).mean() > 0.3  # 3x chance, before any training
