"""The phases of the jobs on the shared links, interned in flat arrays for the link kernel.

The engine recomputes the stretch of every over-subscribed link a start or finish touches,
all of one update in one compiled call (``perf.links_kernel``). Gathering that call's inputs
per (link, job) in Python (dict look-ups, lists of phases, their concatenation) cost about as
much as the kernel itself. Here each distinct phases object on a link of a
given capacity gets a row once: its columns in one pool, its phase count, peak and carried
rate. The engine keeps, per link, the row of each job on it, and one call of
:meth:`PhasePool.factors` gathers the entries inside the kernel, with the arithmetic of
:func:`perf.contention.batch_stretch`: the same factors, bit for bit.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dlcluster_gym.perf.contention import (
    _RTOL,
    MIN_SECTORS_PER_ITERATION,
    LinkPhases,
    _row_table,
)
from dlcluster_gym.perf.geometry import DEFAULT_MAX_SECTORS, DEFAULT_PRECISION_S
from dlcluster_gym.perf.links_kernel import carried, pooled_factors

Factors = tuple[np.ndarray, np.ndarray]
"""(factor per entry, status per link) as :func:`perf.contention.batch_stretch` returns."""


class PhasePool:
    """Rows of (phases, link capacity): columns in ``pool`` (5 x phases, the rows of
    ``LinkPhases.packed``), phase count, peak demand, carried rate and capped peak.

    Rows are never freed; :attr:`full` says when the caller should start a new pool and
    intern the phases still in use (a long run with ever new placement shapes)."""

    def __init__(self, max_rows: int = 1 << 16) -> None:
        _warm()
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
        """The row of ``ph`` on a link of capacity ``cap`` (bytes/s), added if new."""
        return self.rows([ph], [cap])[0]

    def rows(self, phases: Sequence[LinkPhases], caps: Sequence[float]) -> list[int]:
        """The rows of ``phases[i]`` on links of capacity ``caps[i]``, the new ones added
        together: their carried rate is ``(length * minimum(rate, cap)).sum()``, their capped
        peak ``min(peak, cap)``."""
        keys = [(id(ph), c) for ph, c in zip(phases, caps, strict=True)]
        got = [self._index.get(k) for k in keys]
        if None in got:
            self._add(phases, caps, keys, got)
        return got  # type: ignore[return-value]  # every row is set now

    def _add(
        self,
        phases: Sequence[LinkPhases],
        caps: Sequence[float],
        keys: list[tuple[int, float]],
        got: list[int | None],
    ) -> None:
        """Append the rows ``got`` lacks (once per key) and fill them in ``got``."""
        first = row = len(self._objects)
        new: list[LinkPhases] = []
        new_caps: list[float] = []
        for i, key in enumerate(keys):
            if got[i] is None:
                known = self._index.get(key)
                if known is None:
                    known = self._index[key] = row
                    row += 1
                    new.append(phases[i])
                    new_caps.append(caps[i])
                got[i] = known
        while row > self.start.size:
            self._grow_rows()
        counts = [ph.packed.shape[1] for ph in new]
        cols = self._cols + sum(counts)
        while cols > self.pool.shape[1]:
            self.pool = np.concatenate((self.pool, np.zeros_like(self.pool)), axis=1)
        self.pool[:, self._cols : cols] = np.concatenate([ph.packed for ph in new], axis=1)
        self.count[first:row] = counts
        self.start[first:row] = self._cols + np.cumsum(self.count[first:row]) - counts
        self.peak[first:row] = [ph.peak for ph in new]
        self.capped[first:row] = [min(ph.peak, c) for ph, c in zip(new, new_caps, strict=True)]
        self._carry(first, row, new, new_caps)
        self._cols = cols
        self._objects.extend(new)

    def _carry(self, first: int, end: int, new: list[LinkPhases], caps: list[float]) -> None:
        """The carried rates of rows ``first:end`` (compiled where numba is, the same sums)."""
        if carried is not None:
            out = self.carry[first:end]
            carried(self.pool, self.start[first:end], self.count[first:end], np.array(caps), out)
            return
        for r, (ph, c) in enumerate(zip(new, caps, strict=True), start=first):  # pragma: no cover
            self.carry[r] = float((ph.length * np.minimum(ph.rate, c)).sum())

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


_warmed = False


def _warm() -> None:
    """Load the pool's kernels (numba's cache) when the first pool is made, not on the first
    contended link: two jobs over-subscribing one link."""
    global _warmed
    if _warmed or pooled_factors is None:
        return
    _warmed = True
    pool = PhasePool(4)  # _warmed is set: this one does not warm again
    row = pool.intern(LinkPhases(*(np.ones(1) for _ in range(5))), 1.0)
    two = np.ones(2)
    jobs = np.array([0, 1])
    pool.factors(np.array([0, 2]), jobs, np.array([row, row]), np.ones(1), two, two, two, two * 0)
