"""L-BFGS whose whole state is a handful of arrays, so that a run resumes exactly.

scipy's ``minimize(method="L-BFGS-B")`` keeps its state inside Fortran
work arrays: a run cut at iteration 40 of 100 has to start again from its
last point, with an empty curvature memory, and does not reach the same
model. Here one iteration is a pure function of :class:`LBFGSState` (the
point, its value and gradient, the last ``memory`` pairs ``s = x' - x``,
``y = g' - g``, counters): saving the state after an iteration and
loading it later gives, iteration for iteration, the same run.

Direction: the two-loop recursion (Nocedal & Wright, Algorithm 7.4) with
``H0 = (s.y / y.y) I`` of the newest pair; the first step and the step
after a reset go along ``-g / max(1, ||g||)`` so that a unit step is never
longer than 1. Step length: scipy's strong-Wolfe line search
(:func:`scipy.optimize.line_search`, Algorithms 3.5-3.6 of Nocedal &
Wright, ``c1 = 1e-4``, ``c2 = 0.9``, first trial step 1): a tested
implementation that only ever asks for ``f`` and ``g`` at the same trial
points, so with the two memoized every trial costs one evaluation (one
pass over the data for the streamed learner). It is deterministic, which
the exact resume needs. Pairs with ``s.y <= 1e-10 y.y`` (no positive
curvature measured) are not stored. When the line search fails along the
quasi-Newton direction, the memory is dropped and the steepest-descent
step tried; when that fails too, the run is at the precision of ``f``
(:func:`lbfgs_iteration` returns ``ok=False``).
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
from scipy.optimize import line_search

from ._config import jit_started

# the relative decrease below which progress has stalled: scikit-learn's ftol for L-BFGS
FTOL = 64 * np.finfo(float).eps


@dataclass
class LBFGSState:
    """Where an L-BFGS run is: enough to continue it exactly.

    Attributes
    ----------
    x, g : ndarray (n,) float64
        The point and the gradient there.
    f : float
    info : dict
        What the objective returned beside ``(f, g)`` at ``x`` (JSON-able numbers).
    s, y : list of ndarray
        Curvature pairs, oldest first.
    sy, yy : list of float
        ``s.y`` and ``y.y`` of each pair, computed once when the pair is stored
        (the direction needs them at every iteration; recomputing them would
        read the whole memory once more).
    n_iter, n_evals : int
        Iterations done; objective evaluations spent (the first one included).
    """

    x: np.ndarray
    f: float
    g: np.ndarray
    info: dict = field(default_factory=dict)
    s: list = field(default_factory=list)
    y: list = field(default_factory=list)
    sy: list = field(default_factory=list)
    yy: list = field(default_factory=list)
    n_iter: int = 0
    n_evals: int = 1

    def to_arrays(self) -> tuple[dict, dict]:
        """``(arrays, scalars)``: the state as float64 arrays and JSON values (exact round trip)."""
        arrays = {"x": self.x, "g": self.g}
        if self.s:
            arrays["s"] = np.stack(self.s)
            arrays["y"] = np.stack(self.y)
            arrays["sy"] = np.asarray(self.sy, dtype=np.float64)
            arrays["yy"] = np.asarray(self.yy, dtype=np.float64)
        return arrays, {"f": float(self.f), "info": dict(self.info), "n_iter": int(self.n_iter),
                        "n_evals": int(self.n_evals), "pairs": len(self.s)}

    @classmethod
    def from_arrays(cls, arrays, scalars: dict) -> "LBFGSState":
        pairs = int(scalars["pairs"])
        s = [np.array(v) for v in arrays["s"]] if pairs else []
        y = [np.array(v) for v in arrays["y"]] if pairs else []
        if pairs and "sy" in arrays:
            sy, yy = [float(v) for v in arrays["sy"]], [float(v) for v in arrays["yy"]]
        else:   # the same products as when the pairs were stored
            sy, yy = _products(s, y)
        return cls(x=np.array(arrays["x"]), f=float(scalars["f"]), g=np.array(arrays["g"]),
                   info=dict(scalars["info"]), s=s, y=y, sy=sy, yy=yy, n_iter=int(scalars["n_iter"]),
                   n_evals=int(scalars["n_evals"]))


def _products(s, y) -> tuple[list, list]:
    """``s.y`` and ``y.y`` of every pair, as :func:`lbfgs_iteration` computes them."""
    return [float(np.dot(si, yi)) for si, yi in zip(s, y)], [float(np.dot(yi, yi)) for yi in y]


def lbfgs_start(fun, x0) -> LBFGSState:
    """The state at ``x0``: one evaluation of ``fun(x) -> (f, g, info)``."""
    x0 = np.array(x0, dtype=np.float64)
    f, g, info = fun(x0)
    return LBFGSState(x=x0, f=float(f), g=np.asarray(g, dtype=np.float64), info=dict(info))


def lbfgs_direction(g, s, y, sy=None, yy=None) -> np.ndarray:
    """``-H g`` by the two-loop recursion over the pairs ``(s, y)`` (oldest first).

    ``sy``, ``yy``: the products ``s.y`` and ``y.y`` of the pairs when known
    (:class:`LBFGSState` keeps them), else computed here.
    """
    g = np.asarray(g, dtype=np.float64)
    if not s:
        return -g / max(1.0, float(np.linalg.norm(g)))
    if sy is None or yy is None:
        sy, yy = _products(s, y)
    # The updates q -= a y, r += a s in place, rounded as those expressions round (the product, then
    # the sum): the vectors are long (k x D coefficients) and the pairs many, so every pass through
    # memory counts. With numba's JIT running, one fused pass each (kernels/vector.py); else numpy's
    # two, through one scratch vector instead of a fresh temporary per update. The same numbers.
    q = np.array(g, dtype=np.float64, order="C")
    if jit_started() and all(v.dtype == np.float64 for v in (*s, *y)):
        from ._kernels.vector import add_scaled, sub_scaled
    else:
        tmp = np.empty_like(q)

        def sub_scaled(q, a, v):
            np.subtract(q, np.multiply(v, a, out=tmp), out=q)

        def add_scaled(q, a, v):
            np.add(q, np.multiply(v, a, out=tmp), out=q)
    rho = [1.0 / v for v in sy]
    alpha = [0.0] * len(s)
    for i in range(len(s) - 1, -1, -1):
        alpha[i] = rho[i] * float(np.dot(s[i], q))
        sub_scaled(q, alpha[i], y[i])
    gamma = sy[-1] / yy[-1]
    r = np.multiply(q, gamma, out=q)
    for i in range(len(s)):
        beta = rho[i] * float(np.dot(y[i], r))
        add_scaled(r, alpha[i] - beta, s[i])
    return np.negative(r, out=r)


def _line_search(fun, state: LBFGSState, p: np.ndarray, c1: float, c2: float, max_ls: int):
    # scipy's search, run on the step length itself: a one-variable problem at 0 along direction 1,
    # whose value and slope at ``a`` are f(x + a p) and g(x + a p).p. scipy's own arithmetic on it is
    # exact (0 + a * 1 = a, a dot with [1.0] is the slope itself), so every trial step, comparison and
    # interpolation is the one it makes on the full vectors, and the point x + a p is formed once per
    # trial (scipy would form it for the value and again for the gradient, and compare every request
    # with the points seen). Two steps can round to one point: those share one evaluation, as before.
    trials: dict = {}
    seen: list = []

    def at(a):
        a = a[0]
        out = trials.get(a)
        if out is None:
            x = state.x + a * p
            for xs, o in seen:
                if np.array_equal(xs, x):
                    out = (x, *o[1:])
                    break
            else:
                f, g, info = fun(x)
                g = np.asarray(g, dtype=np.float64)
                out = (x, float(f), g, dict(info), np.array([np.dot(g, p)]))
                seen.append((x, out))
            trials[a] = out
        return out

    with warnings.catch_warnings():
        # scipy warns when it gives up; the caller handles a failed search
        warnings.filterwarnings("ignore", message="The line search algorithm did not converge",
                                category=RuntimeWarning)
        out = line_search(lambda a: at(a)[1], lambda a: at(a)[4], np.zeros(1), np.ones(1),
                          gfk=np.array([np.dot(state.g, p)]), old_fval=state.f, c1=c1, c2=c2, maxiter=max_ls)
    alpha = out[0]
    if alpha is None or not np.isfinite(alpha) or alpha <= 0:
        return None, len(seen)
    x, f, g, info, _ = at(np.array([alpha]))
    return (x, f, g, info), len(seen)


def _backtrack(fun, state: LBFGSState, p: np.ndarray, c1: float, shrink: float = 0.01, tries: int = 12):
    """Steps ``shrink**k`` along ``p`` (k = 1..tries) until one lowers ``f`` enough (Armijo): the fallback
    when the Wolfe search found no step, as on features of size 1e6, whose curvature makes every step it
    tries (from 1) land far past the minimum. ``((x, f, g, info) or None, evaluations)``."""
    slope = float(np.dot(state.g, p))
    if not slope < 0:
        return None, 0
    for k in range(1, tries + 1):
        a = shrink ** k
        x = state.x + a * p
        f, g, info = fun(x)
        if np.isfinite(f) and f <= state.f + c1 * a * slope:
            return (x, float(f), np.asarray(g, dtype=np.float64), dict(info)), k
    return None, tries


def lbfgs_iteration(fun, state: LBFGSState, *, memory: int = 10, c1: float = 1e-4, c2: float = 0.9,
                    max_ls: int = 20) -> tuple[LBFGSState, bool]:
    """One iteration from ``state``: ``(new state, ok)``.

    ``fun(x) -> (f, g, info)`` evaluates the objective. ``ok`` is False when
    no step satisfying the Wolfe conditions was found even along ``-g``
    (the returned state is then ``state`` with its evaluations counted).
    The input state is not modified.
    """
    s, y = list(state.s), list(state.y)
    sy, yy = (list(state.sy), list(state.yy)) if len(state.sy) == len(s) else _products(s, y)
    evals = state.n_evals
    p = lbfgs_direction(state.g, s, y, sy, yy)
    if s and not float(np.dot(p, state.g)) < 0:   # not a descent direction: round-off; start afresh
        s, y, sy, yy = [], [], [], []
        p = lbfgs_direction(state.g, s, y)
    found, used = _line_search(fun, state, p, c1, c2, max_ls)
    evals += used
    if found is None and s:
        s, y, sy, yy = [], [], [], []
        found, used = _line_search(fun, state, lbfgs_direction(state.g, s, y), c1, c2, max_ls)
        evals += used
    if found is None and state.n_iter == 0:
        # the Wolfe search failed on the first iteration even along -g: its first trial step is far too long
        # (badly scaled data). Later on a failed search means float precision is reached: the fit stops there
        found, used = _backtrack(fun, state, lbfgs_direction(state.g, [], []), c1)
        evals += used
    if found is None:
        return LBFGSState(x=state.x, f=state.f, g=state.g, info=state.info, s=list(state.s), y=list(state.y),
                          sy=list(state.sy), yy=list(state.yy), n_iter=state.n_iter, n_evals=evals), False
    x, f, g, info = found
    sk, yk = x - state.x, g - state.g
    (sky,), (yky,) = _products([sk], [yk])
    if sky > 1e-10 * yky:
        s.append(sk)
        y.append(yk)
        sy.append(sky)
        yy.append(yky)
        del s[:-memory], y[:-memory], sy[:-memory], yy[:-memory]
    return LBFGSState(x=x, f=f, g=g, info=info, s=s, y=y, sy=sy, yy=yy, n_iter=state.n_iter + 1,
                      n_evals=evals), True


def stalled(f_old: float, f_new: float) -> bool:
    """True when ``f`` fell by less than :data:`FTOL` relative: no progress left at float64 precision."""
    return (f_old - f_new) <= FTOL * max(abs(f_old), abs(f_new), 1.0)


__all__ = ["FTOL", "LBFGSState", "lbfgs_direction", "lbfgs_iteration", "lbfgs_start", "stalled"]
