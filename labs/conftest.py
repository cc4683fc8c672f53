"""nbval runs every lab, the instructor's versions (outputs compared) and the learner's
(run without error); lab 04 needs a wgpu adapter (a software one will do). Where the
machine has none, its cells are skipped with the reason and the fix instead of failing."""

import os

import pytest

# The labs' matrices are small (a 64-wide model): BLAS threads buy nothing there, and on a
# machine whose cores are busy (the rest of the suite, a neighbour) they spin against each
# other and slow a lab several times over (lab 05: 62 s against 9 s on two busy cores).
# The notebook kernels nbval starts inherit this; a value set by the caller wins.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
# Compiled kernels load in the calling thread, so that outputs compared by nbval do not
# depend on when a background load finishes (backends/cpu_jit.py)
os.environ.setdefault("HAELIXE_JIT_BACKGROUND", "0")


def _missing_adapter():
    try:
        from haelixe.backends.wgpu.context import get_context

        get_context()
    except Exception as err:  # no adapter, or no Vulkan/GL loader at all
        return f"{type(err).__name__}: {err}"
    return None


def pytest_collection_modifyitems(config, items):
    gpu_lab = [item for item in items if "04_gpu" in item.nodeid]
    if not gpu_lab:
        return
    why = _missing_adapter()
    if why is not None:
        skip = pytest.mark.skip(reason=f"lab 04 needs a wgpu adapter ({why}); on "
                                       f"Debian/Ubuntu: apt-get install mesa-vulkan-drivers")
        for item in gpu_lab:
            item.add_marker(skip)
