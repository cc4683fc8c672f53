"""L-BFGS (PyTorch's optim.LBFGS): a quasi-Newton method that builds its step from the
last ``history_size`` gradient differences, with an optional strong-Wolfe line search.

    opt = hx.optim.LBFGS(model.parameters(), line_search_fn="strong_wolfe")
    def closure():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        return loss
    opt.step(closure)

The parameters are one flat buffer (see flat.py), so a step's vector arithmetic (the
two-loop recursion, the moves along the direction) runs on whole buffers. Scalars the
algorithm branches on (dot products, the loss) are read back to the host, as in PyTorch.
"""

from __future__ import annotations

import math

from ..autograd.mode import enable_grad, no_grad
from ..ops.indexing import cat
from .optimizer import Optimizer


def _dot(a, b) -> float:
    return float((a * b).sum())


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None) -> float:
    """The minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1 and g2,
    kept inside ``bounds`` (by default the interval between x1 and x2)."""
    lo, hi = bounds if bounds is not None else (min(x1, x2), max(x1, x2))
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 * d1 - g1 * g2
    if d2_square < 0:
        return (lo + hi) / 2.0
    d2 = math.sqrt(d2_square)
    if x1 <= x2:
        pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(pos, lo), hi)


def _strong_wolfe(evaluate, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """A step length t along d meeting the strong Wolfe conditions (sufficient decrease
    and curvature): bracket an interval that holds one, then zoom into it by cubic
    interpolation. ``evaluate(t)`` gives (loss, flat gradient) at x + t d. Returns
    (loss, gradient, t, evaluations)."""
    d_norm = float(d.abs().max())
    f_new, g_new = evaluate(t)
    evals, gtd_new = 1, _dot(g_new, d)
    t_prev, f_prev, g_prev, gtd_prev = 0.0, f, g, gtd
    done, ls_iter = False, 0
    while ls_iter < max_ls:
        increased = f_new > f + c1 * t * gtd or (ls_iter > 1 and f_new >= f_prev)
        if not increased and abs(gtd_new) <= -c2 * gtd:
            bracket, bf, bg, bgtd = [t], [f_new], [g_new], [gtd_new]
            done = True
            break
        if increased or gtd_new >= 0:  # a minimum lies between t_prev and t
            bracket, bf, bg, bgtd = [t_prev, t], [f_prev, f_new], [g_prev, g_new], \
                [gtd_prev, gtd_new]
            break
        step = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                                  bounds=(t + 0.01 * (t - t_prev), t * 10))
        t_prev, f_prev, g_prev, gtd_prev = t, f_new, g_new, gtd_new
        t = step
        f_new, g_new = evaluate(t)
        evals, gtd_new, ls_iter = evals + 1, _dot(g_new, d), ls_iter + 1
    if ls_iter == max_ls:
        bracket, bf, bg, bgtd = [0.0, t], [f, f_new], [g, g_new], [gtd, gtd_new]

    # zoom: shrink the bracket until a point meets both conditions
    insufficient = False
    low, high = (0, 1) if bf[0] <= bf[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bf[0], bgtd[0], bracket[1], bf[1], bgtd[1])
        top, bottom = max(bracket), min(bracket)
        eps = 0.1 * (top - bottom)
        if min(top - t, t - bottom) < eps:  # too close to an end: move inside, once
            if insufficient or t >= top or t <= bottom:
                t = top - eps if abs(t - top) < abs(t - bottom) else bottom + eps
                insufficient = False
            else:
                insufficient = True
        else:
            insufficient = False
        f_new, g_new = evaluate(t)
        evals, gtd_new, ls_iter = evals + 1, _dot(g_new, d), ls_iter + 1
        if f_new > f + c1 * t * gtd or f_new >= bf[low]:
            bracket[high], bf[high], bg[high], bgtd[high] = t, f_new, g_new, gtd_new
            low, high = (0, 1) if bf[0] <= bf[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high] - bracket[low]) >= 0:
                bracket[high], bf[high], bg[high], bgtd[high] = \
                    bracket[low], bf[low], bg[low], bgtd[low]
            bracket[low], bf[low], bg[low], bgtd[low] = t, f_new, g_new, gtd_new
    return bf[low], bg[low], bracket[low], evals


class LBFGS(Optimizer):
    """PyTorch's signature and algorithm; ``step(closure)`` needs the closure, which
    re-evaluates the loss (with its backward) as often as the method asks."""

    def __init__(self, params, lr: float = 1, max_iter: int = 20, max_eval=None,
                 tolerance_grad: float = 1e-7, tolerance_change: float = 1e-9,
                 history_size: int = 100, line_search_fn=None):
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        if line_search_fn not in (None, "strong_wolfe"):
            raise ValueError(f"LBFGS: line_search_fn must be None or 'strong_wolfe', got "
                             f"{line_search_fn!r}")
        super().__init__(params, dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                                      tolerance_grad=tolerance_grad,
                                      tolerance_change=tolerance_change,
                                      history_size=history_size,
                                      line_search_fn=line_search_fn))
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter "
                             "groups), as in PyTorch")
        if len(self.flat_groups[0]) != 1:
            raise ValueError("LBFGS: the parameters must share one device and dtype (its "
                             "direction is one vector over all of them)")
        self.lbfgs_state = {"func_evals": 0, "n_iter": 0}

    @property
    def _flat(self):
        return self.flat_groups[0][0].data

    def _gather_flat_grad(self):
        fg = self.flat_groups[0][0]
        return cat([p.grad.reshape(-1) if p.grad is not None else
                    p.detach().new_zeros(p.numel()) for p in fg.params], 0)

    def _evaluate_at(self, closure, x, t, d):
        """(loss, flat gradient) at x + t d; the parameters are put back to x after."""
        with no_grad():
            self._flat.add_(d * t)
        with enable_grad():
            loss = float(closure())
        grad = self._gather_flat_grad()
        with no_grad():
            self._flat.copy_(x)
        return loss, grad

    def step(self, closure=None):
        if closure is None:
            raise RuntimeError("LBFGS.step needs a closure that re-evaluates the loss "
                               "(zero_grad, forward, backward, return loss), as in PyTorch")
        group = self.param_groups[0]
        lr, max_iter, max_eval = group["lr"], group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        history, line_search = group["history_size"], group["line_search_fn"]
        state = self.lbfgs_state
        self._count_step()

        with enable_grad():
            orig_loss = closure()
        loss = float(orig_loss)
        evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if float(flat_grad.abs().max()) <= tol_grad:
            return orig_loss

        d, t = state.get("d"), state.get("t")
        old_dirs, old_stps, ro = state.get("old_dirs"), state.get("old_stps"), state.get("ro")
        h_diag, prev_flat_grad = state.get("H_diag"), state.get("prev_flat_grad")
        prev_loss = state.get("prev_loss")
        n_iter = 0
        with no_grad():
            while n_iter < max_iter:
                n_iter += 1
                state["n_iter"] += 1
                if state["n_iter"] == 1:
                    d, old_dirs, old_stps, ro, h_diag = -flat_grad, [], [], [], 1.0
                else:
                    y, s = flat_grad - prev_flat_grad, d * t
                    ys = _dot(y, s)
                    if ys > 1e-10:  # keep the pair only where the curvature is positive
                        if len(old_dirs) == history:
                            old_dirs.pop(0), old_stps.pop(0), ro.pop(0)
                        old_dirs.append(y), old_stps.append(s), ro.append(1.0 / ys)
                        h_diag = ys / _dot(y, y)
                    # the two-loop recursion: d = -H g with H built from the pairs
                    q, al = -flat_grad, [0.0] * len(old_dirs)
                    for i in range(len(old_dirs) - 1, -1, -1):
                        al[i] = _dot(old_stps[i], q) * ro[i]
                        q = q - old_dirs[i] * al[i]
                    d = q * h_diag
                    for i in range(len(old_dirs)):
                        d = d + old_stps[i] * (al[i] - _dot(old_dirs[i], d) * ro[i])
                prev_flat_grad, prev_loss = flat_grad.clone(), loss
                t = (min(1.0, 1.0 / float(flat_grad.abs().sum())) * lr
                     if state["n_iter"] == 1 else lr)
                gtd = _dot(flat_grad, d)
                if gtd > -tol_change:  # not a descent direction
                    break
                if line_search == "strong_wolfe":
                    x = self._flat.clone()
                    loss, flat_grad, t, ls_evals = _strong_wolfe(
                        lambda step, x=x, d=d: self._evaluate_at(closure, x, step, d), t, d, loss,
                        flat_grad, gtd)
                    self._flat.add_(d * t)
                else:
                    self._flat.add_(d * t)
                    ls_evals = 0
                    if n_iter != max_iter:  # the last iteration's loss is not needed
                        with enable_grad():
                            loss = float(closure())
                        flat_grad = self._gather_flat_grad()
                        ls_evals = 1
                evals += ls_evals
                state["func_evals"] += ls_evals
                if (n_iter == max_iter or evals >= max_eval
                        or float(flat_grad.abs().max()) <= tol_grad
                        or float((d * t).abs().max()) <= tol_change
                        or abs(loss - prev_loss) < tol_change):
                    break
        state.update(d=d, t=t, old_dirs=old_dirs, old_stps=old_stps, ro=ro, H_diag=h_diag,
                     prev_flat_grad=prev_flat_grad, prev_loss=prev_loss)
        return orig_loss

    def state_dict(self) -> dict:
        out = super().state_dict()
        out["lbfgs"] = {k: ([v.clone() for v in val] if isinstance(val, list) else
                            val.clone() if hasattr(val, "clone") else val)
                        for k, val in self.lbfgs_state.items()}
        return out

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict({k: v for k, v in state.items() if k != "lbfgs"})
        self.lbfgs_state = dict(state.get("lbfgs", {"func_evals": 0, "n_iter": 0}))
