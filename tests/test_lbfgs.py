"""optim.LBFGS against PyTorch's: the same iterates on the Rosenbrock function and a
small least-squares model, with and without the strong-Wolfe line search."""

from __future__ import annotations

import numpy as np
import pytest

import haelixe as hx

torch = pytest.importorskip("torch")


def rosenbrock(lib, x):
    return (1 - x[0]) ** 2 + 100 * (x[1] - x[0] ** 2) ** 2


@pytest.mark.parametrize("line_search", [None, "strong_wolfe"])
@pytest.mark.parametrize("history", [100, 3])
def test_lbfgs_follows_pytorchs_iterates_on_rosenbrock(line_search, history):
    start = np.array([-1.5, 2.0])
    x = hx.tensor(start, dtype=hx.float64, requires_grad=True)
    tx = torch.tensor(start, dtype=torch.float64, requires_grad=True)
    lr = 1.0 if line_search else 0.1
    opt = hx.optim.LBFGS([x], lr=lr, max_iter=10, history_size=history,
                         line_search_fn=line_search)
    topt = torch.optim.LBFGS([tx], lr=lr, max_iter=10, history_size=history,
                             line_search_fn=line_search)

    def closure(lib, opt, v):
        def run():
            opt.zero_grad()
            loss = rosenbrock(lib, v)
            loss.backward()
            return loss
        return run

    for _ in range(4):
        got = opt.step(closure(hx, opt, x))
        want = topt.step(closure(torch, topt, tx))
        # (equal up to float64 rounding: PyTorch's dot products sum in another order)
        assert got.item() == pytest.approx(want.item(), rel=1e-6, abs=1e-12)
        np.testing.assert_allclose(x.detach().numpy(), tx.detach().numpy(), rtol=1e-6,
                                   atol=1e-12)
    assert opt.lbfgs_state["func_evals"] == topt.state[topt._params[0]]["func_evals"]
    if line_search:
        assert rosenbrock(hx, x).item() < 1e-3  # from 12.5, on its way to (1, 1)


def test_lbfgs_trains_a_model_as_pytorch_does():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((20, 3)), rng.standard_normal((20, 1))
    hx.manual_seed(0)
    model = hx.nn.Linear(3, 1).double()
    tmodel = torch.nn.Linear(3, 1).double()
    tmodel.load_state_dict({k: torch.tensor(v.numpy()) for k, v in model.state_dict().items()})
    opt = hx.optim.LBFGS(model.parameters(), line_search_fn="strong_wolfe")
    topt = torch.optim.LBFGS(tmodel.parameters(), line_search_fn="strong_wolfe")
    x, y, tx, ty = hx.tensor(a), hx.tensor(b), torch.tensor(a), torch.tensor(b)

    def step(m, o, x, y):
        def closure():
            o.zero_grad()
            loss = ((m(x) - y) ** 2).mean()
            loss.backward()
            return loss
        return o.step(closure).item()

    for _ in range(2):
        assert step(model, opt, x, y) == pytest.approx(step(tmodel, topt, tx, ty), rel=1e-7)
    np.testing.assert_allclose(model.weight.detach().numpy(), tmodel.weight.detach().numpy(),
                               rtol=1e-6)


def test_lbfgs_refuses_what_pytorch_refuses():
    p = hx.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="per-parameter options"):
        hx.optim.LBFGS([{"params": [p]}, {"params": [hx.ones(1, requires_grad=True)]}])
    with pytest.raises(ValueError, match="strong_wolfe"):
        hx.optim.LBFGS([p], line_search_fn="armijo")
    with pytest.raises(RuntimeError, match="closure"):
        hx.optim.LBFGS([p]).step()


@pytest.mark.gpu
def test_lbfgs_on_the_gpu_matches_the_cpu(be):
    results = []
    for device in ("cpu", "gpu"):
        x = hx.tensor([-1.5, 2.0], device=device, requires_grad=True)
        opt = hx.optim.LBFGS([x], line_search_fn="strong_wolfe", max_iter=5)

        def closure(opt=opt, x=x):
            opt.zero_grad()
            loss = rosenbrock(hx, x)
            loss.backward()
            return loss
        opt.step(closure)
        results.append(x.detach().cpu().numpy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-3, atol=1e-4)
