"""Exercises for the lab notebooks: each checked with feedback, not only pass or fail.

    from haelixe.exercises import lab01
    lab01.permute.check(permute_strides)     # under the cell: expected, got, a hint
    lab01.LAB.progress()                     # the summary at the end of the lab

One module per lab (``lab01`` ... ) declares its exercises on a :class:`Lab`: a number,
a title, the section of the notebook that teaches it, a checking function and, where
later cells need the piece, the engine's own implementation to fall back on
(:meth:`Exercise.use`). The instructor's notebooks in ``labs/`` hold the solutions
between ``### BEGIN SOLUTION`` / ``### END SOLUTION`` markers;
``python -m haelixe.exercises.make_learner`` writes the learner's versions to
``labs/learner/`` with every solution replaced by a stub.

Conventions a new lab follows (the tests rely on them): an exercise starts with a
markdown cell whose heading is ``### Exercise N.M · Title`` and holds
``<a id="ex-N-M"></a>``; its code cells up to the one that calls ``.check(...)`` run with
only the lab's imports and the earlier exercises' cells (no other notebook state), so the
test suite can run every reference solution on its own.

This package sits at the top layer, like the apps: it may import the engine and viz.
"""

from .core import FAILED, LABS, NOT_DONE, PASSED, Checker, Exercise, Lab, Result

__all__ = ["Lab", "Exercise", "Result", "Checker", "LABS", "PASSED", "FAILED", "NOT_DONE"]
