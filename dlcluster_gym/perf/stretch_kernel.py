"""Compiled sweep of :func:`perf.contention.link_stretch` over one link's unified circle.

``link_stretch`` spent its time in about 45 small numpy calls per link (issue #15 Speed:
17,881 over-subscribed links on ``philly-1024gpu`` at preset (a), most with 2 jobs and 44
phase instances), none of them dominant, and the same link set rarely repeats (12% of the
calls), so no algorithmic shortcut removes the per-call overhead. This module runs the same
sweep as one compiled loop (numba), **operation for operation** in the order numpy performs
it, so that results are bit-identical to the numpy path (``tests/test_contention_fastpath.py``
checks both against the original implementation):

- ``np.bincount`` adds its weights in input order starting from 0.0 (all starts, then all
  ends); ``np.cumsum`` is a sequential running sum;
- ``ndarray.sum(axis=1)`` over a contiguous row is numpy's pairwise summation
  (:func:`_row_sum`, ``numpy/_core/src/umath/loops_utils.h.src``) added to 0.0; rows of
  more than 128 jobs (``MAX_JOBS``, one summation block) stay on the numpy path;
- ``ndarray.sum(axis=0)`` adds the rows in order to 0.0;
- ``np.argsort(kind="stable")`` is a stable sort (insertion sort here: a link carries tens of
  jobs at most), ``np.maximum`` propagates NaN, and division follows IEEE (``error_model``
  ``"numpy"``), as numpy's.

Without numba (``HAVE_NUMBA`` false) ``link_stretch`` keeps its numpy path.
"""

from __future__ import annotations

import numpy as np

try:  # numba is a core dependency; the numpy path remains for platforms without it
    from numba import njit
except ImportError:  # pragma: no cover - exercised only where numba is absent
    njit = None

HAVE_NUMBA = njit is not None
_PW_BLOCKSIZE = 128  # numpy's pairwise-summation block


MAX_JOBS = _PW_BLOCKSIZE
"""Jobs per link the kernel takes (one pairwise-summation block per row); beyond, numpy."""


def _row_sum(a: np.ndarray, n: int) -> float:
    """numpy's ``pairwise_sum`` of ``a[:n]`` for ``n <= 128`` (one block), plus 0.0 as the
    add-reduce starts from the identity."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[i]
        return 0.0 + res
    r0, r1, r2, r3 = a[0], a[1], a[2], a[3]
    r4, r5, r6, r7 = a[4], a[5], a[6], a[7]
    i = 8
    while i < n - (n % 8):
        r0 += a[i]
        r1 += a[i + 1]
        r2 += a[i + 2]
        r3 += a[i + 3]
        r4 += a[i + 4]
        r5 += a[i + 5]
        r6 += a[i + 6]
        r7 += a[i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[i]
        i += 1
    return 0.0 + res


def _sweep(
    st: np.ndarray,
    du: np.ndarray,
    dm: np.ndarray,
    fl: np.ndarray,
    job_k: np.ndarray,
    reps_j: np.ndarray,
    length_j: np.ndarray,
    perimeter: float,
    n: int,
    rtol: float,
) -> np.ndarray:
    """Extra quantised Up seconds per job over the circle (``extra_q`` of ``link_stretch``).

    Rows ``k`` (a job's phase on the link): start ``st`` and duration ``du`` on the job's
    quantised iteration, demand ``dm`` (fraction of the capacity), ``fl`` flows, job
    ``job_k``; job ``j`` repeats ``reps_j[j]`` times, ``length_j[j]`` seconds apart.
    """
    k_rows = st.size
    total = 0
    for k in range(k_rows):
        total += reps_j[job_k[k]]
    starts = np.empty(total)
    ends = np.empty(total)
    dem = np.empty(total)
    flo = np.empty(total)
    who = np.empty(total, dtype=np.int64)
    pos = 0
    n_wrap = 0
    for k in range(k_rows):
        j = job_k[k]
        for nth in range(reps_j[j]):
            s = np.fmod(st[k] + length_j[j] * float(nth), perimeter)
            e = s + du[k]
            starts[pos] = s
            ends[pos] = e
            dem[pos] = dm[k]
            flo[pos] = fl[k]
            who[pos] = j
            if e > perimeter:
                n_wrap += 1
            pos += 1
    size = total + n_wrap
    lo = np.empty(size)
    hi = np.empty(size)
    w_dem = np.empty(size)
    w_flo = np.empty(size)
    w_who = np.empty(size, dtype=np.int64)
    extra_at = total
    for i in range(total):
        lo[i] = starts[i]
        hi[i] = min(ends[i], perimeter)
        w_dem[i] = dem[i]
        w_flo[i] = flo[i]
        w_who[i] = who[i]
        if ends[i] > perimeter:  # wrapping phases continue at 0 (appended in order)
            lo[extra_at] = 0.0
            hi[extra_at] = ends[i] - perimeter
            w_dem[extra_at] = dem[i]
            w_flo[extra_at] = flo[i]
            w_who[extra_at] = who[i]
            extra_at += 1
    allp = np.empty(2 * size + 2)
    allp[:size] = lo
    allp[size : 2 * size] = hi
    allp[2 * size] = 0.0
    allp[2 * size + 1] = perimeter
    allp.sort()
    m = 0
    points = np.empty(allp.size)
    for i in range(allp.size):
        if i == 0 or allp[i] != allp[i - 1]:
            points[m] = allp[i]
            m += 1
    points = points[:m]
    i_lo = np.searchsorted(points, lo)
    i_hi = np.searchsorted(points, hi)
    demand = np.zeros((m, n))
    flows = np.zeros((m, n))
    for i in range(size):  # np.bincount: weights in input order, starts then ends
        demand[i_lo[i], w_who[i]] += w_dem[i]
        flows[i_lo[i], w_who[i]] += w_flo[i]
    for i in range(size):
        demand[i_hi[i], w_who[i]] += -w_dem[i]
        flows[i_hi[i], w_who[i]] += -w_flo[i]
    for r in range(1, m - 1):  # np.cumsum along the points, last row dropped
        for j in range(n):
            demand[r, j] = demand[r - 1, j] + demand[r, j]
            flows[r, j] = flows[r - 1, j] + flows[r, j]
    extra = np.zeros(n)
    per_flow = np.empty(n)
    order = np.empty(n, dtype=np.int64)
    cum = np.empty(n)
    after = np.empty(n)
    for r in range(m - 1):
        row_d = demand[r]
        row_f = flows[r]
        for j in range(n):
            row_f[j] = np.rint(row_f[j] * 1e6) / 1e6
            if row_f[j] <= 0:
                row_d[j] = 0.0
        if not (_row_sum(row_d, n) > 1.0 + rtol):
            continue
        for j in range(n):
            per_flow[j] = row_d[j] / row_f[j] if row_f[j] > 0 else np.inf
        for j in range(n):  # stable insertion sort of the per-flow demands
            order[j] = j
            i = j
            while i > 0 and per_flow[order[i - 1]] > per_flow[j]:
                order[i] = order[i - 1]
                i -= 1
            order[i] = j
        run = 0.0
        for i in range(n):
            d = per_flow[order[i]]
            fin = d if np.isfinite(d) else 0.0
            x = fin * row_f[order[i]]
            run = run + x if i > 0 else x
            cum[i] = run - x
        run = 0.0
        for i in range(n - 1, -1, -1):
            x = row_f[order[i]]
            run = run + x if i < n - 1 else x
            after[i] = run
        level = (1.0 - cum[0]) / after[0]
        for i in range(n):
            lam = (1.0 - cum[i]) / after[i]
            if after[i] > 0 and lam <= per_flow[order[i]] * (1.0 + 1e-12):
                level = lam
                break
        seg = points[r + 1] - points[r]
        for j in range(n):
            slow = 0.0
            if row_f[j] > 0:
                x = per_flow[j] / level - 1.0
                slow = x if (x >= 0.0 or x != x) else 0.0  # np.maximum(x, 0.0)
            extra[j] = extra[j] + slow * seg
    return extra


def _stretch(
    packed: np.ndarray,
    counts: np.ndarray,
    it: np.ndarray,
    up: np.ndarray,
    shift_mod: np.ndarray,
    sectors: np.ndarray,
    sector_s: float,
    perimeter_sectors: int,
    perimeter: float,
    cap: float,
    rtol: float,
) -> np.ndarray:
    """``link_stretch`` after its fast path and layout: the jobs' concatenated packed phases
    (``counts`` columns each), iteration and Up times, ``shift % iteration`` and the circle.
    Each element is computed with the operations of the numpy path, in its order."""
    n = it.size
    k_all = packed.shape[1]
    job_all = np.empty(k_all, dtype=np.int64)
    pos = 0
    for j in range(n):
        for _ in range(counts[j]):
            job_all[pos] = j
            pos += 1
    length = np.empty(n)
    scale_j = np.empty(n)
    reps_j = np.empty(n, dtype=np.int64)
    for j in range(n):
        length[j] = float(sectors[j]) * sector_s
        scale_j[j] = length[j] / it[j]
        reps_j[j] = perimeter_sectors // sectors[j]
    st = np.empty(k_all)
    du = np.empty(k_all)
    dm = np.empty(k_all)
    fl = np.empty(k_all)
    job_k = np.empty(k_all, dtype=np.int64)
    kept = 0
    for k in range(k_all):
        rate = packed[3, k]
        d = (rate if (rate <= cap or rate != rate) else cap) / cap  # np.minimum(rate, cap)
        share = packed[2, k]
        if not (d > 0 and share > 0):
            continue
        j = job_all[k]
        f = packed[4, k]
        t = it[j]
        u = up[j]
        sc = scale_j[j]
        st[kept] = (packed[0, k] * (t - u) + packed[1, k] * u + shift_mod[j]) * sc
        du[kept] = share * u * sc
        dm[kept] = d
        fl[kept] = f if (f >= 1.0 or f != f) else 1.0  # np.maximum(flows, 1.0)
        job_k[kept] = j
        kept += 1
    extra_q = _sweep(
        st[:kept], du[:kept], dm[:kept], fl[:kept], job_k[:kept], reps_j, length, perimeter, n,
        rtol,
    )  # fmt: skip
    out = np.empty(n)
    for j in range(n):
        extra = extra_q[j] / scale_j[j] / float(reps_j[j])  # seconds per iteration
        x = 1.0 + extra / up[j] if up[j] > 0 else 1.0
        out[j] = 1.0 if x < 1.0 + rtol else x
    return out


if HAVE_NUMBA:
    _row_sum = njit(cache=True, error_model="numpy")(_row_sum)
    _sweep = njit(cache=True, error_model="numpy")(_sweep)
    stretch = njit(cache=True, error_model="numpy")(_stretch)
else:  # pragma: no cover
    stretch = None

_warm = False


def warm() -> None:
    """Load (or compile, the first time on a machine) the kernel now rather than on the first
    contended link: about 0.5 CPU s from numba's on-disk cache, once per process. Called when
    a :class:`perf.contention.SharedLinks` is built, so runs without sharing never pay it."""
    global _warm
    if _warm or stretch is None:
        return
    _warm = True
    packed = np.array([[1.0], [0.0], [1.0], [1.0], [1.0]])
    two = np.ones(2)
    stretch(
        np.concatenate((packed, packed), axis=1), np.ones(2, dtype=np.int64), two, two * 0.5,
        two * 0.0, np.ones(2, dtype=np.int64), 1.0, 1, 1.0, 1.0, 1e-9,
    )  # fmt: skip
