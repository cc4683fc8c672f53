"""Allocation tags (parameter, gradient, optimizer state...) as a context manager that
works whether or not the allocator module is in use."""

from __future__ import annotations


def tagged(tag: str):
    from .memory import tagged as _tagged

    return _tagged(tag)
