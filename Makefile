# The README's two commands: `make demo` and `make test`. Both build .venv first.
PYTHON ?= python3
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
XLA_TESTS := tests/xla tests/test_import.py $(XLA_NOTEBOOK).ipynb

.PHONY: venv venv-xla demo test notebooks bench clean bundle push run bundle-sizes

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

$(XLA_STAMP): requirements-xla.txt pyproject.toml
	$(PYTHON) -m venv $(XLA_VENV)
	$(XLA_BIN)/python -m pip install -q --upgrade pip
	$(XLA_BIN)/python -m pip install -q -r requirements-xla.txt
	$(XLA_BIN)/python -m pip install -q --no-deps -e .
	touch $(XLA_STAMP)

venv-xla: $(XLA_STAMP)

# The main job: the flowers notebook on a generated sample in the competition format, into out/.
demo: $(STAMP)
	mkdir -p out
	$(BIN)/papermill notebooks/02_flowers_classifier.ipynb out/02_flowers_classifier.ipynb --cwd . --progress-bar
	@echo "Executed notebook: out/02_flowers_classifier.ipynb"
	@echo "Plots, model.keras, metrics.json and submission.csv: out/flowers/"
	@ls out/flowers

# Lint and format check (ruff), unit tests, notebook tests, and every committed .ipynb executed and
# compared by nbval. nbval runs the notebooks with a fresh working folder, so what earlier runs left
# in out/ (a finished checkpoint, an old model package) cannot change their outputs; 06 predicts with
# the package 05 wrote just before it (pytest runs them in name order). Then notebook 04 and
# nbkit.pytorch in .venv-xla, through torch_xla on the CPU (PJRT_DEVICE=CPU: one XLA device).
test: $(STAMP) $(XLA_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	NBKIT_WORKING_DIR=$$(mktemp -d) $(BIN)/python -m pytest tests notebooks $(NBVAL) --ignore=tests/xla --ignore=$(XLA_NOTEBOOK).ipynb
	NBKIT_WORKING_DIR=$$(mktemp -d) PJRT_DEVICE=CPU $(XLA_BIN)/python -m pytest $(XLA_TESTS) $(NBVAL)

# Re-sync each .ipynb from its .py source and re-execute it (smoke profile) so nbval has outputs.
notebooks: $(STAMP) $(XLA_STAMP)
	rm -rf out/flowers out/flowers-train out/flowers-torch  # stored outputs show a fresh run, not a resumed one
	$(BIN)/python tools/sync_notebooks.py $(filter-out $(XLA_NOTEBOOK).py,$(wildcard notebooks/[0-9]*.py))
	PJRT_DEVICE=CPU $(XLA_BIN)/python tools/sync_notebooks.py $(XLA_NOTEBOOK).py

clean:
	rm -rf $(VENV) $(XLA_VENV) out build

# Benchmarks (bench/README.md): input pipeline images/s, training steps/s, start-up and notebook
# smoke-run wall times. Prints tables; writes them and a plot under out/bench/. Tests never time anything.
bench: $(STAMP) $(XLA_STAMP)
	$(BIN)/python bench/input_pipeline.py
	$(BIN)/python bench/training_steps.py
	$(BIN)/python bench/bench_setup.py
	$(BIN)/python bench/competition_scale.py
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

# How many lines of nbkit each notebook's kernel bundle carries (the README's table).
bundle-sizes: $(STAMP)
	$(BIN)/python tools/bundle_sizes.py
