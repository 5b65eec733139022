"""The training augmentation, on the host: what happens to each image is drawn from (seed, epoch, the
record's position in file order) alone, never from batches, threads or the framework. So notebook
02's tf.data pipeline and notebook 04's PyTorch dataset draw the same for the same image, a resumed
run draws what the uninterrupted run drew, and the order of the records is drawn the same way.

AUGMENT="flips": the flower starter notebooks' random left-right flip (TensorFlow and PyTorch give
identical pixels). AUGMENT="standard": flips, then one affine warp per image (zoom 0.8-1.0 into a
random part of it, rotation within 15 degrees, reflected borders) and colour (brightness, contrast,
saturation, each within 15%); both stacks apply the same numbers with the same formulas (bilinear
sampling), equal within rounding. Everything here works on Python ints, NumPy int64 arrays and
TensorFlow int64 tensors alike (only +, *, %, <): the caller turns draws into floats.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

SETS = {
    "flips": "random left-right flips (the flower starter notebooks')",
    "standard": "flips, zoom 0.8-1.0 with a random centre, rotation within 15 degrees, brightness, contrast and "
    "saturation within 15%",
}
PRIME = 2**31 - 1  # every intermediate below stays under 2**62: exact in int64 on NumPy and TensorFlow
MULTIPLIERS = (1_103_515_245 % PRIME, 69_069, 2_654_435_761 % PRIME)  # position, epoch, seed
OFFSETS = (1_013_904_223, 12_345)
# What the standard set draws for each image, each from its own stream (the salt), as (low, high).
RANGES = {
    "zoom": (0.8, 1.0),  # the part of the image kept, per side
    "centre_x": (0.0, 1.0),  # where in the room the zoom leaves the kept part sits
    "centre_y": (0.0, 1.0),
    "degrees": (-15.0, 15.0),
    "brightness": (-0.15, 0.15),  # added, in units of the full range
    "contrast": (0.85, 1.15),
    "saturation": (0.85, 1.15),
}
SALTS = {name: 7 + 13 * index for index, name in enumerate(["flip", "order", *RANGES])}


def mixed(seed: Any, epoch: Any, positions: Any, salt: int = 0) -> Any:
    """A hash in [0, PRIME) of (seed, epoch, position, salt): nearby positions and epochs end up unrelated."""
    a, b, c = MULTIPLIERS
    value = (positions % PRIME * a % PRIME + epoch % PRIME * b % PRIME + (seed + salt) % PRIME * c % PRIME) % PRIME
    for offset in OFFSETS:  # x*x + c mod p, twice
        value = (value * value + offset) % PRIME
    return value


def flips(seed: Any, epoch: Any, positions: Any) -> Any:
    """True where the record at each of `positions` is flipped in `epoch` (about half of them)."""
    return mixed(seed, epoch, positions) < PRIME // 2


def order_keys(seed: Any, epoch: Any, positions: Any) -> Any:
    """Sort keys of the records at `positions` in `epoch`: sorting by them shuffles the records."""
    return mixed(seed, epoch, positions, SALTS["order"])


def draws(seed: Any, epoch: Any, positions: Any, to_unit: Any) -> dict[str, Any]:
    """The standard set's numbers for each of `positions` (RANGES), with `to_unit` turning a hash into a
    float in [0, 1) in the caller's framework."""
    found = {}
    for name, (low, high) in RANGES.items():
        found[name] = low + (high - low) * to_unit(mixed(seed, epoch, positions, SALTS[name]))
    return found


def affine(size: int, drawn: dict[str, Any], cos: Any, sin: Any) -> list[Any]:
    """The output -> input pixel map of each image's warp (`drawn`: from `draws`), as the six numbers
    [a0, a1, a2, b0, b1, b2] with input (x, y) = (a0 x + a1 y + a2, b0 x + b1 y + b2), the form of
    TensorFlow's projective transforms; `cos` and `sin` are the caller's framework's."""
    import math

    angle = drawn["degrees"] * (math.pi / 180)
    zoom = drawn["zoom"]
    c, s = cos(angle) * zoom, sin(angle) * zoom
    middle = (size - 1) / 2
    room = (1 - zoom) * (size - 1) / 2  # how far the kept part's centre may move from the middle
    x0 = middle + (2 * drawn["centre_x"] - 1) * room
    y0 = middle + (2 * drawn["centre_y"] - 1) * room
    return [c, -s, x0 - c * middle + s * middle, s, c, y0 - s * middle - c * middle]


def colour_factors(drawn: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(brightness added in 0-255 units, contrast factor, saturation factor) of each image."""
    return drawn["brightness"] * 255.0, drawn["contrast"], drawn["saturation"]


# The views test-time augmentation averages over, in this order (TTA=n takes the first n).
VIEWS = ("as is", "flipped", "zoomed", "flipped and zoomed")
ZOOM = 0.875  # the zoomed views: the central 87.5%, scaled back up


def view_transform(size: int) -> list[float]:
    """The warp of the zoomed views (`affine`'s six numbers): the central ZOOM of the image."""
    import math

    still = {"zoom": ZOOM, "centre_x": 0.5, "centre_y": 0.5, "degrees": 0.0}
    return affine(size, still, math.cos, math.sin)


def warp(image: Any, transform: Sequence[Any]) -> Any:
    """One uint8 [size, size, 3] NumPy image warped by `affine`'s six numbers, sampled bilinearly
    (edge pixels extend outward), as float32: what TensorFlow's projective transform computes."""
    import numpy as np

    a0, a1, a2, b0, b1, b2 = transform
    size = image.shape[0]
    rows, cols = np.mgrid[0:size, 0:size].astype(np.float32)
    x = np.clip(a0 * cols + a1 * rows + a2, 0, size - 1)  # "nearest" fill: clamped to the edge
    y = np.clip(b0 * cols + b1 * rows + b2, 0, size - 1)
    x0, y0 = np.floor(x).astype(int), np.floor(y).astype(int)
    x1, y1 = np.minimum(x0 + 1, size - 1), np.minimum(y0 + 1, size - 1)  # weight 0 where clipped
    wx, wy = (x - x0)[..., None], (y - y0)[..., None]
    pixels = image.astype(np.float32)
    top = pixels[y0, x0] * (1 - wx) + pixels[y0, x1] * wx
    bottom = pixels[y1, x0] * (1 - wx) + pixels[y1, x1] * wx
    return top * (1 - wy) + bottom * wy


def to_uint8(pixels: Any) -> Any:
    """Float NumPy pixels rounded and clipped to uint8."""
    import numpy as np

    return np.clip(np.round(pixels), 0, 255).astype(np.uint8)


def apply(image: Any, seed: int, epoch: int, position: int, recipe: str) -> Any:
    """One uint8 [size, size, 3] NumPy image, augmented by `recipe` (a key of SETS) as the tf.data
    pipeline augments it (`nbkit.images.pipeline`): for the PyTorch notebook."""
    import numpy as np

    if flips(seed, epoch, position):
        image = image[:, ::-1]
    if recipe == "flips":
        return image
    drawn = draws(seed, epoch, position, lambda value: value / PRIME)
    warped = warp(image, affine(image.shape[0], drawn, np.cos, np.sin))
    return to_uint8(colour(warped, *colour_factors(drawn), np.mean, np.sum))


def view(image: Any, index: int) -> Any:
    """View `index` of VIEWS of one uint8 NumPy image [size, size, 3], as `nbkit.images.ordered` makes it."""
    if "zoomed" in VIEWS[index]:
        image = to_uint8(warp(image, view_transform(image.shape[0])))
    return image[:, ::-1] if "flipped" in VIEWS[index] else image


LUMA = (0.299, 0.587, 0.114)  # the weights of R, G and B in brightness as the eye sees it


def colour(pixels: Any, brightness: Any, contrast: Any, saturation: Any, mean: Any, total: Any) -> Any:
    """Brightness, contrast (about each channel's mean) and saturation (about the luma) of float
    pixels [..., size, size, 3] (factors broadcast against them); `mean` and `total` are the
    framework's reductions. The caller rounds and clips to uint8."""
    pixels = pixels + brightness
    centre = mean(pixels, axis=(-3, -2), keepdims=True)
    pixels = (pixels - centre) * contrast + centre
    luma = total(pixels * LUMA, axis=-1, keepdims=True)
    return luma + (pixels - luma) * saturation
