"""Labs, exercises and the verdict a checker gives.

A lab module declares its exercises with a checking function each:

    LAB = Lab(1, "Tensors and strides")

    @LAB.exercise("1.1", "Strides of a permute", section="2. Positions by hand")
    def permute(answer, fb):
        got = fb.call(answer, (12, 4, 1), (2, 0, 1))
        if got != (1, 12, 4):
            fb.fail("...", expected=(1, 12, 4), got=got, hint="...")

and the notebook calls ``lab01.permute.check(permute_strides)``. The checking function
reaches the learner's code only through :meth:`Checker.call`, so a stub's
NotImplementedError becomes "not done yet" and any other exception a failed attempt that
names the line it came from; :meth:`Checker.fail` ends the check with what was expected,
what came back and a hint. Returning normally means the answer passed.

Hints come in steps, as in MiniTorch's and nbgrader's labs: the first miss of an
exercise gets a nudge (what to look at, the exercise's ``nudge`` or the section that
teaches it), a later miss the checker's specific hint (the formula, the usual mistake).
The solution only comes when asked for: ``LAB.solution("1.1")`` reads it from the
instructor's notebook.
"""

from __future__ import annotations

import json
import os
import traceback
from dataclasses import dataclass, field

import numpy as np

PASSED, FAILED, NOT_DONE = "passed", "failed", "not done"

_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass
class Result:
    """One check of one answer: its status and the feedback shown under the cell."""

    exercise: Exercise
    status: str
    message: str
    expected: str | None = None
    got: str | None = None
    hint: str | None = None
    detail: str | None = None  # preformatted text: an engine message, a traceback line
    pictures: list = field(default_factory=list)  # [(caption, svg string)]
    checker_error: bool = False  # the checker itself failed (a defect, never the learner's)

    @property
    def passed(self) -> bool:
        return self.status == PASSED

    def text(self) -> str:
        from .render import result_text

        return result_text(self)

    def html(self) -> str:
        from .render import result_html

        return result_html(self)

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": self.text(), "text/html": self.html()}

    def __repr__(self) -> str:
        return self.text()


class _Verdict(Exception):
    """Ends a check early with a ready result."""

    def __init__(self, result: Result):
        super().__init__(result.message)
        self.result = result


def _short(value, limit: int = 120) -> str:
    from .values import describe

    return describe(value, limit)


def _learner_line(err: BaseException) -> str | None:
    """'line N: source' of the innermost frame outside haelixe: the learner's own code."""
    frames = [f for f in traceback.extract_tb(err.__traceback__)
              if not os.path.abspath(f.filename).startswith(_PACKAGE_ROOT)]
    if not frames:
        return None
    f = frames[-1]
    src = (f.line or "").strip()
    return f"line {f.lineno} of your code: {src}" if src else f"line {f.lineno} of your code"


class Checker:
    """What a checking function gets besides the answer: a way to call the learner's code
    and to end the check with feedback."""

    def __init__(self, exercise: Exercise):
        self.exercise = exercise

    def call(self, fn, *args, shown: str | None = None, unfinished: str | None = None,
             passthrough: tuple = (), **kwargs):
        """``fn(*args, **kwargs)`` for learner code. A NotImplementedError anywhere inside
        ends the check as "not done" (with ``unfinished`` as the message, if given);
        another exception as a failure naming it and the line of the learner's code it
        came from. ``shown`` is how the call is written in the feedback (default: the
        function's name with the arguments). Exceptions of the ``passthrough`` types
        are the checker's own (a simulated failure, say) and propagate unchanged."""
        if not callable(fn):
            self.fail(f"expected a function here, got {_short(fn)}",
                      hint="keep the `def` line of the exercise cell and write its body")
        try:
            with np.errstate(all="ignore"):  # the feedback explains overflows and nans
                return fn(*args, **kwargs)
        except _Verdict:
            raise
        except passthrough:
            raise
        except NotImplementedError:
            self.not_done(unfinished and f"not done yet: {unfinished} ({self.exercise.where})")
        except Exception as err:  # the learner's code failed: report it, never raise it
            what = shown or _call_text(fn, args)
            self.fail(f"{what} raised {type(err).__name__}: {err}",
                      detail=_learner_line(err),
                      hint=self.exercise.error_hint)

    def fail(self, message: str, *, expected=None, got=None, hint: str | None = None,
             detail: str | None = None, pictures=()) -> None:
        """End the check: the answer is wrong. ``expected`` / ``got`` may be values (shown
        with :func:`describe`) or ready strings."""
        raise _Verdict(Result(self.exercise, FAILED, message,
                              None if expected is None else _as_text(expected),
                              None if got is None else _as_text(got),
                              hint, detail, list(pictures)))

    def not_done(self, message: str | None = None) -> None:
        ex = self.exercise
        raise _Verdict(Result(ex, NOT_DONE, message or (
            f"not done yet: the cell still raises NotImplementedError. Write your code in "
            f"place of the `raise` line ({ex.where}).")))


def first_hint(*cases, otherwise: str) -> str:
    """The hint of the first ``(condition, hint)`` case that holds: each typical mistake
    has its own explanation, and ``otherwise`` states the idea in general."""
    return next((hint for holds, hint in cases if holds), otherwise)


def _as_text(value) -> str:
    return value if isinstance(value, str) else _short(value, 240)


def _call_text(fn, args) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", "your function")
    return f"{name}({', '.join(_short(a, 40) for a in args)})"


class Exercise:
    """One exercise: its number and title, the lab section it belongs to, the checking
    function, and (optionally) the engine's own implementation that later cells use
    until the learner's passes."""

    def __init__(self, lab: Lab, number: str, title: str, checker, *, section: str,
                 fallback=None, error_hint: str | None = None, nudge: str | None = None):
        self.lab = lab
        self.nudge = nudge
        self.misses = 0  # failed checks so far: the first gets a nudge, later ones the hint
        self.number = number
        self.title = title
        self.section = section
        self.checker = checker
        self.fallback = fallback
        self.error_hint = error_hint or ("read the error above: it names the operation and "
                                         "the shapes involved")
        self.last: Result | None = None
        self._passed_answer = None

    @property
    def anchor(self) -> str:
        """The HTML id of the exercise's heading in the notebook: 'ex-1-2' for 1.2."""
        return "ex-" + self.number.replace(".", "-")

    @property
    def where(self) -> str:
        """'section 2, "Positions by hand", explains it'."""
        num, _, name = self.section.partition(". ")
        return f'section {num}, "{name}", explains it' if name else f"see {self.section}"

    @property
    def label(self) -> str:
        return f"Exercise {self.number} · {self.title}"

    def check(self, answer) -> Result:
        """Check ``answer`` (what the exercise cell defined) and return the feedback; the
        notebook shows it under the cell. Never raises for a wrong answer."""
        fb = Checker(self)
        try:
            note = self.checker(answer, fb)
            result = Result(self, PASSED, note or "passed")
        except _Verdict as v:
            result = v.result
        except Exception as err:  # a defect of the checker: say so instead of crashing
            result = Result(self, FAILED, f"the checker could not judge this answer "
                            f"({type(err).__name__}: {err})", checker_error=True)
        if result.status == FAILED and not result.checker_error:
            self.misses += 1
            result.hint = self._staged_hint(result.hint)
        self.last = result
        self._passed_answer = answer if result.passed else None
        self.lab.changed()
        return result

    def _staged_hint(self, hint: str | None) -> str | None:
        """The first miss's nudge, or from the second miss on the specific hint, with
        where the solution is."""
        if hint is None:
            return None
        if self.misses == 1:
            look = self.nudge or "compare what came back with what was expected"
            return (f"{look}; {self.where}. Check again after your next change for a more "
                    f"specific hint.")
        return (f"{hint} (stuck? {self.lab.module_name}.LAB.solution(\"{self.number}\") "
                f"shows the solution)")

    def use(self, answer):
        """``answer`` if its last check passed, else the engine's own implementation, so
        the cells after an unfinished exercise still run."""
        if self.last is not None and self.last.passed and self._passed_answer is answer:
            return answer
        if self.fallback is None:
            return answer
        return self.fallback()

    def __repr__(self) -> str:
        state = self.last.status if self.last else "not checked"
        return f"<{self.label} ({state})>"


class Lab:
    """The exercises of one lab notebook, in order, and its progress summary."""

    def __init__(self, number: int, title: str):
        self.number = number
        self.title = title
        self.exercises: dict[str, Exercise] = {}
        self._listeners = []
        LABS[number] = self

    @property
    def module_name(self) -> str:
        """The module a notebook imports this lab's exercises from: 'lab01'."""
        return f"lab{self.number:02d}"

    def exercise(self, number: str, title: str, *, section: str, fallback=None,
                 error_hint: str | None = None, nudge: str | None = None):
        """Decorator: the checking function ``checker(answer, fb)`` of exercise
        ``number``; the decorated name becomes the :class:`Exercise`. ``nudge`` is what
        the first miss points at (default: compare expected and got, and the section)."""
        def register(checker) -> Exercise:
            if number in self.exercises:
                raise ValueError(f"lab {self.number}: exercise {number} is declared twice")
            ex = Exercise(self, number, title, checker, section=section, fallback=fallback,
                          error_hint=error_hint, nudge=nudge)
            self.exercises[number] = ex
            return ex
        return register

    def changed(self) -> None:
        for fn in list(self._listeners):
            fn(self)

    def on_change(self, fn) -> None:
        self._listeners.append(fn)

    def progress(self):
        """Display the progress summary (it follows later checks while the kernel runs)."""
        from .progress import show_progress

        return show_progress(self)

    def solution(self, number: str) -> Solution:
        """The instructor's solution of exercise ``number`` ("5.1"), read from the
        instructor's notebook (labs/NN_*.ipynb): asked for, never shown by a check."""
        if number not in self.exercises:
            raise KeyError(f"lab {self.number} has no exercise {number!r}; its exercises: "
                           f"{', '.join(self.exercises)}")
        path = instructor_notebook(self.number)
        return Solution(self.exercises[number], solution_code(path, number), path)

    def reset(self) -> None:
        """Forget every result and miss (tests start from a clean state)."""
        for ex in self.exercises.values():
            ex.last, ex._passed_answer, ex.misses = None, None, 0
        self.changed()


#: lab number -> Lab, filled as the lab modules are imported
LABS: dict[int, Lab] = {}

#: the instructor's notebooks of a source checkout (the package sits beside labs/)
LABS_DIR = os.path.join(os.path.dirname(_PACKAGE_ROOT), "labs")
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"


def instructor_notebook(lab_number: int) -> str:
    names = sorted(n for n in (os.listdir(LABS_DIR) if os.path.isdir(LABS_DIR) else ())
                   if n.startswith(f"{lab_number:02d}_") and n.endswith(".ipynb"))
    if not names:
        raise FileNotFoundError(
            f"lab {lab_number}'s instructor notebook is not in {LABS_DIR}: the solutions "
            f"come with a clone of the repository (labs/{lab_number:02d}_*.ipynb)")
    return os.path.join(LABS_DIR, names[0])


def solution_code(path: str, number: str) -> str:
    """The code of exercise ``number``'s solution cells (those holding the solution
    markers, from its heading ``<a id="ex-N-M">`` to the next exercise's), markers
    removed: the solution in its context (the class or ``def`` around it)."""
    with open(path, encoding="utf-8") as f:
        cells = json.load(f)["cells"]
    anchor, inside, parts = f'id="ex-{number.replace(".", "-")}"', False, []
    for cell in cells:
        src = "".join(cell["source"])
        if cell["cell_type"] == "markdown" and 'id="ex-' in src:
            if inside:
                break
            inside = anchor in src
        elif inside and cell["cell_type"] == "code" and BEGIN_SOLUTION in src:
            parts.append("\n".join(line for line in src.splitlines()
                                   if line.strip() not in (BEGIN_SOLUTION, END_SOLUTION)
                                   and not line.startswith("# NBVAL_")))
    if not parts:
        raise LookupError(f"exercise {number} has no solution cell in {path}")
    return "\n\n".join(parts)


@dataclass
class Solution:
    """The instructor's code for one exercise, shown as a code block in a notebook."""

    exercise: Exercise
    code: str
    path: str

    def __str__(self) -> str:
        return self.code

    def __repr__(self) -> str:
        return f"{self.exercise.label}: the solution (from {self.path})\n\n{self.code}"

    def _repr_markdown_(self) -> str:
        return (f"**{self.exercise.label}: the solution** (from "
                f"`{os.path.relpath(self.path)}`)\n\n```python\n{self.code}\n```")
