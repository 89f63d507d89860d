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
    m, levels = rows.shape
    width = ring.shape[1]
    buf = np.empty(width)
    for i in range(m):
        mean[i] = np.nan
        count[i] = 0
        level[i] = levels
        for lv in range(levels):
            r = rows[i, lv]
            if r < 0:
                continue
            n = 0
            for k in range(width):
                v = ring[r, k]
                take = v > work[i] if by_work else v == v
                if take:
                    buf[k] = v
                    n += 1
                else:
                    buf[k] = 0.0
            if n > 0:
                mean[i] = stretch_kernel._row_sum(buf, width) / n
                count[i] = n
                level[i] = lv
                break


def _log_scale(x: float, unit: float, top: float) -> float:
    """``np.minimum(numerics.log1p(np.maximum(x, 0.0) / unit) / top, 1.0)`` of one value, with
    numpy's NaN and signed-zero rules (``math.log1p`` compiles to the C library's, as
    ``numerics.log1p`` calls)."""
    v = x if (x > 0.0 or x != x) else 0.0  # np.maximum(-0.0, 0.0) is +0.0
    y = math.log1p(v / unit) / top
    return y if (y <= 1.0 or y != y) else 1.0


def _history_rows(
    ring: np.ndarray,
    rows: np.ndarray,
    ids: np.ndarray,
    work: np.ndarray,
    gpus: np.ndarray,
    att: np.ndarray,
    fresh: np.ndarray,
    hour: float,
    log_work: float,
    log_t: float,
    top: int,
    window: int,
    out: np.ndarray,
) -> None:
    """The estimate columns of ``envs.queue_obs.HISTORY_FEATURES`` of jobs ``ids`` into
    ``out[ids]`` (``QueueObserver._history_rows``'s numpy form, value for value): the
    remaining-work estimate of each (``work`` done, ``gpus``, ``att``ained GPU-seconds where
    the estimate is unknown), the expected length, its key level and support of the
    ``fresh`` ones."""
    m = ids.size
    mean, count, level = np.empty(m), np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64)
    _keyed(ring, rows, work, True, mean, count, level)
    for i in range(m):
        rem = mean[i] - work[i]
        known = rem == rem
        j = ids[i]
        out[j, 0] = _log_scale(rem * gpus[i] if known else att[i], hour, log_work)
        out[j, 1] = 1.0 if known else 0.0
    any_fresh = False
    for i in range(m):
        any_fresh = any_fresh or fresh[i]
    if not any_fresh:
        return
    _keyed(ring, rows, work, False, mean, count, level)
    for i in range(m):
        if not fresh[i]:
            continue
        j = ids[i]
        length = mean[i]
        out[j, 2] = 0.0 if length != length else _log_scale(length, hour, log_t)
        out[j, 3] = (top - level[i]) / top if level[i] < top else 0.0
        out[j, 4] = count[i] / window


if HAVE_NUMBA:
    _keyed = compiled(_keyed)
    _log_scale = compiled(_log_scale)
    keyed = _keyed
    history_rows = compiled(_history_rows)
else:  # pragma: no cover
    keyed = history_rows = None
