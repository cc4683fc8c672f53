"""numba's side of the CPU backend: whether it is installed, the compiled kernels
(cpu_kernels) loaded on first use, and elementwise Kernels compiled to one-pass numpy
ufuncs. numba is optional: without it nothing here is compiled and the CPU runs numpy.

A Kernel's function is traced once per dtype with symbols for its inputs, giving a
Python expression over scalar math (``0.5 * x0 * (1.0 + ferf(x0 * 0.7071...))``); that
expression becomes a module in the user's cache directory, and numba.vectorize makes it
a ufunc, cached on disk beside it. So every composite elementwise op (GELU and its
gradient, SiLU, the clamp gradients...) runs as one loop over its inputs, where numpy
makes a pass and a temporary per operation, from the one declaration in ops/.

Only kernels worth it are compiled (worth_compiling): two or more operations, or erf or
sigmoid, which numpy computes in several passes; every function one that
vectorises in float32 (exp, erf, sqrt, comparisons, where...). A kernel calling log,
tanh or sin stays on numpy, whose SIMD versions of those beat a libm call per element;
a single operation (``a + b``) is already one numpy pass, and runs as that ufunc.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import queue
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

import numpy as np

#: dtypes the compiled ufuncs serve (everything else takes the numpy path)
FLOATS = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64"}


def numba_installed() -> bool:
    """Whether numba can be found (found, not imported: numba loads in about half a
    second, paid at the first compiled kernel). Without it, elementwise kernels run as
    numpy expressions and the fused ops as base.py's composed defaults."""
    global _NUMBA
    if _NUMBA is None:
        try:
            _NUMBA = importlib.util.find_spec("numba") is not None
        except (ImportError, ValueError):  # blocked, or a module without a spec
            _NUMBA = False
    return _NUMBA


_NUMBA = None


# -- loading in the background -------------------------------------------------------------
# numba costs about 1.5 s to import and set up before its first kernel runs (and each
# kernel 0.5-2 s more to compile where its disk cache is empty). So that a program's first
# steps do not wait for it, kernels load on a background thread at a low priority
# (idle cores, or what the training thread leaves of its own), starting once the program
# has stopped asking for new ones for a moment (_QUIET_S), and until one is ready for
# a call's dtype the call runs the kernel's composed form (base.py's default, or the
# elementwise Kernel's numpy expression): the same math to rounding, not bit for bit, so
# a process's first steps may round differently from its later ones (and two calls made
# while a kernel loads, in their last bits). Where bit-for-bit
# repeatability matters from the first call, set_background(False) (or
# HAELIXE_JIT_BACKGROUND=0) loads each kernel in the calling thread, when first needed.
_BACKGROUND = os.environ.get("HAELIXE_JIT_BACKGROUND", "1") != "0"
_JOBS: queue.SimpleQueue | None = None
_PENDING: set = set()
_LOCK = threading.Lock()
# The worker starts a kernel once none was asked for this long: the step asking for them
# (a model's first step asks for each of its kernels) runs without the compiler taking
# a share of the GIL (minGPT's first step: 410-415 ms this way, 460-820 with the
# compiler running beside it; its later steps 250-330 either way)
_QUIET_S = 0.1
_ASKED = 0.0  # when a kernel was last asked for (time.monotonic)


def set_background(on: bool) -> None:
    """Load compiled kernels on a background thread (True, the default) or in the thread
    that first calls each (False: every call from the first runs the compiled form)."""
    global _BACKGROUND
    _BACKGROUND = bool(on)


def soon(ready: dict, key, make):
    """``ready[key]``, or None while ``make()`` (which builds it) runs in the background;
    with background loading off, ``make()`` runs here, now. Each key is made once."""
    got = ready.get(key)
    if got is not None or not _BACKGROUND:
        if got is None:
            got = ready[key] = make()
        return got
    global _JOBS, _ASKED
    with _LOCK:
        if (id(ready), key) in _PENDING:
            return None
        _PENDING.add((id(ready), key))
        if _JOBS is None:
            _JOBS = queue.SimpleQueue()
            threading.Thread(target=_work, args=(_JOBS,), name="haelixe-jit",
                             daemon=True).start()
    _ASKED = time.monotonic()
    _JOBS.put((ready, key, make))
    return None


def wait() -> None:
    """Return once every kernel asked for so far is loaded (tests, benchmarks)."""
    while _PENDING:
        time.sleep(0.01)


# While kernels load, the GIL changes hands every 50 us instead of Python's 5 ms: numba's
# import and compiler are Python code holding the GIL, and the training thread, each time
# it takes the GIL back after a numpy call released it, would otherwise wait out the
# loader's whole interval (with empty caches the first step of minGPT's size took 1.1-1.3
# s against 0.6-0.7 s with this, and word_language_model's LSTM 0.6 s against 0.3 s).
_SWITCH_WHILE_LOADING = 0.00005


def _work(jobs):
    try:  # a low priority (a tenth of a busy core), so that training keeps its core
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 10)
    except (AttributeError, OSError):
        pass
    before = lowered = None  # the switch interval to restore once the queue is empty
    while True:
        if before is not None and jobs.empty():
            if sys.getswitchinterval() == lowered:  # (no one else changed it since)
                sys.setswitchinterval(before)
            before = None
        ready, key, make = jobs.get()
        while time.monotonic() - _ASKED < _QUIET_S:  # (the step asking is still running)
            time.sleep(_QUIET_S)
        if before is None:
            before = sys.getswitchinterval()
            sys.setswitchinterval(min(before, _SWITCH_WHILE_LOADING))
            lowered = sys.getswitchinterval()  # (as Python keeps it: whole microseconds)
        try:
            ready[key] = make()
        except Exception as e:  # noqa: BLE001 (a compiler failure must not stop training)
            warnings.warn(f"haelixe: a compiled kernel did not load ({e}); its composed "
                          f"form runs instead", stacklevel=1)
            ready[key] = _composed
        finally:
            with _LOCK:
                _PENDING.discard((id(ready), key))


def _after_fork():
    # the worker thread does not exist in a child process: the child starts its own
    global _JOBS
    _JOBS = None
    _PENDING.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


class Loading(Exception):
    """The compiled form of a kernel is not loaded yet: the caller runs the composed
    form this time (composed_while_loading)."""


def _composed(*args):
    """The stand-in for a kernel that failed to load: its composed form, always."""
    raise Loading("a kernel that did not load")


class _Compiled:
    """One kernel of cpu_kernels, called as the kernel itself once loaded for the dtype
    of its first argument; before that, the call queues the load and raises Loading."""

    __slots__ = ("name", "ready")

    def __init__(self, name):
        self.name, self.ready = name, {}

    def __call__(self, *args):
        dt = args[0].dtype
        f = self.ready.get(dt) or soon(self.ready, dt, lambda: _load_kernel(self.name, args))
        if f is None:
            raise Loading(self.name)
        return f(*args)


def composed_while_loading(method):
    """A compiled backend method (cpu_fused) that, while a kernel it calls is loading,
    runs its base class's composed form instead. The kernel handle raises Loading before
    the kernel writes anything, so the composed form starts from the same inputs; it is
    caught per method, not per kernel, because a method may call several kernels
    (attention) and must not mix a half-compiled result with a composed one."""
    name = method.__name__

    @functools.wraps(method)
    def run(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except Loading:  # (rare: only while kernels load) the class that defines ``run``
            owner = next(c for c in type(self).__mro__ if c.__dict__.get(name) is run)
            return getattr(super(owner, self), name)(*args, **kwargs)

    return run


def _load_kernel(name, args):
    """The numba kernel ``name`` compiled (or loaded from numba's disk cache) for the
    types of ``args``."""
    import numba

    kernel = getattr(_cpu_kernels(), name)
    kernel.compile(tuple(numba.typeof(a) for a in args))
    return kernel


class _Kernels:
    """cpu_kernels' kernels by name, each loaded when first needed (see _Compiled)."""

    def __init__(self):
        self._by_name = {}

    def __getattr__(self, name):
        k = self._by_name.get(name)
        if k is None:
            k = self._by_name[name] = _Compiled(name)
        return k


_KERNELS = _Kernels()


def kernels() -> _Kernels:
    """The compiled kernels, each loaded on first use (see _Compiled)."""
    return _KERNELS


def _cpu_kernels():
    """The cpu_kernels module (importing it imports numba)."""
    try:
        from . import cpu_kernels
    except ImportError as e:  # installed (numba_installed found it) but broken
        raise ImportError(f"haelixe: numba is installed but does not import ({e}); "
                          f"repair it, or uninstall it to run the CPU kernels on "
                          f"numpy") from e
    return cpu_kernels


class Unsupported(Exception):
    """The kernel uses something the scalar compiler does not take."""


class _Sym:
    """A traced value: Python source and whether it is a bool."""

    __slots__ = ("src", "is_bool", "trace")

    def __init__(self, src: str, is_bool: bool, trace):
        self.src, self.is_bool, self.trace = src, is_bool, trace

    def __bool__(self):
        raise Unsupported("Python control flow on a traced value")

    __hash__ = None


class _Trace:
    """The state of one trace: the type name of constants and the operation count."""

    def __init__(self):
        self.ops = 0
        self.ufunc = None  # the numpy ufunc when the kernel is one binary/unary op

    def num(self, v) -> str:
        if isinstance(v, _Sym):
            return f"T({v.src})" if v.is_bool else v.src
        if isinstance(v, (bool, np.bool_)):
            return f"T({float(v)!r})"
        if isinstance(v, (int, float, np.integer, np.floating)):
            return f"T({float(v)!r})"
        raise Unsupported(f"operand of type {type(v).__name__}")

    def cond(self, v) -> str:
        if isinstance(v, _Sym):
            return v.src if v.is_bool else f"({v.src} != T(0.0))"
        return repr(bool(v))

    def make(self, src: str, is_bool: bool = False) -> _Sym:
        self.ops += 1
        return _Sym(src, is_bool, self)


def _arith(op):
    def forward(a, b):
        t = a.trace
        return t.make(f"({t.num(a)} {op} {t.num(b)})")

    def reflected(a, b):
        t = a.trace
        return t.make(f"({t.num(b)} {op} {t.num(a)})")

    return forward, reflected


def _compare(op):
    def forward(a, b):
        t = a.trace
        return t.make(f"({t.num(a)} {op} {t.num(b)})", True)

    return forward


def _logical(op):
    def forward(a, b):
        t = a.trace
        return t.make(f"({t.cond(a)} {op} {t.cond(b)})", True)

    return forward


for _name, _op in (("add", "+"), ("sub", "-"), ("mul", "*"), ("truediv", "/")):
    _f, _r = _arith(_op)
    setattr(_Sym, f"__{_name}__", _f)
    setattr(_Sym, f"__r{_name}__", _r)
for _name, _op in (("lt", "<"), ("le", "<="), ("gt", ">"), ("ge", ">="), ("eq", "=="),
                   ("ne", "!=")):
    setattr(_Sym, f"__{_name}__", _compare(_op))
for _name, _op in (("and", "&"), ("or", "|"), ("xor", "^")):
    setattr(_Sym, f"__{_name}__", _logical(_op))
    setattr(_Sym, f"__r{_name}__", _logical(_op))
_Sym.__neg__ = lambda a: a.trace.make(f"(-{a.trace.num(a)})")
_Sym.__invert__ = lambda a: a.trace.make(f"(not {a.trace.cond(a)})", True)


# the scalar call each namespace function becomes in the generated ufunc ({} are its
# arguments; fexp, ferf, fmaximum, fminimum come from cpu_kernels)
_CALLS = {
    "exp": "fexp({})", "erf": "ferf({})", "sqrt": "math.sqrt({})",
    "rsqrt": "(T(1.0) / math.sqrt({}))", "sigmoid": "(T(1.0) / (T(1.0) + fexp(-{})))",
    "abs": "abs({})", "floor": "np.floor({})", "ceil": "np.ceil({})",
    "trunc": "np.trunc({})", "maximum": "fmaximum({}, {})", "minimum": "fminimum({}, {})",
    "sign": "(T(1.0) if {0} > T(0.0) else (T(-1.0) if {0} < T(0.0) else {0}))",
}


class _ScalarMath:
    """The namespace a Kernel's function sees while traced: each function writes the
    scalar call the generated ufunc makes. log, tanh, sin, pow... are refused: numpy's
    SIMD versions beat a libm call per element."""

    def __init__(self, trace):
        self.t = trace

    def __getattr__(self, name):
        fmt = _CALLS.get(name)
        if fmt is None:
            raise Unsupported(f"m.{name}")
        t = self.t
        return lambda *args: t.make(fmt.format(*(t.num(a) for a in args)))

    def isnan(self, x):
        s = self.t.num(x)
        return self.t.make(f"({s} != {s})", True)

    def where(self, c, a, b):
        return self.t.make(f"({self.t.num(a)} if {self.t.cond(c)} else {self.t.num(b)})")


# single operations numpy already does in one pass, by the traced expression
_UFUNC_OF = {"(x0 + x1)": np.add, "(x0 - x1)": np.subtract, "(x0 * x1)": np.multiply,
             "(x0 / x1)": np.divide, "(-x0)": np.negative, "fexp(x0)": np.exp,
             "math.sqrt(x0)": np.sqrt, "abs(x0)": np.abs}


def trace(kernel):
    """(expression source, number of operations) of ``kernel`` over inputs x0, x1, ...;
    raises Unsupported where the kernel cannot be compiled."""
    t = _Trace()
    syms = [_Sym(f"x{i}", False, t) for i in range(kernel.arity)]
    try:
        out = kernel.fn(_ScalarMath(t), *syms)
    except Unsupported:
        raise
    except (TypeError, AttributeError, ValueError) as e:
        raise Unsupported(str(e)) from None
    if not isinstance(out, _Sym):
        raise Unsupported("a constant kernel")
    if out.is_bool:
        raise Unsupported("a bool result")
    return out.src, t.ops


def worth_compiling(src: str, ops: int) -> bool:
    """Whether a traced kernel (``src``, ``ops``: trace's) pays for its compilation: two
    or more operations, or one numpy computes in several passes (erf; sigmoid, whose
    two-branch numpy form makes six)."""
    return ops >= 2 or "ferf" in src or "fexp" in src


def single_ufunc(kernel):
    """The numpy ufunc that computes ``kernel`` whole (``a + b`` is np.add), or None."""
    try:
        src, _ = trace(kernel)
    except Unsupported:
        return None
    return _UFUNC_OF.get(src)


# -- compiling -----------------------------------------------------------------------------
_HEADER = """import math

import numpy as np

from haelixe.backends.cpu_kernels import ferf, fexp, fmaximum, fminimum

T = np.{dtype}


def kernel({args}):
    return T({expr})
"""


def cache_dir() -> Path:
    """Where compiled kernels are kept: $HAELIXE_CACHE_DIR, else the user's cache."""
    env = os.environ.get("HAELIXE_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "haelixe"


def _fingerprint() -> str:
    """What a compiled kernel depends on besides its own source: the scalar math it
    calls and numba's version (numba's cache does not see either change)."""
    import numba

    from . import cpu_kernels

    h = hashlib.sha256(Path(cpu_kernels.__file__).read_bytes())
    h.update(numba.__version__.encode())
    return h.hexdigest()


_FINGERPRINT = None


def compile_ufunc(kernel, dtype: np.dtype):
    """A numpy ufunc computing ``kernel`` on ``dtype`` inputs in one pass, loaded from
    the disk cache or compiled (and cached) now."""
    global _FINGERPRINT
    from numba import vectorize

    src, _ = trace(kernel)
    name = FLOATS[np.dtype(dtype)]
    args = ", ".join(f"x{i}" for i in range(kernel.arity))
    code = _HEADER.format(dtype=name, args=args, expr=src)
    if _FINGERPRINT is None:
        _FINGERPRINT = _fingerprint()
    digest = hashlib.sha256((code + _FINGERPRINT).encode()).hexdigest()[:20]
    fn, cached = _load(f"hx_{kernel.name}_{name}_{digest}", code)
    sig = f"{name}({', '.join([name] * kernel.arity)})"
    # numba's DUFunc wraps a plain numpy ufunc: called directly, it costs what np.add
    # costs per call, and float warnings are attributed to the caller (filtered there)
    return vectorize([sig], cache=cached, nopython=True)(fn).ufunc


def _load(modname: str, code: str):
    """The generated function, imported from a file in the cache directory (numba
    caches only functions defined in files); exec'd uncached where no directory can be
    written."""
    for root in (cache_dir(), Path(tempfile.gettempdir()) / f"haelixe-{os.getuid()}"):
        try:
            folder = root / "kernels"
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{modname}.py"
            if not path.exists() or path.read_text() != code:
                tmp = folder / f".{modname}.{os.getpid()}.tmp"
                tmp.write_text(code)
                os.replace(tmp, path)  # readers see the whole file or none
            spec = importlib.util.spec_from_file_location(modname, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[modname] = module
            spec.loader.exec_module(module)
            return module.kernel, True
        except OSError:
            continue
    namespace: dict = {}
    exec(compile(code, f"<{modname}>", "exec"), namespace)  # noqa: S102
    return namespace["kernel"], False
