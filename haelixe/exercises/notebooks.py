"""Lab notebooks as files: saved the way Jupyter saves them, without volatile metadata,
and turned into the learner's version.

The learner's version of an instructor notebook replaces every region between
``### BEGIN SOLUTION`` and ``### END SOLUTION`` (nbgrader's markers) by a stub that
raises NotImplementedError naming the exercise and the section that teaches it, drops
the nbval markers (the learner's notebook is run, not compared) and all outputs.
"""

from __future__ import annotations

import copy
import re

import nbformat

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"
NBVAL_MARKERS = ("# NBVAL_CHECK_OUTPUT", "# NBVAL_IGNORE_OUTPUT", "# NBVAL_SKIP",
                 "# NBVAL_RAISES_EXCEPTION")
#: cell metadata that changes on every run (execution timing) and nothing reads back
VOLATILE_CELL_METADATA = ("execution", "ExecuteTime")
#: notebook metadata of the same kind: saved widget state holds random model ids
VOLATILE_NOTEBOOK_METADATA = ("widgets",)
#: the kernelspec as JupyterLab writes it back when the kernel starts (ipykernel's own
#: python3 kernel); saved any other way, opening a lab would mark it modified
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python",
              "name": "python3"}

_SECTION = re.compile(r"^##\s+(\d+)\.\s+(.+?)\s*$", re.M)
_EXERCISE = re.compile(r"^###\s+Exercise\s+(\d+\.\d+)\s+·\s+(.+?)(\s*<a\s.*)?$", re.M)

LEARNER_NOTE = (
    "\n\n> **The learner's version.** Each exercise cell raises `NotImplementedError` "
    "until you write its code; the checker under it then says what it expected, what "
    "came back and where to look (the first miss a nudge, later ones the specific hint). "
    "Until an exercise passes, the cells after it use the engine's own implementation, "
    "so the notebook always runs top to bottom. The solutions are in the instructor's "
    "version, [`labs/{name}`](../{name}) (one folder up in JupyterLab's file browser), "
    "or one at a time when you ask: `{module}.LAB.solution(\"N.M\")`.")


class NotebookError(ValueError):
    pass


def read(path):
    return nbformat.read(str(path), as_version=4)


def dumps(nb) -> str:
    """The file Jupyter writes for ``nb`` (nbformat's JSON, then a final newline)."""
    s = nbformat.writes(nb, version=nbformat.NO_CONVERT)
    return s if s.endswith("\n") else s + "\n"


def normalize(nb) -> None:
    """In place: no volatile metadata, outputs and kernelspec as JupyterLab would write
    them back."""
    strip_volatile(nb)
    merge_streams(nb)
    nb.metadata["kernelspec"] = dict(KERNELSPEC)


def merge_streams(nb) -> None:
    """Join consecutive outputs of one stream (stdout, stderr) into one, as JupyterLab
    does when it opens a notebook: saved otherwise, a lab would change on re-saving."""
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        merged = []
        for out in cell.outputs:
            prev = merged[-1] if merged else None
            if (out.output_type == "stream" and prev is not None
                    and prev.output_type == "stream" and prev.name == out.name):
                prev.text += out.text
            else:
                merged.append(out)
        cell.outputs = merged


def strip_volatile(nb) -> bool:
    """Remove volatile metadata in place; True if anything was removed."""
    changed = False
    for key in VOLATILE_NOTEBOOK_METADATA:
        changed |= nb.metadata.pop(key, None) is not None
    for cell in nb.cells:
        for key in VOLATILE_CELL_METADATA:
            changed |= cell.metadata.pop(key, None) is not None
    return changed


def exercise_blocks(nb):
    """[(exercise number, section heading, [cell indices])]: each exercise's cells, from
    its ``### Exercise N.M`` heading to the code cell that calls ``.check(``."""
    blocks, current, section = [], None, None
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            m = _SECTION.search(cell.source)
            if m:
                section = f"{m.group(1)}. {m.group(2)}"
            m = _EXERCISE.search(cell.source)
            if m:
                current = (m.group(1), section, [i])
            continue
        if current is None:
            continue
        current[2].append(i)
        if ".check(" in cell.source:
            blocks.append(current)
            current = None
    return blocks


#: the widest stub line: a code cell at 1280 px with JupyterLab's file browser open shows
#: about 88 characters before it scrolls
STUB_WIDTH = 88


def _stub(indent: str, number: str | None, section: str | None) -> list[str]:
    """The lines that stand for a solution: where the exercise is explained, on comment
    lines short enough to read without scrolling, then the ``raise``."""
    what = f"exercise {number}" if number else "this exercise"
    lines = [f"{indent}# YOUR CODE HERE ({what})"]
    if section:
        num, _, title = section.partition(". ")
        lines.append(f'{indent}# section {num}, "{title}", explains it')
    lines.append(f'{indent}raise NotImplementedError("{what}: write your code in place of '
                 f'this line")')
    return lines


def stub_solutions(source: str, number=None, section=None) -> str:
    """``source`` with each solution region replaced by a stub."""
    out, inside = [], False
    for line in source.split("\n"):
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise NotebookError(f"nested {BEGIN} in:\n{source}")
            inside = True
            out.extend(_stub(line[:len(line) - len(line.lstrip())], number, section))
        elif stripped == END:
            if not inside:
                raise NotebookError(f"{END} without {BEGIN} in:\n{source}")
            inside = False
        elif not inside:
            out.append(line)
    if inside:
        raise NotebookError(f"{BEGIN} without {END} in:\n{source}")
    return "\n".join(out)


def _without_nbval_markers(source: str) -> str:
    lines = [ln for ln in source.split("\n") if ln.strip() not in NBVAL_MARKERS]
    return "\n".join(lines)


def learner_version(nb, name: str):
    """The learner's notebook made from the instructor's ``nb`` (file name ``name``)."""
    out = copy.deepcopy(nb)
    normalize(out)
    numbers = {}
    for number, section, cells in exercise_blocks(nb):
        for i in cells:
            numbers[i] = (number, section)
    for i, cell in enumerate(out.cells):
        if cell.cell_type != "code":
            continue
        if BEGIN in cell.source and i not in numbers:
            raise NotebookError(f"{name}: a solution region outside an exercise (cell {i}); "
                                f"put it after a '### Exercise N.M · Title' heading")
        source = stub_solutions(cell.source, *numbers.get(i, (None, None)))
        cell.source = _without_nbval_markers(source)
        cell.outputs = []
        cell.execution_count = None
    first = next((c for c in out.cells if c.cell_type == "markdown"), None)
    if first is not None:
        first.source += LEARNER_NOTE.format(name=name, module=f"lab{name[:2]}")
    return out
