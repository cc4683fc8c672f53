"""One path per call: a node is recorded in one function, no op is built from source
text, and a warm ``(x + y).sum().backward()`` stays a few dozen Python calls.

These read the package's source (ast) and count calls with sys.setprofile, so a second
recording function, an exec'd front or a costlier hot path fails here by name."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import numpy as np
import pytest

import haelixe as hx

PACKAGE = Path(hx.__file__).resolve().parent
#: the compilers that generate code on purpose (and register it with linecache): the
#: CPU replay of a captured step and the traced numba kernels
COMPILERS = {"backends/cpu_graph.py", "backends/cpu_jit.py"}
#: at most this many Python function calls for a warm (x + y).sum().backward()
MAX_CALLS = 30


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        yield rel, ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _source_executions(tree) -> list:
    """Lines that call exec, eval or compile (the builtins, not re.compile)."""
    return [f"{node.lineno} {node.func.id}(...)" for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("exec", "eval", "compile")]


def test_no_source_text_is_executed_outside_the_compilers():
    found = [f"{rel}:{hit}" for rel, tree in _modules() if rel not in COMPILERS
             for hit in _source_executions(tree)]
    assert not found, "source text executed outside backends' compilers: " + ", ".join(found)


def test_the_scan_finds_exec_and_compile_but_not_re_compile():
    tree = ast.parse("import re\ndef f(src):\n    exec(src)\n    re.compile('a')\n"
                     "    return compile(src, '<s>', 'exec')\n")
    assert _source_executions(tree) == ["3 exec(...)", "5 compile(...)"]


def _node_writes(tree):
    """(function name, line) of every write of a node's edges or sequence number
    (``<obj>.next = ...``, ``<obj>.seq = ...`` with obj not ``self``)."""
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    for t in ast.walk(target):
                        if isinstance(t, ast.Attribute) and t.attr in ("next", "seq") and \
                                isinstance(t.value, ast.Name) and t.value.id != "self":
                            out.append((fn.name, node.lineno))
    return out


def test_one_function_records_a_node():
    writers = {}
    for rel, tree in _modules():
        for name, line in _node_writes(tree):
            writers.setdefault(f"{rel}:{name}", []).append(line)
    assert set(writers) == {"autograd/function.py:record"}, writers


def test_every_op_records_through_that_function(monkeypatch):
    from haelixe.autograd import function

    seen = []
    real = function.record

    def spy(ctx, out, inputs, state):
        seen.append(ctx.name)
        return real(ctx, out, inputs, state)

    # every caller reads the module's name at call time or holds the function: patch both
    from haelixe.ops import registry

    monkeypatch.setattr(function, "record", spy)
    monkeypatch.setattr(registry, "record", spy)
    x = hx.randn(3, 4, requires_grad=True)
    w = hx.randn(4, 2, requires_grad=True)
    (((x * 2.0 + x).exp() @ w).softmax(-1)[:, :1].sum()).backward()
    assert {"Mul", "Add", "Exp"} <= set(seen), seen


def test_backward_is_the_one_protocol_between_a_node_and_the_engine():
    """No Function gives a second form of its backward (a ``raw_backward`` on raw
    arrays, say) and nothing asks a node for one: an op's fast first-order form is a
    branch of its backward."""
    found = [f"{rel}:{node.lineno}" for rel, tree in _modules() for node in ast.walk(tree)
             if (isinstance(node, ast.FunctionDef) and node.name == "raw_backward")
             or (isinstance(node, ast.Attribute) and node.attr == "raw_backward")
             or (isinstance(node, ast.Constant) and node.value == "raw_backward")]
    assert not found, found


def test_a_gradient_between_nodes_is_a_tensor():
    """What the ops' first-order forms hand on (a kernel's result, a sum's zero-stride
    view, cat's views, a slice's partial gradient made whole, matmul's and softmax's)
    reaches the next node as a Tensor."""
    from haelixe.autograd.function import Function

    seen = []

    class Probe(Function):  # a node of its own before each consumer
        @staticmethod
        def forward(ctx, x):
            return x._be.copy(x._data)

        @staticmethod
        def backward(ctx, g):
            seen.append(type(g))
            return g

    x = hx.randn(3, 4, requires_grad=True)
    w = hx.randn(4, 2)
    p = [Probe.apply(x) for _ in range(6)]
    loss = ((p[0] * 2.0).sum() + p[1].sum() + hx.cat([p[2], p[2]]).exp().sum()
            + p[3][:, 1:].sum() + (p[4] @ w).sum() + p[5].softmax(-1)[:, 0].sum())
    loss.backward()
    assert seen == [hx.Tensor] * 6, seen


def _count_calls(fn) -> list:
    calls = []

    def profile(frame, event, arg):
        if event == "call":
            calls.append(f"{frame.f_code.co_filename}:{frame.f_code.co_name}")

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return calls[1:]  # (the first is fn itself)


@pytest.mark.parametrize("grads", ["accumulating", "None"])
def test_a_warm_add_sum_backward_is_a_few_python_calls(grads):
    x = hx.randn(4, 5, requires_grad=True)
    y = hx.randn(4, 5, requires_grad=True)

    def step():
        if grads == "None":  # as after zero_grad(): each leaf's first gradient
            x.grad = y.grad = None
        (x + y).sum().backward()

    for _ in range(3):
        step()
    before = x.grad.numpy().copy()
    if grads == "None":
        x.grad = y.grad = None
        calls = _count_calls(lambda: (x + y).sum().backward())
    else:
        calls = _count_calls(step)
    assert len(calls) <= MAX_CALLS, f"{len(calls)} calls:\n" + "\n".join(calls)
    np.testing.assert_array_equal(x.grad.numpy(), np.ones((4, 5)) if grads == "None"
                                  else before + 1)
    np.testing.assert_array_equal(y.grad.numpy(), x.grad.numpy())
    assert x.grad is not y.grad  # each leaf owns its gradient's buffer
