"""Makes the modules named in ``HAELIXE_BLOCK_IMPORTS`` (comma-separated, e.g.
``numba,wgpu``) impossible to import, as if they were not installed.

Python imports ``sitecustomize`` at start-up from the first directory on its path that
has one, so putting this directory on ``PYTHONPATH`` blocks those modules in the test
process and in every interpreter it starts (nbval's notebook kernels, the fresh
interpreters of tests): ``make test-portable`` runs the suite that way.
"""

import os
import sys

BLOCKED = frozenset(m for m in os.environ.get("HAELIXE_BLOCK_IMPORTS", "").split(",") if m)


class BlockedImports:
    """A meta-path finder, first on sys.meta_path, that refuses the blocked modules and
    their submodules with the ModuleNotFoundError a missing package gives."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r} (blocked by "
                                      f"HAELIXE_BLOCK_IMPORTS)", name=name)
        return None


if BLOCKED:
    sys.meta_path.insert(0, BlockedImports)
