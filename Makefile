# Every target builds its own virtual environment first, so each works on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DOCS_STAMP := $(VENV)/.docs-installed

.PHONY: venv lab learner test test-portable test-browser denoise bench results results-gpu docs docs-venv lint clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[fast,gpu,lab,test]"
	touch $(STAMP)

venv: $(STAMP)

# JupyterLab on labs/: the learner's notebooks in labs/learner/ (exercises to fill in,
# each checked with feedback) beside the instructor's labs/NN_*.ipynb (the solutions).
# PORT=8890 picks the port, ARGS="--no-browser ..." passes options on. Root, as in a
# container, needs --allow-root; the news popup is off for a first open.
PORT ?= 8888
lab: $(STAMP)
	mkdir -p $(VENV)/share/jupyter/lab/settings
	cp labs/jupyterlab_overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	$(VENV)/bin/jupyter lab --ServerApp.root_dir=labs --port=$(PORT) \
		$(if $(filter 0,$(shell id -u)),--allow-root) $(ARGS)

# After editing an instructor notebook: run it (fresh outputs), strip volatile metadata
# and regenerate the learner's version (the test suite checks they are up to date).
learner: $(STAMP)
	$(PY) -m haelixe.exercises.make_learner --execute

# The whole suite: unit tests, GPU kernels on whatever adapter exists, the documentation
# site built strict (tests/test_docs_site.py), the labs (nbval: the instructor's
# notebooks compared, the learner's run without error).
# JOBS=N runs it on N workers, a file to a worker (a notebook's cells share a kernel), one
# BLAS thread: the cores are the workers'.
JOBS ?= 2
DISTRIBUTE = -n $(JOBS) --dist loadfile
test: $(DOCS_STAMP)
	$(PY) -m ruff check haelixe tests benchmarks
	OPENBLAS_NUM_THREADS=1 $(PY) -m pytest -q $(DISTRIBUTE) tests labs --nbval-lax \
	--nbval-sanitize-with labs/sanitize.cfg -p no:cacheprovider
	$(MAKE) test-portable

# Without the optional packages: numba and wgpu blocked (tests/blocked_imports, inherited
# by the notebook kernels), the whole CPU suite and the instructor's labs on numpy alone
# (the browser checks and the docs build, which need neither, are left to `make test`).
PORTABLE_SKIP := --ignore=tests/test_lab_browser.py --ignore=tests/test_lab_root_browser.py \
	--ignore=tests/test_lab_exercises_browser.py --ignore=tests/test_docs_site.py
test-portable: $(STAMP)
	PYTHONPATH=$(CURDIR)/tests/blocked_imports HAELIXE_BLOCK_IMPORTS=numba,wgpu \
	OPENBLAS_NUM_THREADS=1 $(PY) -m pytest -q $(DISTRIBUTE) tests $(PORTABLE_SKIP) \
	labs/0*.ipynb -m "not gpu" --nbval-lax --nbval-sanitize-with labs/sanitize.cfg \
	-p no:cacheprovider

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

# Run the benchmarks and write benchmarks/RESULTS.md and the README's headline table
# (ARGS="--quick" for fewer rounds, "--gpu" to add the GPU figures). The comparison
# figures need PyTorch in the venv (.venv/bin/pip install torch); without it they are left out.
results: $(STAMP)
	$(PY) benchmarks/results.py $(ARGS)

# The GPU benchmarks alone (a machine with a real GPU and PyTorch's CUDA build): write
# benchmarks/RESULTS_GPU.md and the README's GPU headline table
results-gpu: $(STAMP)
	$(PY) benchmarks/results.py --gpu-only $(ARGS)

# The documentation site (mkdocs, strict: a warning or a broken link fails) into site/.
$(DOCS_STAMP): $(STAMP)
	$(PY) -m pip install -q -e ".[fast,gpu,lab,test,docs]"
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(VENV)/bin/mkdocs build --strict --quiet

lint: $(STAMP)
	$(PY) -m ruff check haelixe tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache site
