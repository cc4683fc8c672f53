"""Character-level text data that needs no download: the docstrings of standard-library
modules (read from their source with ``ast``, never imported), a character vocabulary,
and random windows of (input, next-character target) batches.

    corpus = CharCorpus.from_stdlib()
    x, y = corpus.batch("train", batch_size=16, context=64, rng=np.random.default_rng(0))

The text differs between Python versions (the standard library's docstrings change),
but for one installation it is the same on every call: modules in a fixed order,
docstrings in source order, characters outside printable ASCII dropped.
"""

from __future__ import annotations

import ast
import importlib.util
import string

import numpy as np

__all__ = ["STDLIB_MODULES", "stdlib_docstrings", "next_char_pairs", "CharCorpus"]

# Pure-Python modules present in every CPython >= 3.10, each with plenty of prose.
STDLIB_MODULES = (
    "argparse", "base64", "bisect", "calendar", "collections", "contextlib", "copy",
    "csv", "dataclasses", "difflib", "enum", "fractions", "functools", "gettext", "heapq",
    "inspect", "ipaddress", "json", "logging", "numbers", "operator", "optparse", "pickle",
    "pprint", "queue", "random", "shlex", "shutil", "statistics", "string", "tarfile",
    "tempfile", "textwrap", "threading", "typing", "unittest.case", "urllib.parse", "uuid",
    "zipfile",
)

_KEEP = frozenset(string.printable) - frozenset("\t\r\x0b\x0c")


def _source_docstrings(path: str) -> list[str]:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    docs = []
    for node in ast.walk(tree):  # breadth first: module, then classes and functions
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef,
                             ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=True)
            if doc:
                docs.append(doc)
    return docs


def stdlib_docstrings(modules=STDLIB_MODULES) -> str:
    """The docstrings of ``modules`` (module, class and function docstrings, in source
    order), joined by blank lines, with tabs as spaces and only printable ASCII kept.
    A module whose source is not installed is skipped; none at all is an error."""
    docs = []
    for name in modules:
        spec = importlib.util.find_spec(name)
        origin = getattr(spec, "origin", None)
        if not origin or not origin.endswith(".py"):
            continue
        try:
            docs.extend(_source_docstrings(origin))
        except (OSError, SyntaxError, UnicodeDecodeError):
            continue
    text = "\n\n".join(docs).replace("\t", "    ")
    text = "".join(c for c in text if c in _KEEP)
    if not text:
        raise RuntimeError(f"stdlib_docstrings: none of the {len(modules)} modules has its "
                           f"Python source installed (a docstring-stripped or .pyc-only "
                           f"Python?); build a CharCorpus from your own text instead")
    return text


def next_char_pairs(codes: np.ndarray, starts, context: int) -> tuple[np.ndarray, np.ndarray]:
    """(x, y), each (len(starts), context): x[b] = codes[s : s + context] and y[b] the
    same window one character later, codes[s + 1 : s + context + 1], so y[b, t] is the
    character that follows x[b, :t + 1]."""
    starts = np.asarray(starts, dtype=np.int64).reshape(-1)
    if starts.size and (starts.min() < 0 or starts.max() + context + 1 > len(codes)):
        raise ValueError(f"next_char_pairs: windows of {context + 1} characters from "
                         f"starts {starts.min()}..{starts.max()} do not fit {len(codes)} "
                         f"codes")
    windows = np.lib.stride_tricks.sliding_window_view(codes, context + 1)[starts]
    return np.ascontiguousarray(windows[:, :-1]), np.ascontiguousarray(windows[:, 1:])


class CharCorpus:
    """A text as integer codes over its sorted characters, split into a training part
    (the first ``1 - val_fraction``) and a validation part (the rest), as nanoGPT does."""

    def __init__(self, text: str, val_fraction: float = 0.1):
        if not 0.0 < val_fraction < 1.0:
            raise ValueError(f"CharCorpus: val_fraction must be in (0, 1), got "
                             f"{val_fraction}")
        if len(text) < 4:
            raise ValueError(f"CharCorpus: need at least 4 characters of text, got "
                             f"{len(text)}")
        self.text = text
        self.chars = sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.chars)}
        codes = self.encode(text)
        n_train = int(round(len(codes) * (1.0 - val_fraction)))
        self.splits = {"train": codes[:n_train], "val": codes[n_train:]}

    @classmethod
    def from_stdlib(cls, modules=STDLIB_MODULES, val_fraction: float = 0.1) -> CharCorpus:
        return cls(stdlib_docstrings(modules), val_fraction)

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    def encode(self, text: str) -> np.ndarray:
        try:
            return np.fromiter((self.stoi[c] for c in text), dtype=np.int64, count=len(text))
        except KeyError as err:
            raise ValueError(f"CharCorpus.encode: character {err.args[0]!r} is not in the "
                             f"vocabulary of {self.vocab_size} characters") from None

    def decode(self, codes) -> str:
        return "".join(self.chars[int(i)] for i in np.asarray(codes).reshape(-1))

    def batch(self, split: str, batch_size: int, context: int,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(x, y), each (batch_size, context) int64: windows at random offsets of
        ``split`` and the same windows shifted by one character (the targets)."""
        if split not in self.splits:
            raise ValueError(f"CharCorpus.batch: split must be 'train' or 'val', got "
                             f"{split!r}")
        data = self.splits[split]
        if len(data) <= context:
            raise ValueError(f"CharCorpus.batch: the {split} split has {len(data)} "
                             f"characters, too few for a context of {context}")
        starts = rng.integers(0, len(data) - context, size=batch_size)
        return next_char_pairs(data, starts, context)

    def __repr__(self) -> str:
        return (f"CharCorpus({len(self.text)} characters, vocab {self.vocab_size}, "
                f"train {len(self.splits['train'])}, val {len(self.splits['val'])})")
