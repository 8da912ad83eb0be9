"""The Bayes stopper's posterior over a job's hypotheses after its first n evals.

Under hypothesis h the evals are y = Phi_h beta + noise (variance ``var`` each), with a
Gaussian prior N(m0, S0) on the linear coefficients beta: Bayesian linear regression
gives each hypothesis its evidence (its posterior weight) and its posterior mean curve,
in closed form.  Two ways to compute them, which agree to rounding:

* **Tabled** (:class:`Prefix`, :func:`prefixes`): for short runs, every prefix's maps
  from y to the whitened residual and to the mean curve are built at construction, so
  a decision is a few matrix-vector products.  The tables grow about as K**3 (64 MB at
  K = 20, 2.1 GB at 100), so they serve runs of at most :data:`TABLED_CHECKPOINTS`.
* **From moments** (:class:`Moments`): for longer runs, each decision forms the
  sufficient statistics Phi_n^T Phi_n and Phi_n^T (y - Phi_n m0) of the n evals and
  solves a d x d system per hypothesis (d <= 3): O(H n d) time and O(H K d^2) memory.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

try:  # np.einsum without ``optimize`` returns this C function's result: called directly, the
    # posterior skips the Python wrapper (same function, same bits)
    from numpy._core.multiarray import c_einsum as einsum
except ImportError:  # pragma: no cover - numpy 1.x
    einsum = np.einsum

from .families import Family

#: The log-likelihood's factor, as a 0-d array: an operand NumPy takes without converting it.
MINUS_HALF = np.array(-0.5)
MINUS_HALF.flags.writeable = False

#: Longest run (in checkpoints) whose posterior maps are tabled at construction: every
#: suite task has 20, whose tables take 64 MB.  Longer runs are served from moments.
TABLED_CHECKPOINTS = 20


@dataclass
class Prefix:
    """What the posterior after n evals needs that does not depend on the evals.

    With L L^T = C the prior covariance of the first n evals under hypothesis h
    and r = y - their prior mean, the whitened residual z = L^-1 r gives the
    evidence (|z|^2) and the posterior mean curve (Phi S0 Phi_n^T L^-T z).  Both
    are affine in y, so each is one matrix-vector product over all hypotheses.
    """

    whiten: np.ndarray  # (H * n, n): rows of L_h^-1, stacked
    whiten_offset: np.ndarray  # (H, n): L_h^-1 (prior mean)
    log_norm: np.ndarray  # (H,) log prior weight - 1/2 log det C
    curve: np.ndarray  # (H * K, n): y -> posterior mean curve (linear part)
    curve_offset: np.ndarray  # (H, K): posterior mean curve at y = 0
    #: (K * H, n): ``curve`` checkpoint-major, so a contiguous slice of rows dotted with y
    #: gives the mean at a few checkpoints in one BLAS call (the rows of ``curve @ y`` in
    #: another order, which BLAS may round otherwise)
    by_checkpoint: np.ndarray
    by_checkpoint_offset: np.ndarray  # (K, H): ``curve_offset`` transposed
    size: float  # bounds |posterior mean| / (1 + max |y|): largest row sum of |curve| and offset
    #: By best checkpoint b < n: ((2 H, n), (2, H)): y -> the posterior mean at checkpoint n
    #: and its excess over checkpoint b's (the shortcut's first step; empty at n = K)
    next_step: list[tuple[np.ndarray, np.ndarray]]


def prefixes(fam: Family, var: float) -> list[Prefix | None]:
    """Every prefix's :class:`Prefix` of ``fam`` (index n: after n evals; 0 is None)."""
    h, k, _ = fam.phi.shape
    if fam.m0.ndim == 1:
        base = fam.phi @ fam.m0  # (H, K)
    else:
        base = np.einsum("hkd,hd->hk", fam.phi, fam.m0)
    cross = fam.phi @ fam.s0  # (H, K, d); (H, K, d) @ (H, d, d) pairs hypotheses
    out: list[Prefix | None] = [None]
    for n in range(1, k + 1):
        phi_n = fam.phi[:, :n, :]
        cov = cross[:, :n, :] @ phi_n.transpose(0, 2, 1) + var * np.eye(n)  # (H, n, n)
        chol = np.linalg.cholesky(cov)
        whiten = np.linalg.inv(chol)
        logdet = 2 * np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(axis=1)
        gain = cross @ phi_n.transpose(0, 2, 1) @ whiten.transpose(0, 2, 1)  # (H, K, n)
        curve = gain @ whiten  # (H, K, n)
        offset = np.einsum("hij,hj->hi", whiten, base[:, :n])
        curve_offset = base - np.einsum("hkn,hn->hk", gain, offset)
        out.append(
            Prefix(
                whiten.reshape(h * n, n),
                offset,
                fam.log_w - 0.5 * logdet,
                curve.reshape(h * k, n),
                curve_offset,
                np.ascontiguousarray(curve.transpose(1, 0, 2)).reshape(k * h, n),
                np.ascontiguousarray(curve_offset.T),
                float(np.abs(curve).sum(axis=2).max() + np.abs(curve_offset).max()),
                [
                    (
                        np.concatenate([curve[:, n], curve[:, n] - curve[:, b]]),
                        np.stack([curve_offset[:, n], curve_offset[:, n] - curve_offset[:, b]]),
                    )
                    for b in range(n if n < k else 0)
                ],
            )
        )
    return out


def normalised(w: np.ndarray) -> np.ndarray:
    """``exp(w - w.max())`` normalised to sum 1, in place (``w``: log weights, (H,))."""
    # Reduced into a 0-d array, a maximum or a sum is an operand as it is: no NumPy
    # scalar is made and converted back to an array for the next call.
    reduced = np.empty(())
    w -= np.maximum.reduce(w, out=reduced)
    np.exp(w, out=w)
    w /= np.add.reduce(w, out=reduced)
    return w


def tabled_weights(pre: Prefix, y: np.ndarray) -> np.ndarray:
    """Posterior weights (H,) after the evals ``y`` (float array).

    In place where the floats allow it: the bits of ``exp(log_w - log_w.max())``
    normalised, with ``log_w = log_norm - 0.5 |z|^2`` (scaling by -0.5 is exact,
    and a - b is a + (-b)), in fewer allocations and no Python-level wrappers
    (``ndarray.dot`` makes the BLAS call of ``@``, the same gemv on the same operands,
    without the generalised ufunc's dispatch around it).
    """
    z = pre.whiten.dot(y).reshape(pre.whiten_offset.shape)
    np.subtract(z, pre.whiten_offset, out=z)
    w = einsum("hn,hn->h", z, z)
    w *= MINUS_HALF
    w += pre.log_norm
    return normalised(w)


def tabled_means(pre: Prefix, y: np.ndarray) -> np.ndarray:
    """Posterior mean curves (H, K) after the evals ``y`` (float array)."""
    return pre.curve.dot(y).reshape(pre.curve_offset.shape) + pre.curve_offset


class Moments:
    """The posterior of one family after any number of evals, from sufficient statistics.

    With r = y - Phi_n m0 the residual from the prior mean, A = Phi_n^T Phi_n, u = Phi_n^T r
    and M = I + S0 A / var, the posterior mean of the coefficients is m0 + v with
    v = M^-1 S0 u / var, and, by Woodbury and the determinant lemma, the evidence's
    quadratic form is (|r|^2 - u.v) / var and its log-determinant n log var + log det M
    (M's eigenvalues are >= 1, so it is well conditioned even where S0 is singular).
    Only the family's bases (H, K, d), prior mean curves (H, K) and their running sums
    over the checkpoints (and those of the bases' outer products, which give A) are kept.
    """

    def __init__(self, fam: Family, var: float) -> None:
        """Keep the bases and the prior of ``fam``; ``var``: the eval variance assumed."""
        h, k, d = fam.phi.shape
        self.phi = np.ascontiguousarray(fam.phi)
        self.m0 = np.broadcast_to(fam.m0, (h, d))
        self.s0 = np.broadcast_to(fam.s0, (h, d, d))
        self.base = einsum("hkd,hd->hk", self.phi, self.m0)  # (H, K): the prior mean curves
        self.log_w = fam.log_w
        self.var = float(var)
        # Running sums over the checkpoints, for the mean over a block of them.
        self.base_sums = np.zeros((h, k + 1))
        np.cumsum(self.base, axis=1, out=self.base_sums[:, 1:])
        self.phi_sums = np.zeros((h, k + 1, d))
        np.cumsum(self.phi, axis=1, out=self.phi_sums[:, 1:])
        # Phi_n^T Phi_n for every n, as running sums of each checkpoint's outer product (its
        # upper triangle: d (d + 1) / 2 numbers), so a decision reads A instead of forming it.
        self._upper = np.triu_indices(d)
        i, j = self._upper
        self.gram_sums = np.zeros((h, k + 1, len(i)))
        for c in range(len(i)):  # a pair at a time: no (H, K, d (d + 1) / 2) temporary
            np.cumsum(
                self.phi[:, :, i[c]] * self.phi[:, :, j[c]], axis=1, out=self.gram_sums[:, 1:, c]
            )

    def coefficients(self, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Posterior weights (H,) and the coefficients' posterior shift v (H, d) after ``y``."""
        n = len(y)
        phi_t = self.phi[:, :n, :].transpose(0, 2, 1)  # (H, d, n)
        r = y - self.base[:, :n]  # (H, n)
        u = np.matmul(phi_t, r[:, :, None])[:, :, 0]
        i, j = self._upper
        a = np.empty(self.s0.shape)
        a[:, i, j] = a[:, j, i] = self.gram_sums[:, n]
        m = np.matmul(self.s0, a)
        m /= self.var
        m += np.eye(a.shape[1])
        v = np.linalg.solve(m, np.matmul(self.s0, u[:, :, None]))[:, :, 0]
        v /= self.var
        _, logdet = np.linalg.slogdet(m)
        quad = (einsum("hn,hn->h", r, r) - einsum("hd,hd->h", u, v)) / self.var
        return normalised(self.log_w - 0.5 * (logdet + quad)), v

    def means(self, v: np.ndarray) -> np.ndarray:
        """Posterior mean curves (H, K) of every hypothesis, given their shifts ``v``."""
        return self.base + einsum("hkd,hd->hk", self.phi, v)

    def at(self, v: np.ndarray, rows: np.ndarray | None, cols: np.ndarray) -> np.ndarray:
        """Posterior means (h, c) of the hypotheses ``rows`` (None: all) at checkpoints ``cols``.

        Each is the element of :meth:`means` there, computed alone.
        """
        if rows is None:
            return self.base[:, cols] + einsum("hkd,hd->hk", self.phi[:, cols], v)
        rc = np.ix_(rows, cols)
        return self.base[rc] + einsum("hkd,hd->hk", self.phi[rc], v.take(rows, axis=0))

    def block_means(
        self, v: np.ndarray, rows: np.ndarray | None, lo: np.ndarray, hi: np.ndarray
    ) -> np.ndarray:
        """Posterior means (h, c) of ``rows`` averaged over checkpoints lo[i] .. hi[i] - 1."""
        r = slice(None) if rows is None else rows[:, None]
        size = hi - lo
        base = (self.base_sums[r, hi] - self.base_sums[r, lo]) / size
        phi = (self.phi_sums[r, hi] - self.phi_sums[r, lo]) / size[:, None]
        return base + einsum("hkd,hd->hk", phi, v if rows is None else v.take(rows, axis=0))
