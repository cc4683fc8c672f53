"""The lab exercises: every reference solution in the instructor's notebooks passes its
checker, every learner stub is reported "not done yet", typical wrong answers fail with
the feedback that explains them, no answer of the wrong type or shape crashes a checker,
and the notebooks on disk are what the generator makes (learner versions up to date,
nothing volatile saved).

The typical wrong answers live in ``test_lab_exercises_wrong.py``; this file runs the
notebooks' own cells.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import nbformat
import pytest

from haelixe.exercises import FAILED, LABS, NOT_DONE, PASSED
from haelixe.exercises.make_learner import LEARNER_DIR, instructor_notebooks, main, stale_files
from haelixe.exercises.notebooks import (
    KERNELSPEC,
    VOLATILE_CELL_METADATA,
    VOLATILE_NOTEBOOK_METADATA,
    NotebookError,
    dumps,
    exercise_blocks,
    learner_version,
    read,
    stub_solutions,
)
from haelixe.exercises.progress import ProgressSummary, progress_html, progress_text

ROOT = Path(__file__).resolve().parents[1]
LABS_DIR = ROOT / "labs"
NOTEBOOKS = instructor_notebooks(LABS_DIR)
ALL_NOTEBOOKS = NOTEBOOKS + sorted((LABS_DIR / LEARNER_DIR).glob("*.ipynb"))


def _lab_number(path: Path) -> int:
    return int(path.name[:2])


def _module(path: Path):
    return importlib.import_module(f"haelixe.exercises.lab{_lab_number(path):02d}")


def _needs_gpu(path: Path, request) -> None:
    if "_gpu" in path.name:
        request.getfixturevalue("be")  # skips, with the reason, where there is no adapter


def _run_exercise_cells(path: Path) -> dict:
    """Run the notebook's first code cell (its imports) and then every exercise's cells in
    order, in one namespace, as the notebook would; return {exercise number: result}."""
    nb = read(path)
    module = _module(path)
    module.LAB.reset()
    ns = {"__name__": "__lab__"}
    first = next(c for c in nb.cells if c.cell_type == "code")
    exec(compile(first.source, f"{path.name}:imports", "exec"), ns)
    results = {}
    for number, _, cells in exercise_blocks(nb):
        for i in cells:
            if nb.cells[i].cell_type == "code":
                exec(compile(nb.cells[i].source, f"{path.name}:cell {i}", "exec"), ns)
        results[number] = module.LAB.exercises[number].last
    module.LAB.reset()  # a passed answer keeps its cell's namespace (GPU tensors) alive
    return results


# -- the notebooks' own exercise cells ---------------------------------------------------

@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_reference_solution_passes(path, request):
    _needs_gpu(path, request)
    results = _run_exercise_cells(path)
    lab = _module(path).LAB
    assert sorted(results) == sorted(lab.exercises), "notebook and lab module disagree"
    bad = {n: r.text() for n, r in results.items() if r is None or r.status != PASSED}
    assert not bad, "\n\n".join(bad.values())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_learner_stub_is_not_done_yet(path, request):
    _needs_gpu(path, request)
    results = _run_exercise_cells(LABS_DIR / LEARNER_DIR / path.name)
    for r in results.values():
        assert r.status == NOT_DONE, r.text()
        assert "not done yet" in r.text() and "section" in r.text()
        assert not r.checker_error


def test_at_least_fifteen_exercises_two_to_four_per_lab():
    counts = {}
    for path in NOTEBOOKS:
        counts[_lab_number(path)] = len(_module(path).LAB.exercises)
    assert all(2 <= n <= 4 for n in counts.values()), counts
    assert sum(counts[k] for k in range(1, 7)) >= 15, counts


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_exercises_match_their_notebook_headings_and_anchors(path):
    nb = read(path)
    lab = _module(path).LAB
    blocks = exercise_blocks(nb)
    assert [b[0] for b in blocks] == list(lab.exercises)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for number, section, _ in blocks:
        ex = lab.exercises[number]
        assert ex.section == section, (number, ex.section, section)
        assert f'<a id="{ex.anchor}"></a>' in markdown, ex.anchor
    # the progress summary closes the lab
    assert "LAB.progress()" in nb.cells[-1].source


# -- what a checker says ---------------------------------------------------------------------

def _every_exercise():
    return [pytest.param(ex, id=ex.number) for path in NOTEBOOKS
            for ex in _module(path).LAB.exercises.values()]


class _Stub:
    """What an untouched exercise cell defines: any call raises NotImplementedError,
    as a function or as a Function's apply."""

    def __call__(self, *args, **kwargs):
        raise NotImplementedError("exercise stub")

    def apply(self, *args, **kwargs):
        raise NotImplementedError("exercise stub")


class _Raises:
    def __call__(self, *args, **kwargs):
        raise ValueError("a bug in the answer")

    apply = __call__


ODD_ANSWERS = [None, "strides", 42, 3.5, [1, 2], (lambda *a, **k: None),
               (lambda *a, **k: "text"), (lambda *a, **k: [[1, 2], [3]]),
               (lambda *a, **k: (1,)), (lambda *a, **k: float("nan")), _Raises()]


@pytest.mark.parametrize("ex", _every_exercise())
def test_a_stub_is_reported_not_done(ex):
    r = ex.check(_Stub())
    assert r.status == NOT_DONE and not r.checker_error, r.text()
    assert ex.use(_Stub()) is not None


@pytest.mark.parametrize("ex", _every_exercise())
@pytest.mark.parametrize("answer", ODD_ANSWERS, ids=lambda a: type(a).__name__)
def test_odd_answers_never_crash_a_checker(ex, answer):
    r = ex.check(answer)
    assert r.status == FAILED, r.text()
    assert not r.checker_error, r.text()
    text, html = r.text(), r.html()
    assert ex.label in text and 'class="hx-exercise"' in html and 'data-status="failed"' in html


def test_an_error_in_the_answer_names_it_and_the_line():
    from haelixe.exercises import lab01

    def permute_strides(strides, dims):
        return strides[len(strides)]  # off the end

    r = lab01.permute.check(permute_strides)
    assert r.status == FAILED
    assert "raised IndexError" in r.message
    assert "return strides[len(strides)]" in (r.detail or "")


def test_use_falls_back_to_the_engine_until_the_answer_passes():
    from haelixe.exercises import lab05

    def causal_mask(T):
        raise NotImplementedError

    lab05.causal.check(causal_mask)
    assert lab05.causal.use(causal_mask) is lab05.engine_causal_mask

    def causal_mask(T):  # noqa: F811 (the learner's second attempt)
        import haelixe as hx
        return hx.arange(T).reshape(T, 1) >= hx.arange(T)

    assert lab05.causal.check(causal_mask).passed
    assert lab05.causal.use(causal_mask) is causal_mask


def test_progress_summary_counts_and_links_the_open_exercises():
    from haelixe.exercises import lab01

    lab01.LAB.reset()
    lab01.permute.check(lambda strides, dims: tuple(strides[d] for d in dims))
    lab01.expand.check(lambda *a: None)
    text, html = progress_text(lab01.LAB), progress_html(lab01.LAB)
    assert "1 of 4 exercises done" in text and "1 of 4 exercises done" in html
    assert 'href="#ex-1-1"' not in html                     # done: no link
    for anchor in ("ex-1-2", "ex-1-3", "ex-1-4"):
        assert f'href="#{anchor}"' in html
    assert "not right yet" in html and "not checked yet" in html
    bundle = ProgressSummary(lab01.LAB)._repr_mimebundle_()
    assert set(bundle) == {"text/plain", "text/html"}
    # outside a kernel, progress() returns the summary (its repr is the text)
    assert "1 of 4" in repr(lab01.LAB.progress())
    lab01.LAB.reset()


def test_failed_layout_answers_draw_both_layouts():
    from haelixe.exercises import lab01

    r = lab01.permute.check(lambda strides, dims: strides)
    assert len(r.pictures) == 2 and all('class="hx-layout"' in p for _, p in r.pictures)
    assert r.html().count("<svg") == 2 and "max-width:100%" in r.html()


# -- the notebooks as files -------------------------------------------------------------------

def test_learner_notebooks_are_up_to_date():
    stale = stale_files(LABS_DIR)
    assert not stale, (f"{[str(p) for p in stale]} are not what the generator makes; run "
                       f"python -m haelixe.exercises.make_learner")


@pytest.mark.parametrize("path", ALL_NOTEBOOKS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_notebook_resaves_unchanged_without_volatile_metadata(path):
    text = path.read_text(encoding="utf-8")
    nb = nbformat.reads(text, as_version=4)
    assert dumps(nb) == text, "saving through nbformat (as Jupyter does) changes the file"
    assert not set(VOLATILE_NOTEBOOK_METADATA) & set(nb.metadata)
    assert nb.metadata.kernelspec == KERNELSPEC  # what JupyterLab writes when it opens
    for cell in nb.cells:
        assert not set(VOLATILE_CELL_METADATA) & set(cell.metadata), cell.metadata


def test_learner_versions_hold_no_solution_outputs_or_nbval_markers():
    for path in NOTEBOOKS:
        learner = read(LABS_DIR / LEARNER_DIR / path.name)
        for cell in learner.cells:
            assert "### BEGIN SOLUTION" not in cell.source
            assert "NBVAL_" not in cell.source
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None


def test_stub_solutions_keeps_the_indentation_and_names_the_section():
    src = ("def f(x):\n    ### BEGIN SOLUTION\n    return x\n    ### END SOLUTION\n\n"
           "check(f)")
    out = stub_solutions(src, "1.2", "3. Steps, flips and zero strides")
    assert out.splitlines()[1:4] == [
        "    # YOUR CODE HERE (exercise 1.2)",
        '    # section 3, "Steps, flips and zero strides", explains it',
        '    raise NotImplementedError("exercise 1.2: write your code in place of this line")']
    assert "return x" not in out and out.endswith("check(f)")
    for broken in ("### BEGIN SOLUTION\nx", "x\n### END SOLUTION",
                   "### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION"):
        with pytest.raises(NotebookError):
            stub_solutions(broken)


def test_stub_lines_fit_the_notebook_column_at_1280_px():
    from haelixe.exercises.notebooks import STUB_WIDTH

    for path in NOTEBOOKS:
        learner = read(LABS_DIR / LEARNER_DIR / path.name)
        stubs = [line for cell in learner.cells if cell.cell_type == "code"
                 for line in cell.source.splitlines()
                 if "YOUR CODE HERE" in line or "explains it" in line
                 or "NotImplementedError(" in line]
        assert stubs, path.name
        assert max(len(line) for line in stubs) <= STUB_WIDTH, path.name


def test_a_solution_outside_an_exercise_is_refused():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("### BEGIN SOLUTION\nx = 1\n### END SOLUTION")])
    with pytest.raises(NotebookError, match="outside an exercise"):
        learner_version(nb, "00_x.ipynb")


def test_make_learner_check_reports_a_stale_copy(tmp_path, capsys):
    labs = tmp_path / "labs"
    (labs / LEARNER_DIR).mkdir(parents=True)
    src = NOTEBOOKS[0]
    (labs / src.name).write_text(src.read_text(encoding="utf-8"), encoding="utf-8")
    assert main(["--labs", str(labs), "--check"]) == 1          # no learner version yet
    assert "not up to date" in capsys.readouterr().err
    assert main(["--labs", str(labs)]) == 0                     # writes it
    assert main(["--labs", str(labs), "--check"]) == 0
    nb = read(labs / src.name)
    nb.cells[0].metadata["execution"] = {"iopub.status.busy": "2026-01-01T00:00:00Z"}
    (labs / src.name).write_text(dumps(nb), encoding="utf-8")
    assert main(["--labs", str(labs), "--check"]) == 1          # volatile metadata back
    main(["--labs", str(labs)])
    assert "execution" not in read(labs / src.name).cells[0].metadata


def test_every_lab_module_is_registered():
    for path in NOTEBOOKS:
        assert LABS[_lab_number(path)] is _module(path).LAB
