"""The progress summary at the end of a lab: which exercises are done, with links to the
others.

It is displayed as plain HTML (so a saved notebook shows it anywhere, with no widget
state to restore) under a display id, and redrawn in place whenever an exercise of the
lab is checked again while the kernel runs: a live widget whose static form is itself.
"""

from __future__ import annotations

from html import escape

from .core import PASSED
from .render import FONT, LINE, TEXT, look


def counts(lab) -> tuple[int, int]:
    done = sum(1 for ex in lab.exercises.values() if ex.last is not None and ex.last.passed)
    return done, len(lab.exercises)


def progress_text(lab) -> str:
    done, total = counts(lab)
    lines = [f"Lab {lab.number:02d} · {lab.title}: {done} of {total} exercises done"]
    for ex in lab.exercises.values():
        status = ex.last.status if ex.last is not None else None
        symbol, word, _, _ = look(status)
        lines.append(f"  {symbol} {ex.label}" + ("" if status == PASSED else f": {word}"))
    return "\n".join(lines)


#: a link that looks like one (JupyterLab's own styles leave links in the text colour)
LINK_STYLE = "color:#1a5fb4;text-decoration:underline"


def progress_html(lab) -> str:
    done, total = counts(lab)
    items = []
    for ex in lab.exercises.values():
        status = ex.last.status if ex.last is not None else None
        symbol, word, accent, _ = look(status)
        label = escape(ex.label)
        if status != PASSED:  # a link back to the exercise, and what is left
            label = (f'<a href="#{ex.anchor}" style="{LINK_STYLE}">{label}</a> '
                     f'<span style="color:{accent}">({word})</span>')
        items.append(f'<li data-exercise="{escape(ex.number)}" data-status="'
                     f'{escape(status or "unchecked")}" style="list-style:none;margin:2px 0">'
                     f'<span style="color:{accent};display:inline-block;width:1.3em">'
                     f'{symbol}</span>{label}</li>')
    share = 100 * done / total if total else 0
    bar = (f'<div style="height:6px;background:{LINE};border-radius:3px;margin:6px 0;'
           f'max-width:420px"><div style="height:6px;width:{share:.0f}%;background:#2f8f5b;'
           f'border-radius:3px"></div></div>')
    return (f'<div class="hx-progress" data-done="{done}" data-total="{total}" '
            f'style="border:1px solid {LINE};padding:8px 12px;font:{FONT};color:{TEXT};'
            f'max-width:100%;box-sizing:border-box">'
            f'<div style="font-weight:600">Lab {lab.number:02d} · {escape(lab.title)}: '
            f'{done} of {total} exercises done</div>{bar}'
            f'<ul style="margin:0;padding:0">{"".join(items)}</ul></div>')


class ProgressSummary:
    """The summary as a displayable object (``_repr_mimebundle_``: HTML and text)."""

    def __init__(self, lab):
        self.lab = lab

    def _repr_mimebundle_(self, include=None, exclude=None):
        return {"text/plain": progress_text(self.lab), "text/html": progress_html(self.lab)}

    def __repr__(self) -> str:
        return progress_text(self.lab)


def _kernel_display():
    """IPython's display function when a kernel is running, else None."""
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:
        return None
    shell = get_ipython()
    if shell is None or not hasattr(shell, "kernel"):
        return None
    return display


_handles: dict = {}  # lab number -> display handles to redraw


def show_progress(lab):
    """Display the summary of ``lab``; later checks redraw it in place. Outside a kernel
    the summary is returned (its repr is the text form)."""
    summary = ProgressSummary(lab)
    display = _kernel_display()
    if display is None:
        return summary
    handle = display(summary, display_id=True)
    if lab.number not in _handles:
        lab.on_change(_redraw)
    # the summary cell run again makes a new display; the few latest are kept up to date
    _handles[lab.number] = (_handles.get(lab.number, []) + [(handle, summary)])[-4:]
    return None


def _redraw(lab) -> None:
    for handle, summary in _handles.get(lab.number, []):
        handle.update(summary)
