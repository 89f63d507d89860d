"""Compiled sweep of :func:`perf.contention.link_stretch` over one link's unified circle.

``link_stretch`` spent its time in about 45 small numpy calls per link
(17,881 over-subscribed links on ``philly-1024gpu`` at preset (a), most with 2 jobs and 44
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

from dlcluster_gym.perf import kernel_cache
from dlcluster_gym.perf.kernel_cache import compiled

HAVE_NUMBA = kernel_cache.HAVE_NUMBA
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


def _wrap(x: float, perimeter: float) -> float:
    """``np.fmod(x, perimeter)`` without the library call where it is ``x`` or ``x -
    perimeter`` (``perimeter <= x < 2 * perimeter``: exact by Sterbenz's lemma, as fmod)."""
    if 0.0 <= x < perimeter:
        return x
    if perimeter <= x < 2.0 * perimeter:
        return x - perimeter
    return np.fmod(x, perimeter)


def _instances(
    st: np.ndarray,
    du: np.ndarray,
    dm: np.ndarray,
    fl: np.ndarray,
    job_k: np.ndarray,
    reps_j: np.ndarray,
    length_j: np.ndarray,
    perimeter: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lo, hi, demand, flows, job) of every phase instance on the circle: row ``k`` repeated
    ``reps_j`` times, ``length_j`` apart, modulo the perimeter; instances that wrap past the
    perimeter are cut there and continue at 0 (those pieces appended in order)."""
    k_rows = st.size
    total = 0
    for k in range(k_rows):
        total += reps_j[job_k[k]]
    starts = np.empty(total)  # each instance's start, computed once
    n_wrap = 0
    pos = 0
    for k in range(k_rows):
        j = job_k[k]
        for nth in range(reps_j[j]):
            s = _wrap(st[k] + length_j[j] * float(nth), perimeter)
            starts[pos] = s
            pos += 1
            if s + du[k] > perimeter:
                n_wrap += 1
    size = total + n_wrap
    lo = np.empty(size)
    hi = np.empty(size)
    dem = np.empty(size)
    flo = np.empty(size)
    who = np.empty(size, dtype=np.int64)
    pos = 0
    extra_at = total
    for k in range(k_rows):
        j = job_k[k]
        for _ in range(reps_j[j]):
            s = starts[pos]
            e = s + du[k]
            lo[pos] = s
            hi[pos] = min(e, perimeter)
            dem[pos] = dm[k]
            flo[pos] = fl[k]
            who[pos] = j
            pos += 1
            if e > perimeter:
                lo[extra_at] = 0.0
                hi[extra_at] = e - perimeter
                dem[extra_at] = dm[k]
                flo[extra_at] = fl[k]
                who[extra_at] = j
                extra_at += 1
    return lo, hi, dem, flo, who


def _stable_argsort(v: np.ndarray) -> np.ndarray:
    """``np.argsort(v, kind="mergesort")``: the one stable sorting permutation (equal values
    in index order), by buckets of the value range (a monotone map, filled in index order)
    and a stable insertion sort inside each; the merge sort itself for short or non-finite
    arrays. Boundaries on the circle spread evenly, so buckets hold one or two values."""
    n = v.size
    if n < 64:
        return np.argsort(v, kind="mergesort")
    lo = v[0]
    hi = v[0]
    for i in range(n):
        x = v[i]
        if not np.isfinite(x):
            return np.argsort(v, kind="mergesort")
        if x < lo:
            lo = x
        if x > hi:
            hi = x
    if not hi > lo:
        return np.arange(n)
    scale = n / (hi - lo)
    bucket = np.empty(n, dtype=np.int64)
    first = np.zeros(n + 1, dtype=np.int64)
    for i in range(n):
        b = int((v[i] - lo) * scale)
        b = b if b < n else n - 1
        bucket[i] = b
        first[b + 1] += 1
    for b in range(n):
        first[b + 1] += first[b]
    order = np.empty(n, dtype=np.int64)
    for i in range(n):
        b = bucket[i]
        order[first[b]] = i
        first[b] += 1
    start = 0
    for b in range(n):  # first[b] is now the end of bucket b
        end = first[b]
        for t in range(start + 1, end):
            i = order[t]
            x = v[i]
            u = t
            while u > start and v[order[u - 1]] > x:
                order[u] = order[u - 1]
                u -= 1
            order[u] = i
        start = end
    return order


def _points(lo: np.ndarray, hi: np.ndarray, perimeter: float) -> np.ndarray:
    """The distinct phase boundaries on the circle, 0 and the perimeter included, ascending."""
    size = lo.size
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
    return points[:m]


def _by_point(at: np.ndarray, m: int) -> tuple[np.ndarray, np.ndarray]:
    """Stable counting sort of instance indices by the point index ``at``: (first, order),
    the instances at point ``r`` being ``order[first[r]:first[r + 1]]`` in input order."""
    first = np.zeros(m + 1, dtype=np.int64)
    for i in range(at.size):
        first[at[i] + 1] += 1
    for r in range(m):
        first[r + 1] += first[r]
    fill = first[:m].copy()
    order = np.empty(at.size, dtype=np.int64)
    for i in range(at.size):
        order[fill[at[i]]] = i
        fill[at[i]] += 1
    return first, order


def _level(
    per_flow: np.ndarray, row_f: np.ndarray, order: np.ndarray, a: int, cum: np.ndarray,
    after: np.ndarray,
) -> float:  # fmt: skip
    """Max-min fair level of one over-subscribed row (``contention.water_level``) over the
    flows ``order[:a]`` sorted by per-flow demand, the operations in numpy's order."""
    if a == 0:
        return 1.0  # no flow to share the row: nothing is limited
    run = 0.0
    for i in range(a):
        d = per_flow[order[i]]
        fin = d if np.isfinite(d) else 0.0
        x = fin * row_f[order[i]]
        run = run + x if i > 0 else x
        cum[i] = run - x
    run = 0.0
    for i in range(a - 1, -1, -1):
        x = row_f[order[i]]
        run = run + x if i < a - 1 else x
        after[i] = run
    level = (1.0 - cum[0]) / after[0]
    for i in range(a):
        lam = (1.0 - cum[i]) / after[i]
        if after[i] > 0 and lam <= per_flow[order[i]] * (1.0 + 1e-12):
            return lam
    return level


def _sort_flows(per_flow: np.ndarray, jobs: np.ndarray, a: int, order: np.ndarray) -> None:
    """``order[:a]`` = ``jobs[:a]`` (ascending) stably sorted by ``per_flow`` (insertion)."""
    for t in range(a):
        j = jobs[t]
        i = t
        while i > 0 and per_flow[order[i - 1]] > per_flow[j]:
            order[i] = order[i - 1]
            i -= 1
        order[i] = j


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

    One pass over the points with each job's running demand and flows: the values of the
    numpy path's ``bincount`` + ``cumsum`` matrices, row by row (a job no instance touches at
    a point adds 0.0 there, which changes no running sum: they are never -0.0). Per row only
    the jobs with flows enter the water level: the others sort last with no demand and
    add +-0.0 to its sums, and their slow-down is 0.
    """
    lo, hi, w_dem, w_flo, w_who = _instances(st, du, dm, fl, job_k, reps_j, length_j, perimeter)
    size = lo.size
    bounds = np.empty(2 * size)
    bounds[:size] = lo
    bounds[size:] = hi
    walk = _stable_argsort(bounds)  # per point: starts, then ends, in order
    run_d = np.zeros(n)  # cumsum of the demand bins so far, per job
    run_f = np.zeros(n)
    bin_d = np.zeros(n)  # this point's bins
    bin_f = np.zeros(n)
    row_d = np.zeros(n)  # the row as the numpy path sees it: flows rounded, demand masked
    row_f = np.zeros(n)
    touched = np.empty(n, dtype=np.int64)
    is_touched = np.zeros(n, dtype=np.bool_)
    extra = np.zeros(n)
    per_flow = np.full(n, np.inf)
    active = np.empty(n, dtype=np.int64)
    order = np.empty(n, dtype=np.int64)
    cum = np.empty(n)
    after = np.empty(n)
    q = 0
    here = 0.0  # the point being swept: 0, then each distinct boundary below the perimeter
    first = True
    while here < perimeter:
        nt = 0
        while q < walk.size and bounds[walk[q]] == here:
            i = walk[q]
            q += 1
            sign = 1.0
            if i >= size:
                i -= size
                sign = -1.0
            j = w_who[i]
            if not is_touched[j]:
                is_touched[j] = True
                bin_d[j] = 0.0
                bin_f[j] = 0.0
                touched[nt] = j
                nt += 1
            bin_d[j] += w_dem[i] if sign > 0 else -w_dem[i]
            bin_f[j] += w_flo[i] if sign > 0 else -w_flo[i]
        for t in range(nt):
            j = touched[t]
            is_touched[j] = False
            if first:
                run_d[j] = bin_d[j]
                run_f[j] = bin_f[j]
            else:
                run_d[j] = run_d[j] + bin_d[j]
                run_f[j] = run_f[j] + bin_f[j]
            row_f[j] = np.rint(run_f[j] * 1e6) / 1e6
            row_d[j] = run_d[j] if not (row_f[j] <= 0) else 0.0
            per_flow[j] = row_d[j] / row_f[j] if row_f[j] > 0 else np.inf
        first = False
        start = here
        here = bounds[walk[q]] if q < walk.size else perimeter
        if here > perimeter:
            here = perimeter
        if not (_row_sum(row_d, n) > 1.0 + rtol):
            continue
        a = 0
        finite = True
        for j in range(n):
            if row_f[j] > 0:
                active[a] = j
                a += 1
                finite = finite and np.isfinite(per_flow[j])
        if not finite:  # a NaN or inf demand: every job enters, as in the numpy path
            a = n
            for j in range(n):
                active[j] = j
        _sort_flows(per_flow, active, a, order)
        level = _level(per_flow, row_f, order, a, cum, after)
        seg = here - start
        for t in range(a):
            j = order[t]
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
    _row_sum = compiled(_row_sum)
    _wrap = compiled(_wrap)
    _instances = compiled(_instances)
    _points = compiled(_points)
    _stable_argsort = compiled(_stable_argsort)
    _by_point = compiled(_by_point)
    _level = compiled(_level)
    _sort_flows = compiled(_sort_flows)
    _sweep = compiled(_sweep)
    stretch = compiled(_stretch)
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
