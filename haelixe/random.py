"""Random generators: the process-wide one behind rand/randn/init, dropout and data, and
``Generator`` objects of one's own (PyTorch's ``torch.Generator``) that every random
function accepts as ``generator=``.

A Generator is numpy's PCG64 stream; its state (``get_state``) is an int64 tensor of 5
words (PyTorch's is a uint8 tensor, a dtype Haelixe lacks), so it can be saved and
restored. The same seed gives the same draws in Haelixe
every time, but not the numbers PyTorch's Mersenne Twister gives.
"""

from __future__ import annotations

import os

import numpy as np

_STATE_BYTES = 40  # PCG64: state and increment (128 bits each), has_uint32, uinteger


class Generator:
    """``hx.Generator().manual_seed(0)``; pass it as ``generator=`` to any random draw.
    ``device`` is accepted for PyTorch's signature: draws are made on the host for
    every device."""

    def __init__(self, device="cpu"):
        from .device import as_device

        self.device = as_device(device)
        self._seed = 67280421310721  # PyTorch's default_generator's initial seed
        self.np = np.random.default_rng(self._seed)

    def manual_seed(self, seed) -> Generator:
        seed = int(seed)
        if not -(1 << 63) <= seed < (1 << 64):
            raise RuntimeError(f"manual_seed: seed {seed} is out of range: it must fit in "
                               f"64 bits (a negative one is taken modulo 2**64)")
        self._seed = seed % (1 << 64)
        self.np = np.random.default_rng(self._seed)
        return self

    def seed(self) -> int:
        """Seed from the operating system's entropy; returns the seed."""
        self.manual_seed(int.from_bytes(os.urandom(8), "little"))
        return self._seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self):
        from .creation import from_numpy

        s = self.np.bit_generator.state
        words = ((s["state"]["state"], 16), (s["state"]["inc"], 16),
                 (int(s["has_uint32"]), 4), (int(s["uinteger"]), 4))
        raw = b"".join(v.to_bytes(n, "little") for v, n in words)
        return from_numpy(np.frombuffer(raw, np.int64).copy())

    def set_state(self, new_state) -> Generator:
        raw = np.asarray(new_state.numpy() if hasattr(new_state, "numpy") else new_state)
        if raw.dtype != np.int64 or raw.shape != (_STATE_BYTES // 8,):
            raise RuntimeError(f"Generator.set_state: expected the int64 tensor of "
                               f"{_STATE_BYTES // 8} words that get_state() returns, got "
                               f"{raw.dtype} of shape {raw.shape}")
        b = raw.tobytes()
        bits = np.random.PCG64()
        bits.state = {"bit_generator": "PCG64",
                      "state": {"state": int.from_bytes(b[:16], "little"),
                                "inc": int.from_bytes(b[16:32], "little")},
                      "has_uint32": int.from_bytes(b[32:36], "little"),
                      "uinteger": int.from_bytes(b[36:40], "little")}
        self.np = np.random.Generator(bits)
        return self

    def __repr__(self) -> str:
        return f"<hx.Generator on {self.device.type}, initial seed {self._seed}>"


default_generator = Generator()
default_generator.manual_seed(0)


def manual_seed(seed: int) -> Generator:
    """Seed every random draw Haelixe makes (initialisation, rand, dropout, data) that is
    not given a generator of its own. Returns the default generator, as PyTorch does."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng_state():
    return default_generator.get_state()


def set_rng_state(new_state) -> None:
    default_generator.set_state(new_state)


#: called before every draw while set (vmap's randomness="error" refuses draws)
draw_guard = None


def generator(gen=None) -> np.random.Generator:
    """The numpy generator to draw from: ``gen``'s (a Generator, or a numpy Generator
    as it is) or the default one's."""
    if draw_guard is not None:
        draw_guard()
    if gen is None:
        return default_generator.np
    if isinstance(gen, Generator):
        return gen.np
    if isinstance(gen, np.random.Generator):
        return gen
    raise TypeError(f"generator= must be an hx.Generator (torch.Generator), got "
                    f"{type(gen).__name__}")
