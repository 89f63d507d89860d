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

import math

import numpy as np

from dlcluster_gym.perf import estimate_kernel, kernel_cache
from dlcluster_gym.perf.kernel_cache import compiled

HAVE_NUMBA = kernel_cache.HAVE_NUMBA


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
    out[i, c_nw] = estimate_kernel.at_most_one(done * compute[j] / run) if run > 0 else 1.0
    out[i, c_nw + 1] = estimate_kernel.at_most_one(preemptions[j] / 10.0)
    if iters.size:
        gap = iters[j] - done
        left = estimate_kernel.at_least_zero(gap) * compute[j]
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


def _count(n: float, log_n: float) -> float:
    """``envs.features.count_feature``: ``min(log1p(max(n, 0)) / log_n, 1)``."""
    return min(math.log1p(max(n, 0.0)) / log_n, 1.0)


def _global_rows(
    free_per_machine: np.ndarray,
    free_per_rack: np.ndarray,
    machine_gpus: np.ndarray,
    rack_gpus: np.ndarray,
    sizes: np.ndarray,
    demand: np.ndarray,
    slots: np.ndarray,
    hidden: np.ndarray,
    wait_since: np.ndarray,
    counts: np.ndarray,
    now: float,
    done_share: float,
    units: np.ndarray,
    log_n: float,
    out: np.ndarray,
) -> None:
    """``QueueObserver.global_block``: the cluster features of the plan's free GPUs, then the
    waiting jobs the slots leave out (``hidden``). ``sizes``: (GPUs in the cluster, most
    GPUs of a machine, of a rack, index of the first feature after the cluster ones);
    ``counts``: (running jobs, decisions taken at this instant); ``done_share`` as
    ``envs.features.done_share`` gives it. Integer sums are exact, so any order gives
    numpy's value."""
    ng = float(sizes[0])
    free = 0
    top_r = 0
    full_r = 0
    for r in range(free_per_rack.size):
        f = free_per_rack[r]
        free += f
        top_r = max(top_r, f)
        full_r += f == rack_gpus[r]
    top_m = 0
    empty = 0
    empty_gpus = 0
    for m in range(free_per_machine.size):
        f = free_per_machine[m]
        top_m = max(top_m, f)
        if f == machine_gpus[m]:
            empty += 1
            empty_gpus += machine_gpus[m]
    out[0] = free / ng
    out[1] = top_m / sizes[1]
    out[2] = top_r / sizes[2]
    out[3] = empty / max(free_per_machine.size, 1)
    out[4] = full_r / max(free_per_rack.size, 1)
    out[5] = 1.0 - empty_gpus / float(free) if free > 0 else 0.0
    n_wait = slots.size + hidden.size
    out[6] = _count(n_wait, log_n)
    wanted = 0
    for k in range(slots.size):
        wanted += demand[slots[k]]
    hidden_gpus = 0
    oldest = np.inf
    for k in range(hidden.size):
        hidden_gpus += demand[hidden[k]]
        oldest = min(oldest, wait_since[hidden[k]])
    out[7] = min((wanted + hidden_gpus) / ng, 1.0) if n_wait else 0.0
    out[8] = _count(counts[0], log_n)
    out[9] = done_share
    n = sizes[3]
    out[n] = _count(hidden.size, log_n)
    if hidden.size:
        out[n + 1] = min(hidden_gpus / ng, 1.0)
        out[n + 2] = estimate_kernel._log_scale(now - oldest, units[0], units[1])
    else:
        out[n + 1] = 0.0
        out[n + 2] = 0.0
    out[n + 3] = _count(counts[1], log_n)


if HAVE_NUMBA:
    _progress = compiled(_progress)
    _count = compiled(_count)
    waiting_rows = compiled(_waiting_rows)
    running_rows = compiled(_running_rows)
    global_rows = compiled(_global_rows)
else:  # pragma: no cover
    waiting_rows = running_rows = global_rows = None
