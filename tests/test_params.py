import re
from pathlib import Path

import pytest

from nbkit import params
from nbkit.errors import ParameterError


def test_check_choice_accepts_allowed_value():
    assert params.check_choice("PROFILE", "smoke", params._PROFILES) == "smoke"


def test_check_choice_names_parameter_and_allowed_values():
    with pytest.raises(ParameterError) as error:
        params.check_choice("PROFILE", "fast", params._PROFILES)
    message = str(error.value)
    assert "PROFILE='fast'" in message
    for allowed in params._PROFILES:
        assert repr(allowed) in message


@pytest.mark.parametrize("value", [-1, 1.5, "3", True, None])
def test_check_int_rejects_bad_values(value):
    with pytest.raises(ParameterError, match="EPOCHS"):
        params.check_int("EPOCHS", value, minimum=0)


def test_check_int_accepts_minimum():
    assert params.check_int("EPOCHS", 0, minimum=0) == 0
    assert params.check_int("STEPS", 5, minimum=1) == 5


@pytest.mark.parametrize(
    "value, form, ok",
    [
        ("alice/flowers-model", "owner/slug", True),
        ("alice", "owner/slug", False),
        ("a/b/c", "owner/slug", False),
        ("alice/bad slug", "owner/slug", False),
        (None, "owner/slug", False),
        ("alice", "a user name", True),
        ("keras/efficientnet/keras/b0", "owner/model/framework/variation[/version]", True),
        ("keras/efficientnet/keras/b0/2", "owner/model/framework/variation[/version]", True),
        ("keras/efficientnet", "owner/model/framework/variation[/version]", False),
        ("keras/efficientnet/keras/b0/v2", "owner/model/framework/variation[/version]", False),  # a number
        ("alice/train/versions/3", "owner/slug[/versions/N]", True),
        ("alice/train/3", "owner/slug[/versions/N]", False),  # "versions" word for word
        ("alice/train/version/3", "owner/slug[/versions/N]", False),
        ("alice/train/versions/three", "owner/slug[/versions/N]", False),
    ],
)
def test_check_handle_is_the_one_check_of_kaggle_handles(value, form, ok):
    if ok:
        assert params.check_handle("X", value, form) == value
    else:
        with pytest.raises(ParameterError, match=f"X={value!r} must be written"):
            params.check_handle("X", value, form)


def test_check_handle_with_a_slug_rule():
    import re

    rule = re.compile(r"^[a-z0-9-]{6,50}$")
    with pytest.raises(ParameterError, match="its slug"):
        params.check_handle("DATASET_ID", "alice/Short", slug=rule)


PARAMETERS_CELL = (
    'DATA_ROOT: str = "auto"  # a folder\nEPOCHS: int = 0\nRATE: float = 0.5\nFLAG: bool = False\nNUM_CLASSES = 10\n'
)
CHECK_CELL = "from nbkit import params\nparams.check_parameters(globals())\n"


def kernel_namespace(**injected: object) -> dict:
    """The globals of a kernel that ran the parameters cell, papermill's injected cell and the check's cell."""
    namespace = {"DATA_ROOT": "auto", "EPOCHS": 0, "RATE": 0.5, "FLAG": False, "NUM_CLASSES": 10, "acc": object()}
    lines = "".join(f"{name} = {value!r}\n" for name, value in injected.items())
    cells = [PARAMETERS_CELL] + (["# Parameters\n" + lines] if injected else []) + [CHECK_CELL]
    return {**namespace, **injected, "In": ["", *cells], "__annotations__": {}}


def test_the_shared_parameters_and_the_allowed_minimums_are_checked():
    # Notebook 01's call: BACKEND and PROFILE by their shared choices, ints >= 0 unless given another minimum.
    cell = 'BACKEND: str = "auto"\nPROFILE: str = "auto"\nSIMULATE_DEVICES: int = 8\nSTEPS_PER_EXECUTION: int = 32\n'
    good = {"BACKEND": "jax", "PROFILE": "smoke", "SIMULATE_DEVICES": 8, "STEPS_PER_EXECUTION": 1}

    def namespace(**changed):
        values = {**good, **changed}
        injected = "# Parameters\n" + "".join(f"{name} = {value!r}\n" for name, value in values.items())
        return {**values, "In": ["", cell, injected, CHECK_CELL]}

    params.check_parameters(namespace(), STEPS_PER_EXECUTION=1)
    for name, bad in (("BACKEND", "torch"), ("PROFILE", "big"), ("SIMULATE_DEVICES", -1), ("STEPS_PER_EXECUTION", 0)):
        with pytest.raises(ParameterError, match=f"Parameter {name}="):
            params.check_parameters(namespace(**{name: bad}), STEPS_PER_EXECUTION=1)


def test_unknown_parameter_names_the_closest_known_one():
    with pytest.raises(ParameterError) as error:
        params.check_parameters(kernel_namespace(EPOCH=3))
    assert str(error.value) == (
        "Unknown parameter EPOCH (did you mean EPOCHS?): this notebook's parameters are DATA_ROOT, EPOCHS, FLAG, "
        "NUM_CLASSES, RATE (`papermill --help-notebook` lists them)."
    )
    params.check_parameters(kernel_namespace(EPOCHS=3, NUM_CLASSES=5))  # an unannotated parameter is one too
    with pytest.raises(ParameterError, match="Unknown parameter SEEDS: "):
        params.check_parameters(kernel_namespace(SEEDS=1))


@pytest.mark.parametrize("url", ["gs://bucket/flowers", "gs://bucket"])
def test_a_gs_url_is_refused_in_the_first_cell_with_what_to_do(url):
    params.check_parameters(kernel_namespace(DATA_ROOT="/data/flowers"))  # a local folder goes on
    with pytest.raises(ParameterError) as error:
        params.check_parameters(kernel_namespace(DATA_ROOT=url))
    assert str(error.value).startswith(f"DATA_ROOT={url!r}: nbkit reads and writes local folders")
    assert "attach the data with 'Add Input'" in str(error.value) and "gsutil -m cp -r" in str(error.value)


@pytest.mark.parametrize(
    "name, value, words",
    [
        ("DATA_ROOT", ["a", "b"], "DATA_ROOT=['a', 'b'] is a list, not a str as declared (`DATA_ROOT: str`)"),
        ("DATA_ROOT", 123, 'With papermill: `-r DATA_ROOT auto`, or `DATA_ROOT: "auto"` in a -f parameters file.'),
        ("EPOCHS", 2.5, "EPOCHS=2.5 is a float, not an int as declared (`EPOCHS: int`): pass a whole number. "),
        ("EPOCHS", True, "EPOCHS=True is a bool, not an int"),
        ("RATE", "fast", "RATE='fast' is a str, not a float as declared (`RATE: float`): pass a number."),
        ("RATE", None, "RATE=None is None, not a float"),
        ("FLAG", 1, "FLAG=1 is an int, not a bool as declared (`FLAG: bool`): pass True or False. With papermill: "),
    ],
)
def test_a_parameter_of_the_wrong_type_says_how_to_pass_it(name, value, words):
    with pytest.raises(ParameterError) as error:
        params.check_parameters(kernel_namespace(**{name: value}))
    assert words in str(error.value)


def test_an_int_is_a_float_and_types_are_read_from_the_cells_not_annotations():
    injected = kernel_namespace(RATE=1, FLAG=True, DATA_ROOT="~/data", EPOCHS=3)
    annotated = {**injected, "__annotations__": {"RATE": str, "EPOCHS": str}}  # the cells say float and int
    assert params.check_parameters(annotated) is None  # accepted: RATE=1 is a float, the annotations are not read
    with pytest.raises(ParameterError, match="RATE='x' is a str, not a float"):
        params.check_parameters({**kernel_namespace(RATE="x"), "__annotations__": {"RATE": str}})


def test_a_plain_script_checks_the_types_of_its_annotations_and_without_them_warns():
    script = {"__annotations__": {"EPOCHS": int, "RATE": "float"}, "EPOCHS": 1, "RATE": 1, "NUM_CLASSES": 10}
    params.check_parameters(script)  # nothing injected a name in a script: NUM_CLASSES is the script's own
    with pytest.raises(ParameterError, match="RATE='x' is a str, not a float"):
        params.check_parameters({**script, "RATE": "x"})
    with pytest.warns(UserWarning, match="names and types are not checked"):
        params.check_parameters({"EPOCHS": 1})


# ---- the same through real papermill runs of a tiny notebook (a kernel, IPython's In, the injected cell) ----


@pytest.fixture(scope="module")
def tiny_notebook(tmp_path_factory):
    import nbformat

    folder = tmp_path_factory.mktemp("tiny")
    cells = [
        nbformat.v4.new_code_cell(PARAMETERS_CELL, metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell(CHECK_CELL + "print('checked', repr(DATA_ROOT), EPOCHS, RATE, FLAG, NUM_CLASSES)"),
    ]
    notebook = nbformat.v4.new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(notebook, folder / "tiny.ipynb")
    return folder / "tiny.ipynb"


def run_tiny(notebook, tmp_path, **parameters) -> str:
    """Run the tiny notebook with papermill from the repository root; the check cell's printed line."""
    from conftest import execute, text_outputs

    return text_outputs(execute(tmp_path, notebook, **parameters)).strip()


@pytest.mark.parametrize(
    "parameters, words",
    [
        ({"EPOCH": 3}, "Unknown parameter EPOCH (did you mean EPOCHS?): this notebook's parameters are DATA_ROOT"),
        ({"DATA_ROOT": ["a", "b"]}, "DATA_ROOT=['a', 'b'] is a list, not a str as declared (`DATA_ROOT: str`)"),
        ({"DATA_ROOT": 2024}, "DATA_ROOT=2024 is an int, not a str"),
        ({"EPOCHS": 2.5}, "EPOCHS=2.5 is a float, not an int as declared (`EPOCHS: int`)"),
        ({"RATE": "fast"}, "RATE='fast' is a str, not a float"),
        ({"FLAG": "yes"}, "FLAG='yes' is a str, not a bool"),
    ],
)
def test_papermill_runs_stop_on_a_wrong_parameter(tiny_notebook, tmp_path, parameters, words):
    import papermill

    with pytest.raises(papermill.PapermillExecutionError) as error:
        run_tiny(tiny_notebook, tmp_path, **parameters)
    assert error.value.ename == "ParameterError" and words in error.value.evalue


def test_papermill_passes_an_unannotated_parameter_and_an_int_for_a_float(tiny_notebook, tmp_path):
    printed = run_tiny(tiny_notebook, tmp_path, NUM_CLASSES=5, RATE=1, DATA_ROOT="x")
    assert printed == "checked 'x' 0 1 False 5"


def test_the_papermill_command_line_with_a_parameters_file_and_p(tiny_notebook, tmp_path):
    import subprocess

    from conftest import PAPERMILL, REPO

    (tmp_path / "params.yaml").write_text("DATA_ROOT: [a, b]\n")
    for options, words in (
        (["-f", str(tmp_path / "params.yaml")], "DATA_ROOT=['a', 'b'] is a list, not a str"),
        (["-p", "EPOCHS", "2.5"], "EPOCHS=2.5 is a float, not an int"),
    ):
        result = subprocess.run(
            [
                *PAPERMILL,
                str(tiny_notebook),
                str(tmp_path / "out.ipynb"),
                *options,
                "-k",
                "python3",
            ],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert result.returncode != 0 and "ParameterError" in result.stderr and words in result.stderr, result.stderr


def test_nbval_kernels_listen_on_socket_files():
    """As papermill's (conftest; test_launch checks the engine's): no TCP ports for parallel lanes to race for."""
    import nbval.kernel
    from conftest import NBVAL_KERNEL_SOCKETS

    kernel = nbval.kernel.RunningKernel("python3")
    try:
        assert kernel.is_alive() and kernel.km.transport == "ipc"
        assert kernel.km.ip.startswith(NBVAL_KERNEL_SOCKETS.name)
    finally:
        kernel.stop()


def test_a_profile_that_replaces_a_value_given_says_so():
    given = {"MODEL": "ResNet50", "WEIGHTS": "imagenet", "EPOCHS": 20, "SEED": 1}  # -p MODEL ResNet50 -p EPOCHS 20
    line = params.override(given, "smoke profile", MODEL="small_cnn", WEIGHTS="none", EPOCHS=min(given["EPOCHS"], 8))
    assert line == "smoke profile: MODEL='ResNet50' -> 'small_cnn', WEIGHTS='imagenet' -> 'none', EPOCHS=20 -> 8"
    assert given == {"MODEL": "small_cnn", "WEIGHTS": "none", "EPOCHS": 8, "SEED": 1}
    assert params.override(given, "smoke profile", MODEL="small_cnn", EPOCHS=2) == "smoke profile: EPOCHS=8 -> 2"
    assert params.override(given, "smoke profile", MODEL="small_cnn") == "smoke profile: MODEL as given"


@pytest.mark.parametrize("notebook", ["02_flowers_classifier.py", "05_train_on_tpu.py"])
def test_the_smoke_profile_of_02_and_05_says_what_it_replaces(notebook):
    source = (Path(__file__).parents[1] / "notebooks" / notebook).read_text()
    block = []  # the statements under `if SMOKE:`, their lines joined
    for line in source.split("if SMOKE:", 1)[1].split("\n")[1:]:
        if not line.startswith("    "):
            break
        block.append(line.strip())
    smoke = " ".join(block)
    assert smoke.startswith('print(params.override( globals(), "smoke profile') and 'MODEL="small_cnn"' in smoke
    assert 'MODEL, WEIGHTS, EPOCHS = "small_cnn"' not in source  # the silent form


def first_cell_checks(notebook: str, **injected: object) -> None:
    """A notebook's first-cell checks (its setup cell up to where it takes OUTPUT_DIR), run in-process on its
    parameters cell and a cell injecting `injected` as papermill writes it."""
    import jupytext

    cells = [c.source for c in jupytext.read(Path(__file__).parents[1] / "notebooks" / notebook).cells]
    parameters = next(c for c in cells if c.lstrip().startswith("DATA_ROOT"))
    setup = next(c for c in cells if "params.check_parameters(" in c)
    written = {
        n: f"float('{v}')" if v in (float("inf"), float("-inf")) or v != v else repr(v) for n, v in injected.items()
    }
    cell = "# Parameters\n" + "".join(f"{name} = {value}\n" for name, value in written.items())
    namespace: dict = {}
    exec(parameters + "\n" + cell, namespace)
    exec(setup.split("\noutputs = staging.start(")[0], {**namespace, "In": ["", parameters, cell, setup]})


@pytest.mark.parametrize(
    "notebook, name, value, words",
    [
        ("09_monet_cyclegan.py", "LEARNING_RATE", -1.0, "LEARNING_RATE=-1.0: a finite number above 0"),
        ("09_monet_cyclegan.py", "LEARNING_RATE", 0.0, "LEARNING_RATE=0.0: a finite number above 0"),
        ("09_monet_cyclegan.py", "LEARNING_RATE", float("nan"), "LEARNING_RATE=nan: a finite number above 0"),
        ("09_monet_cyclegan.py", "LAMBDA_CYCLE", 0, "LAMBDA_CYCLE=0: a finite number above 0"),
        ("09_monet_cyclegan.py", "LAMBDA_IDENTITY", -0.5, "LAMBDA_IDENTITY=-0.5: a finite number above 0 (LAMBDA_IDEN"),
        ("09_monet_cyclegan.py", "TIME_BUDGET", float("inf"), "TIME_BUDGET=inf: a finite number above 0"),
        ("09_monet_cyclegan.py", "IMAGE_SIZE", 40, "IMAGE_SIZE=40 is not allowed: use one of 32, 64, 128, 256, 512"),
        ("08_text_classifier.py", "LEARNING_RATE", float("nan"), "LEARNING_RATE=nan: a peak rate above 0"),
        ("08_text_classifier.py", "LEARNING_RATE", float("inf"), "LEARNING_RATE=inf: a peak rate above 0"),
    ],
)
def test_rates_and_weights_are_checked_in_the_first_cell(notebook, name, value, words):
    """Issue 50 #4: LEARNING_RATE=-1.0 trained 09, exploding, and published a "better" MiFID: 09's rates, weights and
    TIME_BUDGET are finite and above 0 (LAMBDA_IDENTITY may be 0: no identity loss); 08's LEARNING_RATE, which had
    `< 0` only, is finite too (NaN < 0 is false). #18: IMAGE_SIZE=40 failed in Keras at the model's build; the U-Net
    halves it to 2x2, so a power of two. Notebooks 02-07 have no rate or weight."""
    first_cell_checks(notebook, **{name: 64 if name == "IMAGE_SIZE" else 0.5})  # a good value goes on
    with pytest.raises(ParameterError, match=re.escape(words)):
        first_cell_checks(notebook, **{name: value})


def test_zero_stays_the_models_choice_in_08_and_no_identity_loss_in_09():
    first_cell_checks("08_text_classifier.py", LEARNING_RATE=0.0)
    first_cell_checks("09_monet_cyclegan.py", LAMBDA_IDENTITY=0.0, IMAGE_SIZE=64)
    for notebook in sorted((Path(__file__).parents[1] / "notebooks").glob("0[2-7]_*.py")):
        assert not re.search(r"^[A-Z_]*(RATE|LAMBDA|WEIGHT_DECAY)[A-Z_]*: float", notebook.read_text(), re.M), notebook
