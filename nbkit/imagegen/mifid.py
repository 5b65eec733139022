"""MiFID, the score of Kaggle's image-generation competitions, as its metric code computes it, on features the
caller extracts (Kaggle: InceptionV3's 2048-d pool features); lower is better. FID divided by the memorization
distance (mean over the generated pictures of the least `1 - |cos|` to a real one) when that is below 0.1."""

from __future__ import annotations

import numpy as np

from nbkit.errors import DataError

_EPS = 0.1  # a memorization distance below this counts (above: 1)


def _frechet_distance(mu1: np.ndarray, sigma1: np.ndarray, mu2: np.ndarray, sigma2: np.ndarray) -> float:
    """The Fréchet distance of N(mu1, sigma1) and N(mu2, sigma2): |mu1 - mu2|^2 + tr(s1 + s2 - 2 (s1 s2)^1/2);
    the trace of the square root as the sum of the square roots of the eigenvalues of s1 s2 (real, >= 0)."""
    eigenvalues = np.linalg.eigvals(np.asarray(sigma1, np.float64) @ np.asarray(sigma2, np.float64))
    root_trace = np.sqrt(np.clip(eigenvalues.real, 0, None)).sum()
    diff = np.asarray(mu1, np.float64) - np.asarray(mu2, np.float64)
    return float(diff @ diff + np.trace(sigma1) + np.trace(sigma2) - 2 * root_trace)


def _memorization_distance(generated: np.ndarray, real: np.ndarray) -> float:
    """Mean over the generated features of the smallest cosine distance `1 - |cos|` to a real one."""
    generated = generated / np.linalg.norm(generated, axis=1, keepdims=True).clip(1e-12)
    real = real / np.linalg.norm(real, axis=1, keepdims=True).clip(1e-12)
    nearest = [
        1 - np.abs(chunk @ real.T).max(axis=1) for chunk in np.array_split(generated, -(-len(generated) // 1024))
    ]
    return float(np.concatenate(nearest).mean())


def score(real: np.ndarray, generated: np.ndarray) -> dict[str, float]:
    """{"fid", "memorization_distance", "mifid"} of two (pictures, features) arrays."""
    real, generated = np.asarray(real, np.float64), np.asarray(generated, np.float64)
    if (
        real.ndim != 2
        or generated.ndim != 2
        or real.shape[1] != generated.shape[1]
        or min(len(real), len(generated)) < 2
    ):
        raise DataError(
            f"MiFID needs two (pictures, features) arrays of one width, 2+ rows: {real.shape}, {generated.shape}."
        )
    fid = _frechet_distance(
        real.mean(0), np.cov(real, rowvar=False), generated.mean(0), np.cov(generated, rowvar=False)
    )
    distance = _memorization_distance(generated, real)
    kept = distance if distance < _EPS else 1.0
    return {"fid": fid, "memorization_distance": distance, "mifid": fid / (kept + 1e-15)}
