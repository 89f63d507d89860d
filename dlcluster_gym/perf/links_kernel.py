"""Compiled :func:`perf.contention.link_stretch` + :func:`conserve_capacity` over a batch of
links (the dirty links of one engine flush).

Per over-subscribed link the engine spent about 60 us in Python around the compiled sweep
(gathering the jobs' times and phases, the layout lookup, the capacity check;
17,881 such links on ``philly-1024gpu`` at preset (a)). This module takes every link of
a flush at once, flattened, and runs for each: the fast-path test on the summed capped peaks,
the circle layout (``perf.layout_kernel``), the sweep (``perf.stretch_kernel``) and the
capacity conservation, with the operations of the Python functions in their order, so the
factors are bit-identical (``tests/test_links_kernel.py``):

- ``sum([min(peak, cap) ...])`` is a running sum from 0; ``min`` keeps its first argument
  unless the second is smaller;
- ``conserve_capacity``'s ``ndarray.sum`` is numpy's pairwise sum (``stretch_kernel._row_sum``,
  one block: links of at most ``MAX_JOBS`` jobs; longer ones are left to the caller), its
  bisection the same loop.

The caller computes ``up`` (clamped) and ``shift % iteration`` with numpy and keeps the
Python path for the links this kernel leaves (a status of 0). :func:`pooled_factors` takes
job ids and phase rows instead (``perf.phase_pool``) and gathers the same inputs itself.
"""

from __future__ import annotations

import numpy as np

from dlcluster_gym.perf import kernel_cache
from dlcluster_gym.perf.kernel_cache import compiled
from dlcluster_gym.perf.layout_kernel import layout as _layout
from dlcluster_gym.perf.stretch_kernel import MAX_JOBS
from dlcluster_gym.perf.stretch_kernel import _row_sum as _row_sum
from dlcluster_gym.perf.stretch_kernel import stretch as _stretch

HAVE_NUMBA = kernel_cache.HAVE_NUMBA and _stretch is not None and _layout is not None


def _load(
    bytes_it: np.ndarray,
    compute: np.ndarray,
    comm: np.ndarray,
    f: np.ndarray,
    k: float,
    buf: np.ndarray,
) -> float:
    """``conserve_capacity``'s ``load(k)``: summed bytes per second at scale ``k``."""
    n = f.size
    for j in range(n):
        buf[j] = bytes_it[j] / (compute[j] + comm[j] * (1.0 + k * (f[j] - 1.0)))
    return _row_sum(buf, n)


def _conserve(
    f: np.ndarray,
    compute: np.ndarray,
    comm: np.ndarray,
    up: np.ndarray,
    carry: np.ndarray,
    cap: float,
    rtol: float,
) -> np.ndarray:
    """``contention.conserve_capacity(f, compute, comm, up, carry, cap)`` (``f`` has a
    factor above 1), operation for operation."""
    n = f.size
    bytes_it = np.empty(n)
    for j in range(n):
        bytes_it[j] = carry[j] * up[j]
    buf = np.empty(n)
    if _load(bytes_it, compute, comm, f, 1.0, buf) <= cap * (1.0 + rtol):
        return f
    lo, hi = 1.0, 2.0
    while _load(bytes_it, compute, comm, f, hi, buf) > cap and hi < 1e12:
        lo, hi = hi, hi * 2.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if _load(bytes_it, compute, comm, f, mid, buf) > cap:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-12 * hi:
            break
    out = np.empty(n)
    for j in range(n):
        out[j] = 1.0 + hi * (f[j] - 1.0) if f[j] > 1.0 else f[j]
    return out


def _fits(peaks: np.ndarray, cap: float, rtol: float) -> bool:
    """``link_stretch``'s fast path: the summed capped peak demand fits the capacity."""
    total = 0.0
    for i in range(peaks.size):
        p = peaks[i]
        total = total + (cap if cap < p else p)
    return total <= cap * (1.0 + rtol)


def _factors(
    bounds: np.ndarray,
    phase_bounds: np.ndarray,
    caps: np.ndarray,
    it: np.ndarray,
    up: np.ndarray,
    shift_mod: np.ndarray,
    compute: np.ndarray,
    comm: np.ndarray,
    up_raw: np.ndarray,
    carry: np.ndarray,
    peaks: np.ndarray,
    counts: np.ndarray,
    packed: np.ndarray,
    table_rows: np.ndarray,
    table_slot: np.ndarray,
    table_used: np.ndarray,
    max_sectors: int,
    precision_s: float,
    min_sectors: int,
    rtol: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Stretch factors of a batch of links, each after ``conserve_capacity``.

    Link ``l``'s jobs are the entries ``bounds[l]:bounds[l + 1]`` of the per-(link, job)
    arrays: iteration time, clamped Up time, ``shift % iteration``, compute, uncontended
    exposed communication, raw Up time, carried rate, peak demand and phase count; their
    phases are the columns ``phase_bounds[l]:phase_bounds[l + 1]`` of ``packed``. Returns
    (factors per entry, per link a status: 0 left to the caller, 1 no factor above 1, 2
    some factor above 1).
    """
    out = np.ones(it.size)
    done = np.ones(caps.size, dtype=np.int64)
    for lk in range(caps.size):
        a, b = bounds[lk], bounds[lk + 1]
        cap = caps[lk]
        if _fits(peaks[a:b], cap, rtol):
            continue
        if b - a > MAX_JOBS:
            done[lk] = 0
            continue
        t = it[a:b].copy()
        q, perimeter, sectors = _layout(
            t, max_sectors, precision_s, min_sectors, table_rows, table_slot, table_used
        )
        if perimeter < 0:
            done[lk] = 0
            continue
        f = _stretch(
            packed[:, phase_bounds[lk] : phase_bounds[lk + 1]].copy(), counts[a:b].copy(), t,
            up[a:b].copy(), shift_mod[a:b].copy(), sectors, q, perimeter, perimeter * q, cap,
            rtol,
        )  # fmt: skip
        slow = False
        for j in range(f.size):
            if f[j] > 1.0:
                slow = True
        if slow:
            f = _conserve(f, compute[a:b], comm[a:b], up_raw[a:b], carry[a:b], cap, rtol)
            done[lk] = 2
        out[a:b] = f
    return out, done


def _pooled_factors(
    bounds: np.ndarray,
    jobs: np.ndarray,
    rows: np.ndarray,
    caps: np.ndarray,
    compute_all: np.ndarray,
    comm_all: np.ndarray,
    up_all: np.ndarray,
    shift_all: np.ndarray,
    row_start: np.ndarray,
    row_count: np.ndarray,
    row_peak: np.ndarray,
    row_carry: np.ndarray,
    pool: np.ndarray,
    table_rows: np.ndarray,
    table_slot: np.ndarray,
    table_used: np.ndarray,
    max_sectors: int,
    precision_s: float,
    min_sectors: int,
    rtol: float,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_factors` on inputs gathered here: entry ``i`` is job ``jobs[i]`` (an index
    into the per-job arrays) with the phases of pool row ``rows[i]`` (columns
    ``row_start:row_start + row_count`` of ``pool``, peak and carried rate). The per-entry
    arrays get the values ``contention.batch_stretch`` computes with numpy: ``compute +
    comm``, ``minimum(maximum(up, 0), it)`` (NaN propagating), ``shift % it``."""
    m = jobs.size
    it = np.empty(m)
    up = np.empty(m)
    shift_mod = np.empty(m)
    compute = np.empty(m)
    comm = np.empty(m)
    up_raw = np.empty(m)
    carry = np.empty(m)
    peaks = np.empty(m)
    counts = np.empty(m, dtype=np.int64)
    ends = np.zeros(m + 1, dtype=np.int64)
    for i in range(m):
        j, r = jobs[i], rows[i]
        c, d, u = compute_all[j], comm_all[j], up_all[j]
        t = c + d
        it[i] = t
        compute[i] = c
        comm[i] = d
        up_raw[i] = u
        u = u if (u >= 0.0 or u != u) else 0.0  # np.maximum(u, 0.0)
        up[i] = u if (u <= t or u != u) else t  # np.minimum(u, t)
        shift_mod[i] = shift_all[j] % t
        carry[i] = row_carry[r]
        peaks[i] = row_peak[r]
        counts[i] = row_count[r]
        ends[i + 1] = ends[i] + counts[i]
    packed = np.empty((5, ends[m]))
    for i in range(m):
        s, pos = row_start[rows[i]], ends[i]
        for k in range(counts[i]):
            for q in range(5):
                packed[q, pos + k] = pool[q, s + k]
    return _factors(
        bounds, ends[bounds], caps, it, up, shift_mod, compute, comm, up_raw, carry, peaks,
        counts, packed, table_rows, table_slot, table_used, max_sectors, precision_s,
        min_sectors, rtol,
    )  # fmt: skip


def _pairwise(a: np.ndarray) -> float:
    """numpy's ``pairwise_sum`` of ``a``: blocks of at most 128 (``_row_sum``), longer
    stretches split in halves at a multiple of 8 and the halves' sums added
    (``numpy/_core/src/umath/loops_utils.h.src``); evaluated with a stack, no recursion."""
    lo_s = np.empty(128, dtype=np.int64)
    n_s = np.empty(128, dtype=np.int64)
    stage_s = np.empty(128, dtype=np.int64)
    vals = np.empty(128)
    top, nv = 1, 0
    lo_s[0], n_s[0], stage_s[0] = 0, a.size, 0
    while top > 0:
        top -= 1
        lo, n, stage = lo_s[top], n_s[top], stage_s[top]
        if n <= 128:  # 0.0 + the block's sum: the same value
            vals[nv] = _row_sum(a[lo : lo + n], n)
            nv += 1
        elif stage == 1:  # both halves done: left + right
            vals[nv - 2] = vals[nv - 2] + vals[nv - 1]
            nv -= 1
        else:
            n2 = n // 2
            n2 -= n2 % 8
            lo_s[top], n_s[top], stage_s[top] = lo, n, 1
            lo_s[top + 1], n_s[top + 1], stage_s[top + 1] = lo + n2, n - n2, 0
            lo_s[top + 2], n_s[top + 2], stage_s[top + 2] = lo, n2, 0
            top += 3
    return vals[0]


def _carried(
    pool: np.ndarray, start: np.ndarray, count: np.ndarray, caps: np.ndarray, out: np.ndarray
) -> None:
    """Per row ``r`` of a phase pool (``perf.phase_pool``), ``(length * minimum(rate,
    cap)).sum()`` over its columns into ``out[r]`` (``ndarray.sum``: ``0.0 +`` the pairwise
    sum; ``minimum`` keeps a NaN rate)."""
    for r in range(start.size):
        s, k, cap = start[r], count[r], caps[r]
        buf = np.empty(k)
        for i in range(k):
            rate = pool[3, s + i]
            buf[i] = pool[2, s + i] * (rate if (rate <= cap or rate != rate) else cap)
        out[r] = 0.0 + _pairwise(buf)


def _usage(count: np.ndarray, load: np.ndarray, capacity: np.ndarray) -> tuple[float, float, int]:
    """(mean, max, number) of ``min(max(load, 0) / capacity, 1)`` over the links with a
    non-zero ``count``, as the engine's numpy expression computes them (``ndarray.sum`` is
    ``0.0 +`` the pairwise sum; ``max`` propagates NaN); (0, 0, 0) when none."""
    m = 0
    for i in range(count.size):
        if count[i] != 0:
            m += 1
    if m == 0:
        return 0.0, 0.0, 0
    util = np.empty(m)
    k = 0
    for i in range(count.size):
        if count[i] != 0:
            x = load[i]
            x = x if (x >= 0.0 or x != x) else 0.0
            u = x / capacity[i]
            util[k] = u if (u <= 1.0 or u != u) else 1.0
            k += 1
    peak = util[0]
    for i in range(m):
        if util[i] != util[i]:
            peak = util[i]
            break
        if util[i] > peak:
            peak = util[i]
    return (0.0 + _pairwise(util)) / m, peak, m


if HAVE_NUMBA:
    _pairwise = compiled(_pairwise)
    usage = compiled(_usage)
    carried = compiled(_carried)
    _load = compiled(_load)
    _conserve = compiled(_conserve)
    _fits = compiled(_fits)
    factors = compiled(_factors)
    _factors = factors
    pooled_factors = compiled(_pooled_factors)
else:  # pragma: no cover
    factors = None
    pooled_factors = None
    carried = None
    usage = None
