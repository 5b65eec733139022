"""Model packages: what is written, what is checked when reading, and loading across backends."""

import json
import shutil

import numpy as np
import pytest

from nbkit.errors import DataError, ParameterError
from nbkit.handoff import ensemble, package
from nbkit.images.description import Description
from nbkit.inputs import account

CLASSES = ("daisy", "rose", "tulip")
SIZE = 16
DATASET = Description(title="Flowers (test)", classes=CLASSES, label_values=(0, 1, 2), image_sizes=(SIZE,))


def tiny_model(seed=0):
    import keras

    keras.utils.set_random_seed(seed)
    return keras.Sequential(
        [
            keras.Input((SIZE, SIZE, 3)),
            keras.layers.Rescaling(1 / 255),
            keras.layers.Conv2D(4, 3, padding="same", activation="relu"),
            keras.layers.MaxPooling2D(),
            keras.layers.Flatten(),
            keras.layers.Dense(len(CLASSES), dtype="float32"),
        ]
    )


def write(folder, model=None, **overrides):
    arguments = dict(
        dataset=DATASET,
        metrics={"accuracy": np.float32(0.5)},
        training={"epochs": 1, "data": "sha256:0123"},
        dataset_id="alice/flowers-model",
    )
    arguments.update(overrides)
    return package.write_package(folder, model or tiny_model(), **arguments)


@pytest.fixture
def written(tmp_path):
    return write(tmp_path / "model-package")


def test_package_holds_model_manifest_and_kaggle_metadata(written):
    assert sorted(p.name for p in written.iterdir()) == ["dataset-metadata.json", "manifest.json", "model.keras"]
    manifest = package.read_manifest(written)
    assert manifest["dataset"]["classes"] == list(CLASSES) and manifest["image_size"] == SIZE
    assert manifest["dataset"]["label_values"] == [0, 1, 2] and manifest["dataset"]["metric"] == "accuracy"
    assert manifest["trained_with"]["keras_backend"] == "tensorflow" and "keras" in manifest["trained_with"]
    assert manifest["metrics"] == {"accuracy": 0.5} and manifest["training"]["data"] == "sha256:0123"
    assert np.asarray(manifest["check"]["logits"]).shape == (2, len(CLASSES))
    metadata = json.loads((written / "dataset-metadata.json").read_text())
    assert metadata["id"] == "alice/flowers-model" and metadata["licenses"] == [{"name": "CC0-1.0"}]


def test_loaded_package_predicts_like_the_saved_model(written):
    model, manifest = ensemble.load_package(written)
    images = np.random.default_rng(1).integers(0, 256, (3, SIZE, SIZE, 3), dtype=np.uint8)
    assert np.allclose(model.predict(images, verbose=0), tiny_model().predict(images, verbose=0), atol=1e-5)


def test_rewriting_replaces_the_package_whole(written):
    write(written, tiny_model(seed=1))
    assert not list(written.parent.glob("*.partial")) and not list(written.parent.glob("*.old"))
    ensemble.load_package(written)  # model and manifest belong together


def test_bad_dataset_id_writes_nothing_and_keeps_the_old_package(written):
    before = (written / "manifest.json").read_text()
    with pytest.raises(ParameterError, match="owner/slug"):
        write(written, dataset_id="Flowers Model")
    with pytest.raises(ParameterError, match="6 to 50"):
        account.dataset_metadata("alice/flowers-model", "tiny")
    assert (written / "manifest.json").read_text() == before
    assert not list(written.parent.glob("*.partial"))


def test_a_model_for_another_class_count_is_refused_before_anything_is_written(written):
    import keras

    before = (written / "manifest.json").read_text()
    four = keras.Sequential([keras.Input((SIZE, SIZE, 3)), keras.layers.Flatten(), keras.layers.Dense(4)])
    with pytest.raises(DataError, match="The model has 4 outputs but the data has 3 classes"):
        write(written, four)
    assert (written / "manifest.json").read_text() == before and not list(written.parent.glob(".*tmp*"))


@pytest.mark.parametrize("dataset_id", ["alice/flowers-model", "bob/abcdef"])
def test_valid_dataset_ids(dataset_id):
    assert account.dataset_metadata(dataset_id, "Flowers model")["id"] == dataset_id


@pytest.mark.parametrize(
    "dataset_id", ["flowers-model", "alice/short", "alice/Upper-Case", "alice/a b c d e", "/flowers"]
)
def test_invalid_dataset_ids(dataset_id):
    with pytest.raises(ParameterError, match=f"DATASET_ID={dataset_id!r} must be written owner/slug"):
        account.dataset_metadata(dataset_id, "Flowers model")


def test_dataset_owner_comes_from_kaggle_username_or_kaggle_json(tmp_path, monkeypatch):
    monkeypatch.setenv("KAGGLE_USERNAME", "alice")
    assert package.default_dataset_id(DATASET) == "alice/flowers-test-model"
    monkeypatch.delenv("KAGGLE_USERNAME")
    monkeypatch.setenv("KAGGLE_CONFIG_DIR", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert package.default_dataset_id(DATASET) == f"{account.PLACEHOLDER_OWNER}/flowers-test-model"
    (tmp_path / "kaggle.json").write_text(json.dumps({"username": "bob", "key": "not-read"}))
    assert package.default_dataset_id(DATASET) == "bob/flowers-test-model"


def edit_manifest(folder, **changes):
    """Change keys of manifest.json (`dataset__classes` is dataset.classes); None deletes one."""
    path = folder / "manifest.json"
    manifest = json.loads(path.read_text())
    for name, value in changes.items():
        *parents, key = name.split("__")
        where = manifest
        for parent in parents:
            where = where[parent]
        where.pop(key) if value is None else where.update({key: value})
    path.write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda f: shutil.rmtree(f), "No model package at"),
        (lambda f: (f / "manifest.json").unlink(), "has no manifest.json"),
        (lambda f: (f / "manifest.json").write_text("{"), "not valid JSON"),
        (lambda f: (f / "model.keras").unlink(), "lacks model.keras"),
        (lambda f: edit_manifest(f, format_version=1), "format_version 1; this nbkit reads version 2"),
        (lambda f: edit_manifest(f, format="something-else"), "not an nbkit model manifest"),
        (lambda f: edit_manifest(f, dataset__classes=None), "dataset.classes is missing"),
        (lambda f: edit_manifest(f, model_name=None), "model_name is missing"),
        (lambda f: edit_manifest(f, metrics__accuracy=None), r"metrics.accuracy \(the dataset's metric\) is missing"),
        (lambda f: edit_manifest(f, image_size="16"), "image_size is str, not int"),
        (lambda f: edit_manifest(f, trained_with__keras=None), "trained_with.keras is missing"),
    ],
)
def test_damaged_package_names_what_is_wrong(written, damage, message):
    damage(written)
    with pytest.raises(DataError, match=message):
        ensemble.load_package(written)


def test_model_that_is_not_the_one_recorded_is_caught(written):
    tiny_model(seed=7).save(written / "model.keras")
    with pytest.raises(DataError, match="outputs differ from those recorded"):
        ensemble.load_package(written)


def test_model_of_another_class_count_is_caught(written):
    edit_manifest(written, dataset__classes=[*CLASSES, "lily"], dataset__label_values=[0, 1, 2, 3])
    with pytest.raises(DataError, match="do not belong together"):
        ensemble.load_package(written)


def test_corrupt_model_file_is_reported(written):
    (written / "model.keras").write_bytes(b"not a zip")
    with pytest.raises(DataError, match="Could not load .*model.keras"):
        ensemble.load_package(written)


def test_compatibility_with_the_data(written):
    from dataclasses import replace

    manifest = package.read_manifest(written)
    ensemble.check_compatible(manifest, SIZE, DATASET)
    with pytest.raises(DataError, match=f"takes {SIZE}x{SIZE} images but the data given is 32x32.*IMAGE_SIZE={SIZE}"):
        ensemble.check_compatible(manifest, 32, DATASET)
    flowers = replace(DATASET, classes=tuple(map(str, range(104))), label_values=tuple(range(104)))
    with pytest.raises(DataError, match="knows 3 classes but this data has 104"):
        ensemble.check_compatible(manifest, SIZE, flowers)
    with pytest.raises(DataError, match="classes or label values differ"):
        ensemble.check_compatible(manifest, SIZE, replace(DATASET, classes=tuple(reversed(CLASSES))))
    with pytest.raises(DataError, match="classes or label values differ"):
        ensemble.check_compatible(manifest, SIZE, replace(DATASET, label_values=("a", "b", "c")))
    with pytest.raises(DataError, match="writes submissions as id,label but this data's are image_id,label"):
        ensemble.check_compatible(manifest, SIZE, replace(DATASET, id_column="image_id"))


def test_find_packages_on_kaggle_input_and_by_name(tmp_path, written):
    kaggle_input = tmp_path / "input"
    (kaggle_input / "competition-data").mkdir(parents=True)
    with pytest.raises(DataError, match="No model package under .*set PACKAGES"):
        ensemble.find_packages("auto", "unused", kaggle_input)
    shutil.copytree(written, kaggle_input / "my-flowers-model" / "v1")
    assert ensemble.find_packages("auto", "unused", kaggle_input) == [kaggle_input / "my-flowers-model" / "v1"]
    shutil.copytree(written, kaggle_input / "another-model")  # several attached: all of them, an ensemble
    assert ensemble.find_packages("auto", "unused", kaggle_input) == [
        kaggle_input / "another-model",
        kaggle_input / "my-flowers-model" / "v1",
    ]
    assert ensemble.find_packages("auto", tmp_path / "local", None) == [tmp_path / "local"]
    assert ensemble.find_packages(f"{written}, {tmp_path / 'b'}", "unused", kaggle_input) == [written, tmp_path / "b"]


def test_ensemble_members_must_agree_before_anything_is_predicted(written, tmp_path):
    other = shutil.copytree(written, tmp_path / "other")
    edit_manifest(other, dataset__label_values=["a", "b", "c"])
    manifests = [package.read_manifest(written), package.read_manifest(other)]
    with pytest.raises(DataError, match="classes or label values differ.*ensemble members must agree"):
        ensemble.check_same(manifests, ["first", "other"])
    edit_manifest(other, dataset__label_values=[0, 1, 2], image_size=32)
    # Issue 35 #19: told to "set IMAGE_SIZE=32"; no IMAGE_SIZE serves both: the packages differ, and which.
    with pytest.raises(
        DataError, match=r"different sizes \(first: 16, other: 32\).*trained at one IMAGE_SIZE"
    ) as error:
        ensemble.check_same([package.read_manifest(written), package.read_manifest(other)], ["first", "other"])
    assert "set IMAGE_SIZE" not in str(error.value)
    edit_manifest(other, image_size=16, created="another training")
    ensemble.check_same([package.read_manifest(written), package.read_manifest(other)], ["first", "other"])


def test_the_same_package_twice_in_an_ensemble_is_refused(written, tmp_path):
    """Issue 35 #7: given twice (by one path or two copies), a package was averaged twice."""
    copy = shutil.copytree(written, tmp_path / "copy")
    for names in (["first", "first"], ["first", "copy"]):
        with pytest.raises(DataError, match=f"first and {names[1]} are the same model package.*Give each package once"):
            ensemble.check_same([package.read_manifest(written), package.read_manifest(copy)], names)
    other = shutil.copytree(written, tmp_path / "other")  # another training: other check logits
    edit_manifest(other, check__logits=[[0.5] * 3, [0.25] * 3])
    ensemble.check_same([package.read_manifest(p) for p in (written, other)], ["first", "other"])


SETUP = """
from nbkit import accel
acc = accel.setup({backend!r}, simulate_devices={devices})
"""

SAVE_AND_PREDICT = """
import keras, numpy as np
from nbkit.handoff import package
keras.utils.set_random_seed(3)
with acc.scope():
    model = keras.Sequential([keras.Input((96, 96, 3), dtype="uint8"), keras.layers.Rescaling(1 / 255),
        keras.layers.AveragePooling2D(2), keras.layers.Conv2D(16, 3, activation="relu"), keras.layers.Flatten(),
        keras.layers.Dense(104, dtype="float32")])
    model.compile(keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
rng = np.random.default_rng(0)
images = rng.integers(0, 256, (32, 96, 96, 3), dtype=np.uint8)
model.fit(images, rng.integers(0, 104, 32), batch_size=16, epochs=1, verbose=0)
from nbkit.images import flowers
package.write_package({folder!r}, model, dataset=flowers._DATASET, metrics={{"f1_macro": 0.0}}, training={{}},
    dataset_id="alice/flowers-model")
np.save({folder!r} + "-logits.npy", model.predict(images, batch_size=16, verbose=0))
"""

LOAD_AND_PREDICT = """
import numpy as np
from nbkit.handoff import ensemble
model, manifest = ensemble.load_package({folder!r}, acc)
images = np.random.default_rng(0).integers(0, 256, (32, 96, 96, 3), dtype=np.uint8)
np.save({folder!r} + "-reloaded.npy", model.predict(images, verbose=0))
print("trained with", manifest["trained_with"]["keras_backend"], "loaded with", acc.backend)
"""


def test_package_moves_between_backends(tmp_path, run_python):
    """Saved with TensorFlow, loaded with JAX on 8 devices (TPU-shaped, like Kaggle's TPUs): two processes. The
    other way, trained with JAX and predicted with TensorFlow, is notebook 05 -> 06 in
    tests/test_handoff.py::test_06_predicts_with_tensorflow_what_05_trained_with_jax."""
    with_tf = str(tmp_path / "tf-package")
    run_python(SETUP.format(backend="tensorflow", devices=0) + SAVE_AND_PREDICT.format(folder=with_tf))
    jax_said = run_python(SETUP.format(backend="jax", devices=8) + LOAD_AND_PREDICT.format(folder=with_tf)).stdout
    assert "trained with tensorflow loaded with jax" in jax_said
    original, reloaded = np.load(with_tf + "-logits.npy"), np.load(with_tf + "-reloaded.npy")
    assert np.allclose(original, reloaded, rtol=1e-4, atol=1e-4)
    assert (original.argmax(1) == reloaded.argmax(1)).all()
