"""hx.Size (torch.Size under the alias): a shape as a tuple of ints, equal to the plain
tuples Haelixe's .shape gives, accepted wherever a shape is."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import haelixe as hx


def test_size_is_a_tuple_of_ints_as_torchs():
    s, t = hx.Size([2, np.int64(3)]), torch.Size([2, 3])
    assert s == tuple(t) == (2, 3) and isinstance(s, tuple)
    assert [type(n) for n in s] == [int, int]
    assert s.numel() == t.numel() == 6 and hx.Size().numel() == torch.Size().numel() == 1
    assert isinstance(s[1:], hx.Size) and s[1:] == tuple(t[1:]) and s[0] == 2
    assert isinstance(s + (4,), hx.Size) and s + (4,) == tuple(t + (4,))
    assert repr(s) == "Size([2, 3])"
    assert hx.Size([True, 2]) == tuple(torch.Size([True, 2])) == (1, 2)  # (bools are ints)


def test_a_size_makes_and_samples_tensors_of_its_shape():
    assert hx.zeros(hx.Size([2, 3])).shape == (2, 3)
    assert hx.randn(4).reshape(hx.Size([2, 2])).shape == (2, 2)
    assert hx.distributions.Normal(0.0, 1.0).sample(hx.Size([5])).shape == (5,)
    assert hx.Size(hx.zeros(3, 1).shape) == (3, 1)


@pytest.mark.parametrize("bad", [[1.5], ["2"], [None]])
def test_an_element_that_is_not_an_int_is_refused(bad):
    with pytest.raises(TypeError):
        torch.Size(bad)
    with pytest.raises(TypeError, match="Size: expected a sequence of ints"):
        hx.Size(bad)
