"""An exercise as a learner meets it, in JupyterLab in headless Chromium: the learner's lab
01 opens unmodified and runs top to bottom with exercise 1.1 "not done yet"; a wrong
answer typed into the cell brings feedback with the two layouts drawn; the right answer
turns it to "passed" and the progress summary at the end of the notebook follows.

The notebook is a copy in a scratch folder, so nothing the browser saves reaches the
repository. Where Chromium is absent the test is skipped with the reason.
"""

from __future__ import annotations

import shutil

import jupyterlab_session as jl
import pytest

SHOTS = jl.ROOT / "build" / "screenshots"
LAB = "01_tensors_and_strides.ipynb"

pytestmark = pytest.mark.skipif(jl.CHROMIUM is None, reason=jl.SKIP_REASON)

WRONG = '''def permute_strides(strides, dims):
    return strides            # the old order

lab01.permute.check(permute_strides)'''

RIGHT = '''def permute_strides(strides, dims):
    return tuple(strides[d] for d in dims)

lab01.permute.check(permute_strides)'''

FEEDBACK = '.hx-exercise[data-exercise="1.1"]'


def _fill_and_run(page, source: str) -> None:
    """Put ``source`` in exercise 1.1's cell and run that cell alone, as a learner would
    after typing."""
    page.evaluate("""(source) => {
        const nb = window.jupyterapp.shell.currentWidget.content;
        const i = nb.widgets.findIndex(
            c => c.model.sharedModel.getSource().includes('def permute_strides'));
        nb.widgets[i].model.sharedModel.setSource(source);
        nb.activeCellIndex = i;
        nb.deselectAll();
        return window.jupyterapp.commands.execute('notebook:run-cell');
    }""", source)


def _status(page) -> str:
    return page.get_attribute(FEEDBACK, "data-status")


def test_feedback_changes_from_not_done_to_wrong_to_passed(tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    shutil.copy(jl.ROOT / "labs" / "learner" / LAB, notebooks / LAB)
    SHOTS.mkdir(parents=True, exist_ok=True)
    with jl.running_jupyterlab(notebooks, tmp_path) as (base, token), \
            playwright.sync_playwright() as p:
        browser = jl.launch_chromium(p)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 800})
            jl.open_notebook(page, base, token, LAB)
            # opened and its kernel started, the notebook is not modified (nothing to save)
            assert not page.evaluate(
                "window.jupyterapp.shell.currentWidget.context.model.dirty")
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            # the whole learner notebook runs: the last cell draws the progress summary
            page.wait_for_selector('.hx-progress[data-done="0"]', timeout=120_000)
            assert _status(page) == "not done"
            assert "not done yet" in page.text_content(FEEDBACK)

            _fill_and_run(page, WRONG)
            page.wait_for_selector(f'{FEEDBACK}[data-status="failed"]', timeout=60_000)
            text = page.text_content(FEEDBACK)
            assert "expected" in text and "(1, 12, 4)" in text and "(12, 4, 1)" in text
            # hints in steps: the first miss a nudge, the next the specific hint
            assert "more specific hint" in text
            assert "the stride of a dimension moves with it" not in text
            _fill_and_run(page, WRONG)
            page.wait_for_function(
                f"() => document.querySelector('{FEEDBACK}').textContent"
                f".includes('moves with it')", timeout=60_000)
            text = page.text_content(FEEDBACK)
            assert "the stride of a dimension moves with it" in text
            assert 'LAB.solution("1.1")' in text
            layouts = page.query_selector_all(f"{FEEDBACK} svg.hx-layout")
            assert len(layouts) == 2, "the wrong layout is drawn beside the right one"
            box = page.query_selector(FEEDBACK).bounding_box()
            widths = [svg.bounding_box()["width"] for svg in layouts]
            assert max(widths) <= box["width"], (widths, box)   # pictures fit the output
            page.query_selector(FEEDBACK).scroll_into_view_if_needed()
            page.screenshot(path=str(SHOTS / "lab01_exercise_wrong.png"))

            _fill_and_run(page, RIGHT)
            page.wait_for_selector(f'{FEEDBACK}[data-status="passed"]', timeout=60_000)
            assert "passed" in page.text_content(FEEDBACK)
            assert not page.query_selector_all(f"{FEEDBACK} svg")
            page.screenshot(path=str(SHOTS / "lab01_exercise_passed.png"))
            # the summary at the end redraws in place: one exercise done now
            page.wait_for_selector('.hx-progress[data-done="1"]', timeout=30_000)
            assert page.query_selector('.hx-progress li[data-exercise="1.1"]'
                                       '[data-status="passed"]')

            errors = page.query_selector_all(".jp-OutputArea-output[data-mime-type="
                                             "'application/vnd.jupyter.stderr']")
            assert not errors, [e.text_content()[:300] for e in errors]
        finally:
            browser.close()
