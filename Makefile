# Every target builds its own virtual environment first, so each works on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: venv lab test test-browser labs-execute denoise bench lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[lab,test]"
	touch $(STAMP)

venv: $(STAMP)

# Open the lab notebooks in JupyterLab (root, as in a container, needs --allow-root).
lab: $(STAMP)
	$(VENV)/bin/jupyter lab labs/ $(if $(filter 0,$(shell id -u)),--allow-root)

# The whole suite: unit tests, GPU kernels on whatever adapter exists, the labs (nbval).
test: $(STAMP)
	$(PY) -m ruff check haelixe tests benchmarks
	$(PY) -m pytest -q tests labs --nbval-lax --nbval-sanitize-with labs/sanitize.cfg -p no:cacheprovider

# The labs in headless Chromium at 1280x800 (screenshots of every widget in build/screenshots).
test-browser: $(STAMP)
	$(PY) -m pytest -q tests/test_lab_browser.py -p no:cacheprovider

# Run every lab and save it with its outputs (static widget pictures included) and without
# volatile metadata, so it shows its pictures before it runs. Pass NB=labs/NN_x.ipynb for one.
labs-execute: $(STAMP)
	PYTHONPATH=$(CURDIR) $(PY) labs/execute.py $(NB)

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
