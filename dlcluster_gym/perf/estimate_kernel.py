"""Compiled keyed means of :mod:`sim.estimators` (``keyed_length``, ``keyed_remaining_work``).

Both estimates take, for each job, the first of its key windows (``KEY_WINDOW`` latest finished
lengths per key, most specific key first) that holds a qualifying length, and average those.
In numpy that is about 30 small array calls per batch of jobs, whatever its size; the
Scheduler env asks for it at every decision instant (the running jobs' work done moves), so
the calls' overhead, not the arithmetic, was a fifth of an env step. This kernel runs the
same selection as one compiled loop, **operation for operation** as numpy performs it, so
results are bit-identical (``tests/test_keyed_kernel.py`` compares both):

- a window's total is ``np.where(take, w, 0.0).sum()`` over its ``KEY_WINDOW`` entries:
  numpy's pairwise summation added to 0.0 (``stretch_kernel._row_sum``);
- the mean divides that total by the count, as ``total / np.maximum(n, 1)`` does.

Without numba (``HAVE_NUMBA`` false) ``keyed`` is None and the estimators keep their numpy
path.
"""

from __future__ import annotations

import math

import numpy as np

from dlcluster_gym.perf import kernel_cache, stretch_kernel
from dlcluster_gym.perf.kernel_cache import compiled

HAVE_NUMBA = kernel_cache.HAVE_NUMBA


def _keyed_one(
    ring: np.ndarray, rows: np.ndarray, i: int, work: float, by_work: bool, buf: np.ndarray
) -> tuple[float, int, int]:
    """Job ``i`` of :func:`_keyed`: (mean, count, level); ``buf`` is scratch of the ring's
    width."""
    levels = rows.shape[1]
    width = ring.shape[1]
    for lv in range(levels):
        r = rows[i, lv]
        if r < 0:
            continue
        n = 0
        for k in range(width):
            v = ring[r, k]
            take = v > work if by_work else v == v
            if take:
                buf[k] = v
                n += 1
            else:
                buf[k] = 0.0
        if n > 0:
            return stretch_kernel._row_sum(buf, width) / n, n, lv
    return np.nan, 0, levels


def _keyed(
    ring: np.ndarray,
    rows: np.ndarray,
    work: np.ndarray,
    by_work: bool,
    mean: np.ndarray,
    count: np.ndarray,
    level: np.ndarray,
) -> None:
    """For each job ``i``: its first key level ``l`` (``rows[i, l] >= 0``, a row of ``ring``)
    with a qualifying length (``by_work``: longer than ``work[i]``; else any, NaN never
    qualifies), the mean of those lengths (``mean``), how many (``count``) and ``l``
    (``level``); NaN, 0 and ``rows.shape[1]`` where no level has one."""
    buf = np.empty(ring.shape[1])
    for i in range(rows.shape[0]):
        mean[i], count[i], level[i] = _keyed_one(ring, rows, i, work[i], by_work, buf)


def at_least_zero(x: float) -> float:
    """``np.maximum(x, 0.0)`` of one value: NaN stays NaN, and -0.0 gives +0.0 as numpy's."""
    return x if (x > 0.0 or x != x) else 0.0


def at_most_one(x: float) -> float:
    """``np.minimum(x, 1.0)`` of one value (NaN stays NaN)."""
    return x if (x <= 1.0 or x != x) else 1.0


def _log_scale(x: float, unit: float, top: float) -> float:
    """``np.minimum(numerics.log1p(np.maximum(x, 0.0) / unit) / top, 1.0)`` of one value, with
    numpy's NaN and signed-zero rules (``math.log1p`` compiles to the C library's, as
    ``numerics.log1p`` calls)."""
    return at_most_one(math.log1p(at_least_zero(x) / unit) / top)


def _history_row(
    ring: np.ndarray,
    rows: np.ndarray,
    i: int,
    j: int,
    work: float,
    gpus: float,
    att: float,
    fresh: bool,
    units: np.ndarray,
    top: int,
    window: int,
    out: np.ndarray,
    buf: np.ndarray,
) -> None:
    """The estimate columns of ``envs.queue_obs.HISTORY_FEATURES`` of job ``j`` (its key rows
    ``rows[i]``) into ``out[j]``, as ``QueueObserver._history_rows``'s numpy form computes
    them: the remaining-work estimate (``work`` done, ``gpus``, ``att``ained GPU-seconds where
    the estimate is unknown), and where ``fresh`` the expected length, its key level and
    support. ``units``: (hour, log scale of time, of work)."""
    mean, _, _ = _keyed_one(ring, rows, i, work, True, buf)
    rem = mean - work
    known = rem == rem
    out[j, 0] = _log_scale(rem * gpus if known else att, units[0], units[2])
    out[j, 1] = 1.0 if known else 0.0
    if fresh:
        length, count, level = _keyed_one(ring, rows, i, 0.0, False, buf)
        out[j, 2] = 0.0 if length != length else _log_scale(length, units[0], units[1])
        out[j, 3] = (top - level) / top if level < top else 0.0
        out[j, 4] = count / window


def _history_block(
    ring: np.ndarray,
    rows: np.ndarray,
    ids: np.ndarray,
    done: np.ndarray,
    att: np.ndarray,
    compute: np.ndarray,
    demand: np.ndarray,
    count_now: int,
    cached: bool,
    h_count: np.ndarray,
    h_done: np.ndarray,
    h_att: np.ndarray,
    h_rows: np.ndarray,
    units: np.ndarray,
    window: int,
    out: np.ndarray,
) -> None:
    """``QueueObserver.history_block``'s estimate columns of jobs ``ids`` (``done``
    iterations and ``att``ained GPU-seconds as of now; key rows ``rows``) into ``out[:, :5]``,
    recomputing (:func:`_history_row`) the cached row ``h_rows[j]`` of a job whose history
    count, work done or service changed since (every job unless ``cached``)."""
    buf = np.empty(ring.shape[1])
    top = rows.shape[1]
    for i in range(ids.size):
        j = ids[i]
        fresh = h_count[j] != count_now
        if not cached or fresh or h_done[j] != done[i] or h_att[j] != att[i]:
            _history_row(ring, rows, i, j, done[i] * compute[j], float(demand[j]), att[i],
                         fresh or not cached, units, top, window, h_rows, buf)  # fmt: skip
            h_done[j] = done[i]
            h_att[j] = att[i]
            h_count[j] = count_now
        for c in range(5):
            out[i, c] = h_rows[j, c]


if HAVE_NUMBA:
    at_least_zero = compiled(at_least_zero)
    at_most_one = compiled(at_most_one)
    _keyed_one = compiled(_keyed_one)
    _keyed = compiled(_keyed)
    _log_scale = compiled(_log_scale)
    _history_row = compiled(_history_row)
    keyed = _keyed
    history_block = compiled(_history_block)
else:  # pragma: no cover
    keyed = history_block = None
