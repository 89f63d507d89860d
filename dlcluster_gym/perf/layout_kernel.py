"""Compiled unified-circle layout of :func:`perf.contention.link_stretch`.

The engine lays the jobs of every over-subscribed link on their unified circle
(``contention._quantised_layout``: quantum, quantised iteration times, LCM perimeter, and
past the sector cap ``geometry.fit_perimeter``'s best perimeter and divisors). The same set of
iteration times rarely comes back (15 % of 17,881 links on ``philly-1024gpu`` at preset (a)),
so its Python caches mostly missed, and a fit took tens of small numpy calls.
This module computes the same layout in one compiled call (numba) with the same operations,
so the result is identical (``tests/test_layout_kernel.py`` compares both):

- the quantum ``min(5 ms, shortest / 16)`` (coarsened when one time exceeds the cap) and
  ``max(1, floor(t / q + 0.5))`` per time;
- the LCM, stopped once past the cap (only then is its value irrelevant);
- per perimeter ``P <= cap`` the worst error ``max_n min |m - n| / n`` over divisors ``m`` of
  ``P`` in ``[n/2, 2n]`` (``geometry._fit_errors``: comparisons of the same quotients, so
  exact), the first ``P >= 1`` where it is least, and per ``n`` its nearest divisor (then
  the smaller).

Each ``n``'s row of errors is computed once and kept in a table the caller owns
(:class:`RowTable`), in float32 up to a cap of 2048 sectors: only the first perimeter with the
least worst error is used, and the errors ``d / n`` (``n <= 2048``) that differ do so by at
least ``1 / 2048**2 = 2**-22``, far above float32's rounding of values up to 1 (``2**-25``),
so the maxima compare as in float64 and the perimeter is the same, with half the
memory traffic of float64 rows (the engine's table is cold between updates). Without numba
the engine keeps the Python path.
"""

from __future__ import annotations

import math

import numpy as np

from dlcluster_gym.perf import kernel_cache
from dlcluster_gym.perf.kernel_cache import compiled

HAVE_NUMBA = kernel_cache.HAVE_NUMBA


F32_MAX_CAP = 2048
"""Largest sector cap whose error rows are exact enough in float32 (module docstring)."""


class RowTable:
    """Rows of fit errors per quantised iteration length ``n`` at one sector cap: ``rows``
    (slots x (cap + 1), float32 up to :data:`F32_MAX_CAP`), ``slot`` (per ``n``, its row or
    -1) and ``used`` (slots filled). The kernel fills it; when full it starts it over."""

    def __init__(self, cap: int, slots: int = 512) -> None:
        dtype = np.float32 if cap <= F32_MAX_CAP else np.float64
        self.rows = np.empty((slots, cap + 1), dtype=dtype)
        self.slot = np.full(cap + 1, -1, dtype=np.int64)
        self.used = np.zeros(1, dtype=np.int64)


def _fill_row(row: np.ndarray, n: int, cap: int) -> None:
    """``geometry._fit_errors(n, cap)`` into ``row``."""
    row[:] = np.inf
    lo = max(1, -(-n // 2))
    hi = min(cap, 2 * n)
    for m in range(lo, hi + 1):
        e = abs(m - n) / n
        for p in range(m, cap + 1, m):
            if e < row[p]:
                row[p] = e


def _quantise(times: np.ndarray, q: float) -> np.ndarray:
    """``max(1, floor(t / q + 0.5))`` per time."""
    ns = np.empty(times.size, dtype=np.int64)
    for j in range(times.size):
        x = math.floor(times[j] / q + 0.5)
        ns[j] = x if x > 1 else 1
    return ns


def _divisors(p: int) -> np.ndarray:
    """The divisors of ``p``, ascending."""
    root = int(math.sqrt(p)) + 2
    small = np.empty(root, dtype=np.int64)
    large = np.empty(root, dtype=np.int64)
    a = b = 0
    d = 1
    while d * d <= p:
        if p % d == 0:
            small[a] = d
            a += 1
            if d * d != p:
                large[b] = p // d
                b += 1
        d += 1
    out = np.empty(a + b, dtype=np.int64)
    out[:a] = small[:a]
    for i in range(b):
        out[a + i] = large[b - 1 - i]
    return out


def _nearest_divisor(divisors: np.ndarray, p: int, n: int) -> int:
    """``fit_perimeter``'s choice for ``n``: the divisor of ``p`` in ``[n/2, 2n]`` nearest
    ``n``, then the smaller (``divisors``: those of ``p``, ascending)."""
    lo, hi = max(1, -(-n // 2)), min(p, 2 * n)
    i = np.searchsorted(divisors, n, side="right")
    below = divisors[i - 1] if i > 0 and divisors[i - 1] >= lo else -1
    above = divisors[i] if i < divisors.size and divisors[i] <= hi else -1
    if below < 0 or (above >= 0 and above - n < n - below):
        return above
    return below


def _layout(
    times: np.ndarray,
    max_sectors: int,
    precision_s: float,
    min_sectors: int,
    rows: np.ndarray,
    slot: np.ndarray,
    used: np.ndarray,
) -> tuple[float, int, np.ndarray]:
    """(seconds per sector, perimeter in sectors, each time's sectors) of the unified circle
    of ``times`` (``contention._quantised_layout``); ``rows``/``slot``/``used``: a
    :class:`RowTable` of ``max_sectors``. A perimeter of -1: not done here (a length past
    the cap or more lengths than the table holds). No times: an empty circle of one sector
    at ``precision_s``, as the numpy path gives."""
    if times.size == 0:
        return precision_s, 1, np.zeros(0, dtype=np.int64)
    shortest = times[0]
    for j in range(times.size):
        if times[j] < shortest:
            shortest = times[j]
    q = shortest / min_sectors
    if not q < precision_s:
        q = precision_s
    ns = _quantise(times, q)
    top = ns.max()
    if top > max_sectors:  # one iteration alone is longer than the cap
        q *= math.ceil(top / max_sectors)
        ns = _quantise(times, q)
    perimeter = 1
    for j in range(ns.size):
        n = ns[j]
        perimeter = perimeter // math.gcd(perimeter, n) * n
        if perimeter > max_sectors:
            break
    if perimeter <= max_sectors:
        return q, perimeter, ns
    distinct = np.unique(ns)
    if distinct[-1] > max_sectors or distinct.size > rows.shape[0]:
        return q, -1, ns  # outside the table: the caller's Python path
    if used[0] + distinct.size > rows.shape[0]:  # the table is full: start it over
        slot[:] = -1
        used[0] = 0
    worst = np.zeros_like(rows[0])
    for n in distinct:
        s = slot[n]
        if s < 0:
            s = used[0]
            used[0] += 1
            slot[n] = s
            _fill_row(rows[s], n, max_sectors)
        row = rows[s]
        for p in range(max_sectors + 1):  # rows hold no NaN: a plain max
            r = row[p]
            w = worst[p]
            worst[p] = r if r > w else w
    best = 1
    for p in range(2, max_sectors + 1):
        if worst[p] < worst[best]:
            best = p
    divisors = _divisors(best)
    fitted = np.empty(ns.size, dtype=np.int64)
    for j in range(ns.size):
        fitted[j] = _nearest_divisor(divisors, best, ns[j])
    return q, best, fitted


if HAVE_NUMBA:
    _fill_row = compiled(_fill_row)
    _quantise = compiled(_quantise)
    _divisors = compiled(_divisors, numpy_errors=False)
    _nearest_divisor = compiled(_nearest_divisor, numpy_errors=False)
    layout = compiled(_layout)
else:  # pragma: no cover
    layout = None

_warm = False


def warm() -> None:
    """Load (or compile, the first time on a machine) the kernel now (numba's cache), not on
    the first contended link. Called with :func:`perf.stretch_kernel.warm`."""
    global _warm
    if _warm or layout is None:
        return
    _warm = True
    table = RowTable(8, slots=4)
    layout(np.array([0.3, 0.7]), 8, 0.005, 16, table.rows, table.slot, table.used)
