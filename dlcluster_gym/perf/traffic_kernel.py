"""Compiled :func:`perf.network.placement_traffic` for the hierarchical collective.

A structurally new placement's traffic (its NICs, uplinks and spine; the rack and network
stages' flows shared max-min fairly on the job's own links; per link the bytes and rate of
each stage) took about 60 small numpy calls (3,225 new placements on
``philly-1024gpu`` at preset (a), about 200 us each). This module runs the same computation
as one compiled function (numba), **operation for operation** in the order the numpy path
performs it, so the floats are bit-identical (``tests/test_traffic_kernel.py`` compares both):

- ``np.bincount`` with weights adds in input order starting from 0.0, over the
  ``(flow, link)`` incidence rows flow by flow (NIC, then uplink and spine);
- ``np.unique`` (``perf.network.unique_small``) is a sort; the relabelling of link ids to
  their rank keeps their order;
- max-min progressive filling (``perf.network.maxmin_rates``) with its fast path, its
  ``min`` of the two step bounds and its stopping rules;
- element-wise expressions keep numpy's association (``scale * volume * coef * count`` is
  ``((scale * volume) * coef) * count``), and ``max`` propagates NaN.

The flat-ring collective and platforms without numba keep the numpy path.
"""

from __future__ import annotations

import numpy as np

from dlcluster_gym.perf import kernel_cache
from dlcluster_gym.perf.kernel_cache import compiled

HAVE_NUMBA = kernel_cache.HAVE_NUMBA
_TOL = 1e-12  # maxmin_rates' tolerance


def _steps(p: int) -> int:
    """``perf.network._steps``: ``2 * ceil(log2 p)`` for ``p > 1`` (in integers), else 0."""
    if p <= 1:
        return 0
    e = 0
    while (1 << e) < p:
        e += 1
    return 2 * e


def _runs(sorted_vals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct values of a sorted integer array and how often each occurs."""
    n = sorted_vals.size
    uniq = np.empty(n, dtype=np.int64)
    counts = np.zeros(n, dtype=np.int64)
    m = 0
    for i in range(n):
        if i == 0 or sorted_vals[i] != sorted_vals[i - 1]:
            uniq[m] = sorted_vals[i]
            m += 1
        counts[m - 1] += 1
    return uniq[:m], counts[:m]


def _rank(values: np.ndarray, uniq: np.ndarray) -> np.ndarray:
    """Index of each value in the sorted distinct ``uniq``."""
    return np.searchsorted(uniq, values).astype(np.int64)


def _maxmin(
    fi: np.ndarray, li: np.ndarray, cap: np.ndarray, ceil: np.ndarray, w: np.ndarray
) -> np.ndarray:
    """``perf.network.maxmin_rates((fi, li), cap, ceil, w)``, operation for operation."""
    n_flows = ceil.size
    n_links = cap.size
    n_inc = fi.size
    finite = True
    for i in range(n_flows):
        if not np.isfinite(ceil[i]):
            finite = False
    if finite:  # fast path: every flow at its ceiling fits every link
        at_ceil = np.zeros(n_links)
        for e in range(n_inc):
            f = fi[e]
            at_ceil[li[e]] += w[f] * ceil[f]
        fits = True
        for lk in range(n_links):
            if not (at_ceil[lk] <= cap[lk] * (1.0 + 1e-12)):
                fits = False
        if fits:
            return ceil.copy()
    rates = np.zeros(n_flows)
    active = np.ones(n_flows, dtype=np.bool_)
    left = cap.copy()
    load = np.empty(n_links)
    stop = np.empty(n_flows, dtype=np.bool_)
    full = np.empty(n_links, dtype=np.bool_)
    while active.any():
        load[:] = 0.0
        for e in range(n_inc):
            f = fi[e]
            if active[f]:
                load[li[e]] += w[f]
        share_min = np.inf
        for lk in range(n_links):
            s = left[lk] / load[lk] if load[lk] > 0 else np.inf
            if s < share_min or s != s:
                share_min = s
            if share_min != share_min:
                break
        room_min = np.inf
        first = True
        for f in range(n_flows):
            if active[f]:
                r = ceil[f] - rates[f]
                if first or r < room_min or r != r:
                    room_min = r
                    first = False
                if room_min != room_min:
                    break
        step = share_min
        if room_min < step:
            step = room_min
        if not np.isfinite(step):
            raise ValueError("maxmin_rates: a flow crosses no link and has no ceiling")
        for f in range(n_flows):
            if active[f]:
                rates[f] += step
        for lk in range(n_links):
            left[lk] -= step * load[lk]
            c = cap[lk] if cap[lk] >= 1.0 or cap[lk] != cap[lk] else 1.0
            full[lk] = load[lk] > 0 and left[lk] <= _TOL * c
        stop[:] = False
        for e in range(n_inc):
            if full[li[e]]:
                stop[fi[e]] = True
        for f in range(n_flows):
            if stop[f] or rates[f] >= ceil[f] * (1.0 - _TOL):
                active[f] = False
    return rates


def _nan_max(a: np.ndarray) -> float:
    """``float(a.max())`` (NaN propagates); 0.0 for an empty array (the callers pass
    non-empty ones; the guard keeps an empty one from reading past its end)."""
    if a.size == 0:
        return 0.0
    res = a[0]
    for i in range(a.size):
        v = a[i]
        if v != v:
            return v
        if v > res:
            res = v
    return res


def _per_byte(
    fi: np.ndarray,
    li: np.ndarray,
    coef: np.ndarray,
    count: np.ndarray,
    capacity: np.ndarray,
    port: float,
) -> float:
    """A stage's seconds per gradient byte: its slowest flow's ``coef / rate`` at max-min."""
    rate = _maxmin(fi, li, capacity, np.full(count.size, port), count)
    return _nan_max(coef / rate)


def _link_sums(
    fi: np.ndarray, li: np.ndarray, byts: np.ndarray, count: np.ndarray, n_links: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per local link id: the stage's bytes and flows on it (``np.bincount`` in input order)."""
    b = np.zeros(n_links)
    f = np.zeros(n_links)
    for e in range(fi.size):
        b[li[e]] += byts[fi[e]]
        f[li[e]] += count[fi[e]]
    return b, f


def _own_links(
    nics: np.ndarray, nic_uplink: np.ndarray, spine_link: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """The placement's links (its NICs, their uplinks, the spine; sorted ids) and, relabelled
    to their rank there, each NIC row's NIC and uplink, and the spine (-1 if none)."""
    n = nics.size
    has_spine = spine_link >= 0
    own = np.empty(2 * n + (1 if has_spine else 0), dtype=np.int64)
    own[:n] = nics
    own[n : 2 * n] = nic_uplink[nics]
    if has_spine:
        own[2 * n] = spine_link
    link_ids, _ = _runs(np.sort(own))
    local = _rank(own, link_ids)
    return link_ids, local[:n], local[n : 2 * n], local[2 * n] if has_spine else -1


def _spread(
    machine: np.ndarray, rack: np.ndarray, count: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Per NIC row the job's GPUs on its machine and the job's machines in its rack, the
    machines per rack, and the most GPUs on one machine (``network._stages``)."""
    n = machine.size
    m_ids, _ = _runs(np.sort(machine))
    m_rank = _rank(machine, m_ids)
    per_machine = np.zeros(m_ids.size)
    for i in range(n):
        per_machine[m_rank[i]] += count[i]
    r_ids, _ = _runs(np.sort(rack))
    r_rank = _rank(rack, r_ids)
    m_rack = np.full(m_ids.size, -1, dtype=np.int64)
    for i in range(n):
        m_rack[m_rank[i]] = r_rank[i]
    k_of_rack = np.zeros(r_ids.size, dtype=np.int64)
    for m in range(m_ids.size):
        k_of_rack[m_rack[m]] += 1
    g_m = np.empty(n)
    k = np.empty(n)
    for i in range(n):
        g_m[i] = per_machine[m_rank[i]]
        k[i] = float(k_of_rack[r_rank[i]])
    return g_m, k, k_of_rack, int(_nan_max(per_machine))


def _wide(nic: np.ndarray, up: np.ndarray, spine: int) -> tuple[np.ndarray, np.ndarray]:
    """``(flow, link)`` incidence of the network stage: per flow its NIC, uplink, spine."""
    n = nic.size
    cols = 3 if spine >= 0 else 2
    fi = np.empty(n * cols, dtype=np.int64)
    li = np.empty(n * cols, dtype=np.int64)
    for i in range(n):
        fi[i * cols : (i + 1) * cols] = i
        li[i * cols] = nic[i]
        li[i * cols + 1] = up[i]
        if spine >= 0:
            li[i * cols + 2] = spine
    return fi, li


def _emit(
    out_links: np.ndarray,
    out: np.ndarray,
    pos: int,
    link_ids: np.ndarray,
    b: np.ndarray,
    f: np.ndarray,
    begin: float,
    stage_s: float,
    total: float,
) -> int:
    """Append a stage's rows (links it loads, ascending); returns the new row count."""
    for lk in range(link_ids.size):
        if b[lk] > 0:
            out_links[pos] = link_ids[lk]
            out[0, pos] = begin / total
            out[1, pos] = stage_s / total
            out[2, pos] = b[lk] / stage_s
            out[3, pos] = f[lk]
            out[4, pos] = b[lk]
            pos += 1
    return pos


def _traffic(
    gpus: np.ndarray,
    gpu_nic: np.ndarray,
    nic_machine: np.ndarray,
    nic_uplink: np.ndarray,
    machine_rack: np.ndarray,
    link_capacity: np.ndarray,
    spine_link: int,
    terms: np.ndarray,
) -> tuple[bool, np.ndarray, np.ndarray, float]:
    """``placement_traffic`` of ``gpus`` (hierarchical collective), from the cluster's arrays.

    ``terms``: machine bandwidth and latency, rack bandwidth and latency, network bandwidth
    and latency, the flow cap, the gradient volume, the calls per iteration and the three
    tier scales. Returns (any traffic, link id per row, rows start / length / rate / flows /
    bytes as a (5, rows) array, communication seconds per iteration).
    """
    volume, calls, scale = terms[7], terms[8], terms[9:12]
    nothing = (False, np.zeros(0, dtype=np.int64), np.zeros((5, 0)), 0.0)
    nics, counts_i = _runs(np.sort(gpu_nic[gpus]))
    machine = nic_machine[nics]
    if _runs(np.sort(machine))[0].size <= 1:
        return nothing
    link_ids, nic, up, spine = _own_links(nics, nic_uplink, spine_link)
    capacity = link_capacity[link_ids]
    count = counts_i.astype(np.float64)
    g_m, k, k_of_rack, g_max = _spread(machine, machine_rack[machine], count)
    n, n_racks = nics.size, k_of_rack.size
    times = np.zeros(3)
    mt0, mt1 = 0.0, 0.0  # the machine stage
    if g_max > 1:
        mt0, mt1 = 2.0 * (g_max - 1) / g_max / terms[0], 2.0 * (g_max - 1) * terms[1]
    times[0] = scale[0] * (volume * mt0 + calls * mt1)
    port = min(terms[2], terms[6])
    rows = np.arange(n)
    rack_coef = np.zeros(n)
    rack_on = (k > 1).any()
    if rack_on:
        for i in range(n):
            c = 2.0 * (k[i] - 1.0) / k[i] / g_m[i]
            rack_coef[i] = c if k[i] > 1 else 0.0
        steps = 0
        for r in range(n_racks):
            steps = max(steps, _steps(k_of_rack[r]))
        per_byte = _per_byte(rows, nic, rack_coef, count, capacity, port)
        times[1] = scale[1] * (volume * per_byte + calls * (steps * terms[3]))
    wide_fi, wide_li = _wide(nic, up, spine)
    net_coef = np.zeros(n)
    if n_racks > 1:
        head = 2.0 * (n_racks - 1) / n_racks
        for i in range(n):
            net_coef[i] = head / (g_m[i] * k[i])
        lat = _steps(n_racks) * (terms[3] + terms[5])
        per_byte = _per_byte(wide_fi, wide_li, net_coef, count, capacity, min(port, terms[4]))
        times[2] = scale[2] * (volume * per_byte + calls * lat)
    total = 0.0 + times[0] + times[1] + times[2]
    if total <= 0:
        return nothing
    out_links = np.empty(2 * link_ids.size, dtype=np.int64)
    out = np.empty((5, 2 * link_ids.size))
    pos = 0
    for stage in (1, 2):
        if stage == 1 and rack_on and times[1] > 0:
            fi, li, coef, begin = rows, nic, rack_coef, times[0] / 2.0
        elif stage == 2 and n_racks > 1 and times[2] > 0:
            fi, li, coef, begin = wide_fi, wide_li, net_coef, times[0] / 2.0 + times[1]
        else:
            continue
        sv = scale[stage] * volume
        byts = np.empty(n)
        for i in range(n):
            byts[i] = sv * coef[i] * count[i]
        b, f = _link_sums(fi, li, byts, count, link_ids.size)
        pos = _emit(out_links, out, pos, link_ids, b, f, begin, times[stage], total)
    return True, out_links[:pos].copy(), out[:, :pos].copy(), total


def _group_by_link(
    links: np.ndarray, start: np.ndarray, length: np.ndarray, rate: np.ndarray, flows: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``contention.link_phases``' grouping of a data-parallel placement's rows: the rows
    stably sorted by link as a (5, rows) array (ones, start, length, rate, flows), each
    link's first row (and the row count), the links, and each link's highest rate
    (``np.maximum.reduceat``: NaN propagates)."""
    r = links.size
    order = np.empty(r, dtype=np.int64)
    for t in range(r):  # stable insertion sort: the rows come in two sorted runs
        u = t
        while u > 0 and links[order[u - 1]] > links[t]:
            order[u] = order[u - 1]
            u -= 1
        order[u] = t
    packed = np.empty((5, r))
    cuts = np.empty(r + 1, dtype=np.int64)
    ids = np.empty(r, dtype=np.int64)
    peaks = np.empty(r)
    g = -1
    for t in range(r):
        i = order[t]
        packed[0, t] = 1.0
        packed[1, t] = start[i]
        packed[2, t] = length[i]
        packed[3, t] = rate[i]
        packed[4, t] = flows[i]
        v = rate[i]
        if t == 0 or links[i] != ids[g]:
            g += 1
            cuts[g] = t
            ids[g] = links[i]
            peaks[g] = v
        elif peaks[g] == peaks[g] and (v != v or v > peaks[g]):
            peaks[g] = v
    cuts[g + 1] = r
    return packed, cuts[: g + 2].copy(), ids[: g + 1].copy(), peaks[: g + 1].copy()


def _signature(
    gpus: np.ndarray,
    gpu_nic: np.ndarray,
    nic_machine: np.ndarray,
    nic_uplink: np.ndarray,
    machine_rack: np.ndarray,
    nic_local: np.ndarray,
    machine_num_nics: np.ndarray,
    link_capacity: np.ndarray,
    spine: int,
) -> tuple[
    np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray,
    np.ndarray, np.ndarray, int, int,
]:  # fmt: skip
    """The arrays of ``contention.placement_signature``, in one call: the placement's NICs
    (sorted, distinct) and its GPUs on each, the rank of each of its links (NICs, their
    uplinks, the spine) among their sorted distinct ids, the rank of each NIC's machine and
    rack, each NIC's index in its machine and its machine's NIC count, the capacities of the
    distinct links, those links, and the numbers of machines and racks
    (``network.unique_small`` is a sort: the same values, int64 as ``intp`` here)."""
    nics, counts = _runs(np.sort(gpu_nic[gpus]))
    machine = nic_machine[nics]
    rack = machine_rack[machine]
    k = nics.size
    ids = np.empty(2 * k + (1 if spine >= 0 else 0), dtype=np.int64)
    ids[:k] = nics
    ids[k : 2 * k] = nic_uplink[nics]
    if spine >= 0:
        ids[2 * k] = spine
    link_ids = _runs(np.sort(ids))[0]
    m_ids = _runs(np.sort(machine))[0]
    r_ids = _runs(np.sort(rack))[0]
    return (
        nics, counts, _rank(ids, link_ids), _rank(machine, m_ids), _rank(rack, r_ids),
        nic_local[nics], machine_num_nics[machine], link_capacity[link_ids], link_ids,
        m_ids.size, r_ids.size,
    )  # fmt: skip


if HAVE_NUMBA:
    group_by_link = compiled(_group_by_link)
    _steps = compiled(_steps, numpy_errors=False)
    _runs = compiled(_runs, numpy_errors=False)
    _rank = compiled(_rank, numpy_errors=False)
    _maxmin = compiled(_maxmin)
    _nan_max = compiled(_nan_max, numpy_errors=False)
    _per_byte = compiled(_per_byte)
    _link_sums = compiled(_link_sums, numpy_errors=False)
    _own_links = compiled(_own_links, numpy_errors=False)
    _spread = compiled(_spread)
    _wide = compiled(_wide, numpy_errors=False)
    _emit = compiled(_emit)
    traffic = compiled(_traffic)
    signature = compiled(_signature, numpy_errors=False)
else:  # pragma: no cover
    traffic = None
    group_by_link = None
    signature = None

_warmed: set[tuple[bool, ...]] = set()


def warm(
    gpu_nic: np.ndarray,
    nic_machine: np.ndarray,
    nic_uplink: np.ndarray,
    machine_rack: np.ndarray,
    link_capacity: np.ndarray,
) -> None:
    """Load (or compile, the first time on a machine) the kernel now for these cluster arrays'
    types (numba specialises on read-only flags), GPU ids writable or not, rather than on the
    first new placement. Called with :func:`perf.stretch_kernel.warm`."""
    arrays = (gpu_nic, nic_machine, nic_uplink, machine_rack, link_capacity)
    key = tuple(a.flags.writeable for a in arrays)
    if traffic is None or key in _warmed or gpu_nic.size == 0:
        return  # a cluster without GPUs (CPU-only PS jobs) has no GPU 0 to warm on
    _warmed.add(key)
    gpus = np.zeros(1, dtype=np.int64)  # one GPU: returns at once
    frozen = gpus.copy()
    frozen.setflags(write=False)
    for g in (gpus, frozen):
        traffic(g, *arrays, -1, np.ones(12))
    rows = np.ones(2)
    rows.setflags(write=False)
    ids = np.array([0, 1])
    ids.setflags(write=False)
    group_by_link(ids, rows, rows, rows, rows)
