"""Compiled rows of the Scheduler env's slots (``envs.queue_obs``'s waiting and running rows).

A slot row is about twenty small numpy operations over the slots (``QueueObserver``'s numpy
form), recomputed for every job whose row is not yet cached at a decision instant; their
call overhead, not the arithmetic, was a fifth of a Scheduler step. These loops compute the
same features **value for value**: each is the numpy form's float64 expression on one element
(``np.maximum``/``np.minimum`` with numpy's NaN and signed-zero rules, ``math.log1p`` as
``numerics.log1p``), stored into the float32 row as numpy's assignment rounds it.
``tests/test_scheduler_obs_cache.py`` hashes episodes with these loops and with the numpy
form. The history columns are not computed here (``estimate_kernel.history_block``).

Without numba (``HAVE_NUMBA`` false) ``waiting_rows`` and ``running_rows`` are None and the
observer keeps its numpy form.
"""

from __future__ import annotations

import numpy as np

from dlcluster_gym.perf import estimate_kernel, kernel_cache
from dlcluster_gym.perf.kernel_cache import compiled

HAVE_NUMBA = kernel_cache.HAVE_NUMBA


def _at_most_one(x: float) -> float:
    """``np.minimum(x, 1.0)`` of one value (NaN stays NaN)."""
    return x if (x <= 1.0 or x != x) else 1.0


def _progress(
    out: np.ndarray,
    i: int,
    j: int,
    done: float,
    run: float,
    compute: np.ndarray,
    preemptions: np.ndarray,
    iters: np.ndarray,
    demand: np.ndarray,
    units: np.ndarray,
    c_nw: int,
    c_left: int,
) -> None:
    """Row ``i`` (job ``j``, ``done`` iterations and ``run`` seconds held as of now): the
    ``nw_sens`` and ``preemptions`` columns (``c_nw`` and the next), and where ``iters``
    (known durations) is not empty ``remaining_work`` and ``remaining_time`` (``c_left`` and
    the next), as both row kinds have them."""
    out[i, c_nw] = _at_most_one(done * compute[j] / run) if run > 0 else 1.0
    out[i, c_nw + 1] = _at_most_one(preemptions[j] / 10.0)
    if iters.size:
        gap = iters[j] - done
        left = (gap if (gap > 0.0 or gap != gap) else 0.0) * compute[j]
        out[i, c_left] = estimate_kernel._log_scale(left * demand[j], units[0], units[2])
        out[i, c_left + 1] = estimate_kernel._log_scale(left, units[0], units[1])


def _waiting_rows(
    ids: np.ndarray,
    wait_since: np.ndarray,
    attained: np.ndarray,
    done_iters: np.ndarray,
    run_s: np.ndarray,
    preemptions: np.ndarray,
    arrival: np.ndarray,
    compute: np.ndarray,
    static_w: np.ndarray,
    skew: np.ndarray,
    iters: np.ndarray,
    demand: np.ndarray,
    now: float,
    units: np.ndarray,
    cols: np.ndarray,
    out: np.ndarray,
) -> None:
    """``QueueObserver._waiting_rows`` without requeued jobs (their counters are current):
    rows ``out[i]`` of waiting jobs ``ids[i]`` (engine arrays indexed by job), candidate and
    history columns left as they are. ``units``: (hour, log scale of time, of work);
    ``cols``: the columns valid, demand (then the static ones), starvation, age, attained,
    nw_sens, preemptions, high_skew, remaining_work, remaining_time; ``iters`` empty
    unless durations are known."""
    hour, log_t, log_w = units[0], units[1], units[2]
    log_scale = estimate_kernel._log_scale
    for i in range(ids.size):
        j = ids[i]
        out[i, cols[0]] = 1.0
        for c in range(static_w.shape[1]):
            out[i, cols[1] + c] = static_w[j, c]
        out[i, cols[2]] = log_scale(now - wait_since[j], hour, log_t)
        out[i, cols[3]] = log_scale(now - arrival[j], hour, log_t)
        out[i, cols[4]] = log_scale(attained[j], hour, log_w)
        out[i, cols[7]] = skew[j]
        _progress(out, i, j, done_iters[j], run_s[j], compute, preemptions, iters, demand,
                  units, cols[5], cols[8])  # fmt: skip


def _running_rows(
    ids: np.ndarray,
    done: np.ndarray,
    run: np.ndarray,
    att: np.ndarray,
    f_demand: np.ndarray,
    tier: np.ndarray,
    best: np.ndarray,
    compute_per_iter: np.ndarray,
    comm_per_iter: np.ndarray,
    last_start: np.ndarray,
    preemptions: np.ndarray,
    compute: np.ndarray,
    iters: np.ndarray,
    demand: np.ndarray,
    now: float,
    units: np.ndarray,
    cols: np.ndarray,
    out: np.ndarray,
) -> None:
    """``QueueObserver._running_rows``: rows ``out[i]`` of running jobs ``ids[i]`` whose
    counters brought up to now are ``done[i]``, ``run[i]``, ``att[i]`` (``view.live``),
    move and history columns left as they are. ``cols``: valid, demand, tier_machine (then
    rack, network), wider_than_best, comm, attained, running_for, nw_sens, preemptions,
    remaining_work, remaining_time."""
    hour, log_t, log_w = units[0], units[1], units[2]
    log_scale = estimate_kernel._log_scale
    for i in range(ids.size):
        j = ids[i]
        out[i, cols[0]] = 1.0
        out[i, cols[1]] = f_demand[j]
        t = tier[j]
        out[i, cols[2] + (t if t > 0 else 0)] = 1.0
        out[i, cols[3]] = 1.0 if t > best[j] else 0.0
        cpi = compute_per_iter[j]
        f = comm_per_iter[j] / cpi if cpi > 0 else 0.0
        out[i, cols[4]] = f / (1.0 + f)
        out[i, cols[5]] = log_scale(att[i], hour, log_w)
        out[i, cols[6]] = log_scale(now - last_start[j], hour, log_t)
        _progress(out, i, j, done[i], run[i], compute, preemptions, iters, demand, units,
                  cols[7], cols[9])  # fmt: skip


if HAVE_NUMBA:
    _at_most_one = compiled(_at_most_one)
    _progress = compiled(_progress)
    waiting_rows = compiled(_waiting_rows)
    running_rows = compiled(_running_rows)
else:  # pragma: no cover
    waiting_rows = running_rows = None
