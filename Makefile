# Every target builds its own virtual environment first, so each works on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv lab learner test test-browser denoise bench lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[lab,test]"
	touch $(STAMP)

venv: $(STAMP)

# Open the learner's lab notebooks in JupyterLab: exercises to fill in, each checked with
# feedback (the instructor's versions, with solutions, are labs/NN_*.ipynb). Root, as in
# a container, needs --allow-root.
lab: $(STAMP)
	$(VENV)/bin/jupyter lab labs/learner/ $(if $(filter 0,$(shell id -u)),--allow-root)

# After editing an instructor notebook: run it (fresh outputs), strip volatile metadata
# and regenerate the learner's version (the test suite checks they are up to date).
learner: $(STAMP)
	$(PY) -m haelixe.exercises.make_learner --execute

# The whole suite: unit tests, GPU kernels on whatever adapter exists, the labs (nbval:
# the instructor's notebooks compared, the learner's run without error).
test: $(STAMP)
	$(PY) -m ruff check haelixe tests benchmarks
	$(PY) -m pytest -q tests labs --nbval-lax --nbval-sanitize-with labs/sanitize.cfg -p no:cacheprovider

# The labs in headless Chromium at 1280x800, opened before and after running (screenshots
# of every widget in build/screenshots); part of `make test` too.
test-browser: $(STAMP)
	$(PY) -m pytest -q tests/test_lab_browser.py -p no:cacheprovider

# Train the denoiser headless (pass ARGS="--task seed --device gpu ..." to change it).
denoise: $(STAMP)
	$(PY) -m haelixe.denoise $(or $(ARGS),--task random --epochs 100 --steps-per-epoch 50)

bench: $(STAMP)
	$(PY) benchmarks/overhead.py
	$(PY) benchmarks/autograd_overhead.py
	$(PY) benchmarks/denoiser_vs_torch.py

lint: $(STAMP)
	$(PY) -m ruff check haelixe tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
