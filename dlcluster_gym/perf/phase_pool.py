"""The phases of the jobs on the shared links, interned in flat arrays for the link kernel.

The engine recomputes the stretch of every over-subscribed link a start or finish touches,
all of one update in one compiled call (``perf.links_kernel``). Gathering that call's inputs
per (link, job) in Python (dict look-ups, lists of phases, their concatenation) cost about as
much as the kernel itself (issue #15 Speed). Here each distinct phases object on a link of a
given capacity gets a row once: its columns in one pool, its phase count, peak and carried
rate. The engine keeps, per link, the row of each job on it, and one call of
:meth:`PhasePool.factors` gathers the entries inside the kernel, with the arithmetic of
:func:`perf.contention.batch_stretch`: the same factors, bit for bit.
"""

from __future__ import annotations

import numpy as np

from dlcluster_gym.perf.contention import (
    _RTOL,
    MIN_SECTORS_PER_ITERATION,
    LinkPhases,
    _row_table,
)
from dlcluster_gym.perf.geometry import DEFAULT_MAX_SECTORS, DEFAULT_PRECISION_S
from dlcluster_gym.perf.links_kernel import pooled_factors

Factors = tuple[np.ndarray, np.ndarray]
"""(factor per entry, status per link) as :func:`perf.contention.batch_stretch` returns."""


class PhasePool:
    """Rows of (phases, link capacity): columns in ``pool`` (5 x phases, the rows of
    ``LinkPhases.packed``), phase count, peak demand, carried rate and capped peak.

    Rows are never freed; :attr:`full` says when the caller should start a new pool and
    intern the phases still in use (a long run with ever new placement shapes)."""

    def __init__(self, max_rows: int = 1 << 16) -> None:
        self.max_rows = max_rows
        self._index: dict[tuple[int, float], int] = {}
        self._objects: list[LinkPhases] = []  # keeps each interned object (and its id) alive
        self.start = np.zeros(64, dtype=np.int64)
        self.count = np.zeros(64, dtype=np.int64)
        self.peak = np.zeros(64)
        self.carry = np.zeros(64)
        self.capped = np.zeros(64)
        self.pool = np.zeros((5, 256))
        self._cols = 0

    @property
    def full(self) -> bool:
        """Whether the pool holds ``max_rows`` rows."""
        return len(self._objects) >= self.max_rows

    def intern(self, ph: LinkPhases, cap: float) -> int:
        """The row of ``ph`` on a link of capacity ``cap`` (bytes/s), added if new; its carried
        rate is ``(length * minimum(rate, cap)).sum()``, its capped peak ``min(peak, cap)``."""
        key = (id(ph), cap)
        row = self._index.get(key)
        if row is None:
            row = self._index[key] = self._add(ph, cap)
        return row

    def _add(self, ph: LinkPhases, cap: float) -> int:
        row = len(self._objects)
        k = ph.packed.shape[1]
        if row == self.start.size:
            self._grow_rows()
        while self._cols + k > self.pool.shape[1]:
            self.pool = np.concatenate((self.pool, np.zeros_like(self.pool)), axis=1)
        self.pool[:, self._cols : self._cols + k] = ph.packed
        self.start[row] = self._cols
        self.count[row] = k
        self.peak[row] = ph.peak
        self.carry[row] = float((ph.length * np.minimum(ph.rate, cap)).sum())
        self.capped[row] = min(ph.peak, cap)
        self._cols += k
        self._objects.append(ph)
        return row

    def _grow_rows(self) -> None:
        n = self.start.size
        for name in ("start", "count", "peak", "carry", "capped"):
            old = getattr(self, name)
            new = np.zeros(2 * n, dtype=old.dtype)
            new[:n] = old
            setattr(self, name, new)

    def factors(
        self,
        bounds: np.ndarray,
        jobs: np.ndarray,
        rows: np.ndarray,
        capacity_Bps: np.ndarray,
        compute_s: np.ndarray,
        comm_s: np.ndarray,
        up_s: np.ndarray,
        shift_s: np.ndarray,
    ) -> Factors | None:
        """:func:`perf.contention.batch_stretch` of a batch of links, entry ``i`` being job
        ``jobs[i]`` (an index into the per-job arrays ``compute_s`` .. ``shift_s``) with the
        phases of row ``rows[i]``; link ``l``'s entries are ``bounds[l]:bounds[l + 1]``, its
        capacity ``capacity_Bps[l]``. None without numba."""
        if pooled_factors is None:
            return None
        table = _row_table(DEFAULT_MAX_SECTORS)
        return pooled_factors(
            bounds, jobs, rows, capacity_Bps, compute_s, comm_s, up_s, shift_s, self.start,
            self.count, self.peak, self.carry, self.pool, table.rows, table.slot, table.used,
            DEFAULT_MAX_SECTORS, DEFAULT_PRECISION_S, MIN_SECTORS_PER_ITERATION, _RTOL,
        )  # fmt: skip
