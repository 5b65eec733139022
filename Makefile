# The README's two commands: `make demo` and `make test`. Everything is installed by uv, pinned by the
# lock files in envs/ (`make lock` regenerates them), into project-local virtual environments.
PYTHON ?= python3
UV_VERSION := 0.13.9
UV := .venv-uv/bin/uv
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg
# Notebook 04 (PyTorch/XLA) has its own environment: torch_xla needs exactly its torch, whose Linux
# wheel is the 4 GB CUDA build, and the main environment stays lean without it.
XLA_VENV := .venv-xla
XLA_BIN := $(XLA_VENV)/bin
XLA_STAMP := $(XLA_VENV)/.installed
XLA_NOTEBOOK := notebooks/04_pytorch_xla
# The version matrix `make test` runs besides the current versions: Kaggle's TPU image, the oldest
# versions nbkit declares, and Colab's runtime (Kaggle's GPU image); see envs/*.in.
MATRIX := kaggle-tpu floor colab-gpu
MATRIX_STAMPS := $(MATRIX:%=.venv-%/.installed)
# The Python of each environment (a machine without it uses $(PYTHON), and says so).
PYTHON_main := 3.11
PYTHON_xla := 3.11
PYTHON_kaggle-tpu := 3.12
PYTHON_floor := 3.11
PYTHON_colab-gpu := 3.12
LOCK_FLAGS := --python-platform x86_64-manylinux_2_28 --override envs/overrides.txt
# Kaggle's TPU image has tensorflow-cpu; tensorflow-text asks for tensorflow, the same code built for GPUs too.
LOCK_FLAGS_kaggle-tpu := --no-emit-package tensorflow

# Python writes the bytecode of what a process imports, once, for every later kernel and subprocess: where
# PYTHONDONTWRITEBYTECODE is set (as on our 2-core machines) each would compile TensorFlow's sources again on
# import (accel.setup 12.8 s against 5.2 s). Compiling every installed file instead (uv's --compile-bytecode)
# took 83 s of the 85 s it takes to install Kaggle's TPU image, for files no notebook imports.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: venv venv-xla demo test notebooks bench clean bundle push run bundle-sizes lock matrix

$(UV):
	$(PYTHON) -m venv .venv-uv
	.venv-uv/bin/python -m pip install -q --disable-pip-version-check uv==$(UV_VERSION)

# $(call make_venv,FOLDER,LOCK,PYTHON VERSION): a fresh venv with exactly what LOCK pins, plus nbkit;
# with this machine's Python of that version (tools/find_python.py), else $(PYTHON), and it says which.
define make_venv
	rm -rf $(1)
	interpreter=$$($(PYTHON) tools/find_python.py $(3)) || { interpreter=$(PYTHON); echo "$(1): no Python $(3) here, using $(PYTHON)"; }; \
		UV_PYTHON_DOWNLOADS=never $(UV) venv -q --python $$interpreter $(1)
	$(UV) pip install -q --no-deps --python $(1)/bin/python -r $(2)  # a lock names every package: nothing to resolve
	$(UV) pip install -q --python $(1)/bin/python --no-deps -e .
	@echo "$(1): $$($(1)/bin/python --version), $(2)"
	touch $(1)/.installed
endef

$(STAMP): envs/main.lock pyproject.toml | $(UV)
	$(call make_venv,$(VENV),envs/main.lock,$(PYTHON_main))

.venv-%/.installed: envs/%.lock pyproject.toml | $(UV)
	$(call make_venv,.venv-$*,envs/$*.lock,$(PYTHON_$*))

venv: $(STAMP)

venv-xla: $(XLA_STAMP)

# The lock files, from requirements.txt, requirements-xla.txt and envs/*.in (for Linux x86_64).
lock: | $(UV)
	$(UV) pip compile -q requirements.txt --python-version $(PYTHON_main) $(LOCK_FLAGS) -o envs/main.lock
	$(UV) pip compile -q requirements-xla.txt --python-version $(PYTHON_xla) $(LOCK_FLAGS) -o envs/xla.lock
	$(foreach env,$(MATRIX),$(UV) pip compile -q envs/$(env).in --python-version $(PYTHON_$(env)) $(LOCK_FLAGS) $(LOCK_FLAGS_$(env)) -o envs/$(env).lock;)

# The main job: the flowers notebook on a generated sample in the competition format, into out/, with
# papermill through nbkit's engine (its kernel on socket files, as in the tests and `launch`: no TCP ports).
demo: $(STAMP)
	mkdir -p out
	$(BIN)/python -m nbkit.publish.engine notebooks/02_flowers_classifier.ipynb out/02_flowers_classifier.ipynb --cwd . --progress-bar
	@echo "Executed notebook: out/02_flowers_classifier.ipynb"
	@echo "Plots, model.keras, metrics.json and submission.csv: out/classifier/"
	@ls out/classifier

# Lint and format check (ruff); then, environment by environment, each reported by name (tools/matrix.py),
# TEST_JOBS at a time: the current versions (the unit tests and the notebook tests; beside them every committed
# .ipynb executed and compared by nbval, with a fresh working folder), notebook 04 and nbkit.pytorch in .venv-xla
# through torch_xla on the CPU, and the notebooks' smoke runs in each environment of MATRIX (Kaggle's TPU
# image also runs the full profile in bfloat16).
TEST_JOBS ?= 2
test: $(STAMP) $(XLA_STAMP) $(MATRIX_STAMPS)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python tools/matrix.py --jobs $(TEST_JOBS) current current-nbval xla $(MATRIX)

# One environment of the matrix, e.g. `make matrix ENVS=floor`.
matrix: $(STAMP) $(ENVS:%=.venv-%/.installed)
	$(BIN)/python tools/matrix.py --jobs $(TEST_JOBS) $(ENVS)

# Re-sync each .ipynb from its .py source and re-execute it (smoke profile) so nbval has outputs.
notebooks: $(STAMP) $(XLA_STAMP)
	rm -rf out/classifier out/train-on-tpu out/classifier-torch out/text-classifier out/monet-cyclegan out/llm-finetune out/grpo-reasoning out/rl-sample out/answers out/answers-sample out/answers-tiny-model out/*-tfrecords out/.published-run.json out/.previous-run  # stored outputs show a fresh run, not a resumed one (06 publishes into out/)
	$(BIN)/python tools/sync_notebooks.py $(filter-out $(XLA_NOTEBOOK).py,$(wildcard notebooks/[0-9]*.py))
	PJRT_DEVICE=CPU $(XLA_BIN)/python tools/sync_notebooks.py $(XLA_NOTEBOOK).py

clean:
	rm -rf .venv-uv $(VENV) $(XLA_VENV) $(MATRIX:%=.venv-%) out build

# Benchmarks (bench/README.md): input pipeline images/s, training steps/s, start-up and notebook
# smoke-run wall times, the converter's images/s. Prints tables; writes them and a plot under out/bench/.
# Tests never time anything.
bench: $(STAMP) $(XLA_STAMP)
	$(BIN)/python bench/input_pipeline.py
	$(BIN)/python bench/training_steps.py
	$(BIN)/python bench/bench_setup.py
	$(BIN)/python bench/competition_scale.py
	$(BIN)/python bench/convert.py
	@echo "Tables and plot: out/bench/"

# A notebook as a self-contained Kaggle kernel in build/kernels/<slug>/ (no login needed: import it with
# File -> Import Notebook), pushed with the kaggle CLI, or run on Kaggle from here: bundle -> push ->
# follow -> outputs in out/kaggle/<slug>/ (push and run need a Kaggle login: kaggle.json or
# KAGGLE_USERNAME/KAGGLE_KEY). Override NOTEBOOK, BUNDLE_ARGS and RUN_ARGS.
NOTEBOOK ?= notebooks/02_flowers_classifier.py
BUNDLE_ARGS ?= --accelerator tpu-v5e-8 --competition flower-classification-with-tpus
RUN_ARGS ?= $(BUNDLE_ARGS) $(if $(findstring 02_flowers,$(NOTEBOOK)),--expect submission.csv --expect metrics.json)
KERNEL ?= build/kernels/$(subst _,-,$(basename $(notdir $(NOTEBOOK))))

bundle: $(STAMP)
	$(BIN)/python -m nbkit bundle $(NOTEBOOK) $(BUNDLE_ARGS)

push: $(STAMP)
	$(BIN)/python -m nbkit push $(KERNEL)

run: $(STAMP)
	$(BIN)/python -m nbkit run $(NOTEBOOK) $(RUN_ARGS)

# How many lines of nbkit each notebook's kernel bundle carries (the table in docs/architecture.md).
bundle-sizes: $(STAMP)
	$(BIN)/python tools/bundle_sizes.py
