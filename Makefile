# The README's two commands: `make demo` and `make test`. Both build .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NBVAL := --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg

.PHONY: venv demo test notebooks bench clean bundle push

$(STAMP): requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -r requirements.txt
	$(BIN)/python -m pip install -q --no-deps -e .
	touch $(STAMP)

venv: $(STAMP)

# The main job: the flowers notebook on a generated sample in the competition format, into out/.
demo: $(STAMP)
	mkdir -p out
	$(BIN)/papermill notebooks/02_flowers_classifier.ipynb out/02_flowers_classifier.ipynb --cwd . --progress-bar
	@echo "Executed notebook: out/02_flowers_classifier.ipynb"
	@echo "Plots, model.keras, metrics.json and submission.csv: out/flowers/"
	@ls out/flowers

# Unit tests, notebook tests, and every committed .ipynb executed and compared by nbval.
# nbval runs the notebooks with a fresh working folder, so what earlier runs left in out/ (a finished
# checkpoint, an old model package) cannot change their outputs; 06 predicts with the package 05
# wrote just before it (pytest runs them in name order).
test: $(STAMP)
	NBKIT_WORKING_DIR=$$(mktemp -d) $(BIN)/python -m pytest tests notebooks $(NBVAL)

# Re-sync each .ipynb from its .py source and re-execute it (smoke profile) so nbval has outputs.
notebooks: $(STAMP)
	$(BIN)/python tools/sync_notebooks.py notebooks/[0-9]*.py

clean:
	rm -rf $(VENV) out build

# Start-up and notebook wall times (prints a table; timings are never asserted in tests).
bench: $(STAMP)
	$(BIN)/python bench/bench_setup.py

# A notebook as a self-contained Kaggle kernel in build/kernels/<slug>/, then pushed with the kaggle CLI
# (needs a Kaggle login: kaggle.json or KAGGLE_USERNAME/KAGGLE_KEY). Override NOTEBOOK and BUNDLE_ARGS.
NOTEBOOK ?= notebooks/02_flowers_classifier.py
BUNDLE_ARGS ?= --accelerator tpu-v5e-8 --competition flower-classification-with-tpus
KERNEL ?= build/kernels/$(subst _,-,$(basename $(notdir $(NOTEBOOK))))

bundle: $(STAMP)
	$(BIN)/python -m nbkit bundle $(NOTEBOOK) $(BUNDLE_ARGS)

push: $(STAMP)
	$(BIN)/python -m nbkit push $(KERNEL)
