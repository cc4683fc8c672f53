"""Hints come in steps and the solution only when asked for; the learner's notebooks say
where the solutions are."""

from __future__ import annotations

import json
from pathlib import Path

from haelixe.exercises import FAILED, LABS, lab01, lab02, lab03, lab04, lab05, lab06, lab07  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
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
