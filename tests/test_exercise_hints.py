"""Hints come in steps and the solution only when asked for; the learner's notebooks say
where the solutions are."""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

from haelixe.exercises import FAILED, LABS, lab01, lab05, lab07

ROOT = Path(__file__).resolve().parent.parent
for _module in sorted((ROOT / "haelixe" / "exercises").glob("lab[0-9][0-9].py")):
    importlib.import_module(f"haelixe.exercises.{_module.stem}")  # every lab in LABS
SOLUTION_LINE = "return tuple(strides[d] for d in dims)"


def _unchanged(strides, dims):  # the strides before the permute: a typical first miss
    return tuple(strides)


def test_the_first_miss_gets_a_nudge_and_a_later_miss_the_specific_hint():
    lab01.LAB.reset()
    first = lab01.permute.check(_unchanged)
    assert first.status == FAILED
    assert "section 2" in first.hint and "strides[dims[i]]" not in first.hint
    second = lab01.permute.check(_unchanged)
    assert "strides[dims[i]]" in second.hint
    assert 'lab01.LAB.solution("1.1")' in second.hint


def test_no_check_shows_the_solution_but_asking_does():
    lab01.LAB.reset()
    shown = [lab01.permute.check(_unchanged).text() for _ in range(3)]
    assert all(SOLUTION_LINE not in text for text in shown)
    solution = lab01.LAB.solution("1.1")
    assert SOLUTION_LINE in solution.code
    assert "### BEGIN SOLUTION" not in solution.code and "NBVAL" not in solution.code
    assert "```python" in solution._repr_markdown_()


def test_every_exercise_has_a_solution_to_ask_for():
    for lab in LABS.values():
        for number in lab.exercises:
            assert lab.solution(number).code.strip(), number


def test_asking_for_an_exercise_that_does_not_exist_names_the_ones_that_do():
    try:
        lab05.LAB.solution("9.9")
    except KeyError as err:
        assert "5.1" in str(err)
    else:
        raise AssertionError("no error for exercise 9.9")


def test_learner_notebooks_link_to_the_instructors_version_and_the_solution_call():
    for path in sorted((ROOT / "labs" / "learner").glob("[0-9][0-9]_*.ipynb")):
        first = next(c for c in json.loads(path.read_text())["cells"]
                     if c["cell_type"] == "markdown")
        text = "".join(first["source"])
        assert f"](../{path.name})" in text, path.name
        assert (ROOT / "labs" / path.name).exists()
        assert f"lab{path.name[:2]}.LAB.solution(" in text, path.name


def test_sampling_feedback_names_the_logits_it_draws_over():
    def greedy(logits, temperature, top_k):
        return logits.argmax(-1, keepdim=True)

    lab07.LAB.reset()
    r = lab07.sampling.check(greedy)
    assert r.status == FAILED
    assert "over all the logits (top_k None)" in r.message and "top k" not in r.message


def test_the_progress_summary_links_to_open_exercises_look_like_links():
    from haelixe.exercises.progress import progress_html

    lab01.LAB.reset()
    html = progress_html(lab01.LAB)
    links = re.findall(r'<a href="#ex-1-\d"[^>]*style="([^"]*)"', html)
    assert len(links) == len(lab01.LAB.exercises)
    assert all("text-decoration:underline" in s and "#1a5fb4" in s for s in links)


def test_a_wrong_rmsnorm_backward_is_explained_on_one_case():
    # the catalogue of wrong solutions' entry for 5.1: forgets that r depends on x
    from test_lab_exercises_wrong import RMSNormDirectOnly

    lab05.LAB.reset()
    lab05.rmsnorm.check(RMSNormDirectOnly)
    r = lab05.rmsnorm.check(RMSNormDirectOnly)
    assert r.status == FAILED
    # the gradient named, and every shape shown is the one case's
    assert "d(sum(y * g))/dx, of shape (3, 4, 6)" in r.message
    assert "shape (3, 4, 6)" in r.detail and "(2, 5)" not in r.detail
    assert r.expected.startswith("an array of shape (3, 4, 6)")
    (caption, _), = r.pictures
    assert "the engine's: " in caption  # the expected norms beside the learner's
