"""Themis's auction arbiter compiled: one round (``auction_round``: ``Themis._round`` with
``fast_paths``) and a whole contested auction from the ranking to the last round
(``contested``: ``Themis._contested``).

The Python form builds each bidder's bid table (``Themis._count_bids`` or the demand bids),
solves the multiple-choice knapsack (``themis.arbitrate``) and the partial allocation
(``themis.partial_fractions``) on lists of tuples. At trace scale the round runs about
100,000 times per run with a few to a few hundred bidders, so the lists, not the arithmetic,
were most of its time. This kernel does the same steps **operation for operation** on
arrays: the same float expressions in the same order, the same strict comparisons and the
same tie orders (a stable sort on the negated improvement over bids kept in bidder order is
Python's sort of ``(-gain, bidder)``), so the winners and the fractions are the same bits
(``tests/test_themis_kernel.py`` compares both on random rounds with many ties). ``contested``
adds the steps before the rounds (rho, T_ideal, the rank order, the fairness filter) in the
same way, so an auction costs one call instead of dozens of small array operations; the same
test file decides every contested auction of whole runs both ways.

Without numba (``HAVE_NUMBA`` false) ``auction_round`` and ``contested`` are None and Themis
keeps the Python form.
"""

from __future__ import annotations

import numpy as np

from dlcluster_gym.perf import kernel_cache
from dlcluster_gym.perf.kernel_cache import compiled

HAVE_NUMBA = kernel_cache.HAVE_NUMBA


def _bit_length(x: int) -> int:
    n = 0
    while x > 0:
        x >>= 1
        n += 1
    return n


def _knapsack(
    free: int,
    skip: int,
    start: np.ndarray,
    count: np.ndarray,
    gain: np.ndarray,
    won: np.ndarray,
) -> None:
    """``themis.arbitrate`` over the bid tables ``start``/``count``/``gain`` (CSR rows, one
    per bidder, by increasing count; every bid fits ``free`` and has a positive improvement),
    bidder ``skip`` left out (-1: none): writes the GPUs each bidder wins into ``won``."""
    m = start.size - 1
    for k in range(m):
        won[k] = 0
    if free <= 0 or m == 0:
        return
    use = np.empty(m, dtype=np.int64)
    n_use = 0
    single = True
    total = 0
    for k in range(m):
        if k == skip or start[k + 1] == start[k]:
            continue
        use[n_use] = k
        n_use += 1
        if start[k + 1] - start[k] != 1:
            single = False
        else:
            total += count[start[k]]
    if n_use == 0:
        return
    if single:
        if total <= free:  # every bid fits: all of them win
            for r in range(n_use):
                k = use[r]
                won[k] = count[start[k]]
            return
        # only the best free // g bidders of each count g (larger improvement, then earlier)
        keep = np.zeros(m, dtype=np.bool_)
        done = np.zeros(n_use, dtype=np.bool_)
        for r in range(n_use):
            if done[r]:
                continue
            g = count[start[use[r]]]
            at = np.empty(n_use - r, dtype=np.int64)
            neg = np.empty(n_use - r, dtype=np.float64)
            n_at = 0
            for q in range(r, n_use):
                k = use[q]
                if not done[q] and count[start[k]] == g:
                    done[q] = True
                    at[n_at] = k
                    neg[n_at] = -gain[start[k]]
                    n_at += 1
            order = np.argsort(neg[:n_at], kind="mergesort")
            for q in range(min(n_at, free // g)):
                keep[at[order[q]]] = True
        n_use = 0
        for k in range(m):
            if keep[k]:
                use[n_use] = k
                n_use += 1
    best = np.zeros(free + 1)
    new = np.zeros(free + 1)
    choice = np.zeros((n_use, free + 1), dtype=np.int32)
    for r in range(n_use):
        k = use[r]
        for c in range(free + 1):
            new[c] = best[c]
        for b in range(start[k], start[k + 1]):
            g = count[b]
            gb = gain[b]
            idx = b - start[k] + 1
            for c in range(g, free + 1):
                cand = best[c - g] + gb
                if cand > new[c]:
                    new[c] = cand
                    choice[r, c] = idx
        for c in range(free + 1):
            best[c] = new[c]
    c = free
    for r in range(n_use - 1, -1, -1):
        idx = choice[r, c]
        if idx:
            k = use[r]
            g = count[start[k] + idx - 1]
            won[k] = g
            c -= g


def _rho_of(k: int, gpus: int, before: np.ndarray, start, count, after) -> float:
    if gpus == 0:
        return before[k]
    for b in range(start[k], start[k + 1]):
        if count[b] == gpus:
            return after[b]
    return before[k]  # unreachable: a bidder wins only counts it bid for


def _auction_round(
    demand: np.ndarray,
    held: np.ndarray,
    tunable: np.ndarray,
    rho: np.ndarray,
    share: np.ndarray,
    ideal: np.ndarray,
    free: int,
    lease_s: float,
    prune: bool,
    partial: bool,
) -> tuple[np.ndarray, np.ndarray]:
    """One arbiter round over the bidders in rank order: (GPUs won, fraction of the lease
    kept) per bidder. Bidder i demands ``demand[i]`` and holds ``held[i]`` GPUs (its demand
    while waiting); ``tunable``: it bids for the powers of two below its demand too;
    ``rho``, ``share`` (0 for demand-only bids) and ``ideal`` as in ``Themis._count_bids``.
    ``prune``: keep per count g only the best ``free - g + 2`` bids (``_count_bids``; the
    demand-only round keeps every bid); ``partial``: compute the partial allocation."""
    n = demand.size
    won_in = np.zeros(n, dtype=np.int64)
    frac_in = np.ones(n)
    if n == 0 or free <= 0:
        return won_in, frac_in
    # The bid tables (bid_tables_scalar): per bidder its bids by increasing count.
    cap = 0
    for i in range(n):
        cap += 1 + _bit_length(demand[i])
    b_owner = np.empty(cap, dtype=np.int64)
    b_count = np.empty(cap, dtype=np.int64)
    b_after = np.empty(cap)
    b_gain = np.empty(cap)
    before = np.empty(n)
    nb = 0
    for i in range(n):
        d = demand[i]
        base = d / held[i]
        r = rho[i]
        w = share[i]
        bf = r + w * (1.0 - base) + lease_s / ideal[i]
        before[i] = bf
        bits = _bit_length(d - 1) if tunable[i] else 0
        for b in range(bits + 1):
            g = (1 << b) if b < bits else d
            if b < bits and g >= d:
                continue
            if g > free:
                break  # increasing counts
            af = r + w * (d / g - base)
            gn = bf - af
            if gn > 0:
                b_owner[nb] = i
                b_count[nb] = g
                b_after[nb] = af
                b_gain[nb] = gn
                nb += 1
    keep = np.ones(nb, dtype=np.bool_)
    if prune and nb:
        seen = np.zeros(nb, dtype=np.bool_)
        for s in range(nb):
            if seen[s]:
                continue
            g = b_count[s]
            at = np.empty(nb - s, dtype=np.int64)
            neg = np.empty(nb - s, dtype=np.float64)
            n_at = 0
            for q in range(s, nb):
                if not seen[q] and b_count[q] == g:
                    seen[q] = True
                    at[n_at] = q
                    neg[n_at] = -b_gain[q]
                    n_at += 1
            limit = free - g + 2
            if n_at > limit:  # only the best bids of count g can be in an optimum
                order = np.argsort(neg[:n_at], kind="mergesort")
                for q in range(limit, n_at):
                    keep[at[order[q]]] = False
    # The bidders left with a bid, in order, as CSR rows.
    slot = np.full(n, -1, dtype=np.int64)
    m = 0
    for s in range(nb):
        if keep[s] and slot[b_owner[s]] < 0:
            slot[b_owner[s]] = m
            m += 1
    if m == 0:
        return won_in, frac_in
    member = np.empty(m, dtype=np.int64)
    start = np.zeros(m + 1, dtype=np.int64)
    for i in range(n):
        if slot[i] >= 0:
            member[slot[i]] = i
    for s in range(nb):
        if keep[s]:
            start[slot[b_owner[s]] + 1] += 1
    for k in range(m):
        start[k + 1] += start[k]
    count = np.empty(start[m], dtype=np.int64)
    after = np.empty(start[m])
    gain = np.empty(start[m])
    fill = start[:m].copy()
    m_before = np.empty(m)
    for k in range(m):
        m_before[k] = before[member[k]]
    for s in range(nb):
        if keep[s]:
            k = slot[b_owner[s]]
            count[fill[k]] = b_count[s]
            after[fill[k]] = b_after[s]
            gain[fill[k]] = b_gain[s]
            fill[k] += 1
    won = np.zeros(m, dtype=np.int64)
    _knapsack(free, -1, start, count, gain, won)
    frac = np.ones(m)
    if partial:
        trivial = True
        for k in range(m):
            if start[k + 1] - start[k] > 1 or won[k] == 0:
                trivial = False
                break
        if not trivial:
            alt = np.zeros(m, dtype=np.int64)
            for i in range(m):
                if won[i] == 0:
                    continue
                _knapsack(free, i, start, count, gain, alt)
                ratio = 1.0
                for j in range(m):
                    if j != i and alt[j] != won[j]:
                        ratio *= _rho_of(j, alt[j], m_before, start, count, after) / _rho_of(
                            j, won[j], m_before, start, count, after
                        )
                frac[i] = ratio if ratio < 1.0 else 1.0
    for k in range(m):
        won_in[member[k]] = won[k]
        frac_in[member[k]] = frac[k]
    return won_in, frac_in


def _group_round(
    members: np.ndarray,
    n_members: int,
    dem: np.ndarray,
    count: np.ndarray,
    tunable: np.ndarray,
    rho: np.ndarray,
    share: np.ndarray,
    ideal: np.ndarray,
    n_run: int,
    free: int,
    lease_s: float,
    tables: bool,
    partial: bool,
    out_pos: np.ndarray,
    out_gpus: np.ndarray,
    out_frac: np.ndarray,
    n_out: int,
) -> tuple[int, int]:
    """``Themis._round`` over the first ``n_members`` positions of ``members`` (rank order):
    its winners appended to ``out_*`` from ``n_out`` on; returns (new ``n_out``, GPUs won)."""
    m = n_members
    d = np.empty(m, dtype=np.int64)
    held = np.empty(m, dtype=np.int64)
    tun = np.zeros(m, dtype=np.bool_)
    r = np.empty(m)
    w = np.zeros(m)
    idl = np.empty(m)
    for q in range(m):
        k = members[q]
        d[q] = dem[k]
        r[q] = rho[k]
        idl[q] = ideal[k]
        if tables:
            held[q] = count[k] if k < n_run else dem[k]
            tun[q] = tunable[k]
            w[q] = share[k]
        else:
            held[q] = dem[k]
    won, frac = _auction_round(d, held, tun, r, w, idl, free, lease_s, tables, partial)
    total = 0
    for q in range(m):
        if won[q]:
            out_pos[n_out] = members[q]
            out_gpus[n_out] = won[q]
            out_frac[n_out] = frac[q]
            n_out += 1
            total += won[q]
    return n_out, total


def _contested(
    ids: np.ndarray,
    done: np.ndarray,
    remaining: np.ndarray,
    demand: np.ndarray,
    compute: np.ndarray,
    penalty: np.ndarray,
    held: np.ndarray,
    arrival: np.ndarray,
    iters: np.ndarray,
    ic: np.ndarray,
    paid_until: np.ndarray,
    least: np.ndarray,
    is_exp: np.ndarray,
    n_run: int,
    now: float,
    fair_share: float,
    lease_s: float,
    n_elig: int,
    free: int,
    tuned: bool,
    known: bool,
    partial: bool,
    paid_after: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``Themis._arbitrate``'s arbiter for ``placement="penalty"``, from the ranking to the
    last round, over the active jobs ``ids`` (the first ``n_run`` running, ``is_exp``
    flagging the expired ones, then the waiting ones) with their iterations ``done`` and
    ``remaining`` (per position); the other inputs are Themis's per-job arrays (indexed by
    job id): demand, compute, placement penalty, GPUs held, arrival, with ``known`` lengths
    the iterations and iterations x compute, the end of a partial payment, and the smallest
    bid count. The steps: rho (``_rho_bidders``), T_ideal (``_ideal``), the rank order (worst
    rho first, ties by the lower job id: ``lexsort``'s order, as two stable sorts), the
    fairness filter, the main, leftover and last rounds (``_round``), with the same float
    expressions in the same order. Returns the winners in the order ``_round`` appends them:
    (position in ``ids``, GPUs, fraction of the lease)."""
    n = ids.size
    dem = np.empty(n, dtype=np.int64)
    count = np.empty(n, dtype=np.int64)
    smallest = np.empty(n, dtype=np.int64)
    for i in range(n):
        j = ids[i]
        dem[i] = demand[j]
        count[i] = held[j]
        smallest[i] = least[j]
    rho = np.empty(n)
    ideal = np.empty(n)
    share = np.empty(n)
    tables = False
    for i in range(n):
        j = ids[i]
        it = compute[j]
        if i < n_run:
            it = it * penalty[j]
            if tuned:
                it = it * (dem[i] / count[i])
        over = dem[i] / fair_share
        mx = over if over > 1.0 else 1.0
        if known:
            shared = (now - arrival[j]) + (iters[j] - done[i]) * it
            ideal[i] = ic[j] * mx
            rho[i] = shared / ideal[i]
        else:
            shared = (now - arrival[j]) + remaining[i] * it
            ideal[i] = (done[i] + remaining[i]) * compute[j] * mx
            rho[i] = shared / ideal[i]
        if tuned and smallest[i] < dem[i]:
            tables = True
    if tables:
        for i in range(n):
            j = ids[i]
            pen = penalty[j] if i < n_run else 1.0
            share[i] = remaining[i] * compute[j] * pen / ideal[i]
    by_id = np.argsort(ids, kind="mergesort")
    neg = np.empty(n)
    for q in range(n):
        neg[q] = -rho[by_id[q]]
    order = by_id[np.argsort(neg, kind="mergesort")]  # stable: ties stay in id order
    tunable = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        tunable[i] = smallest[i] == 1
    groups = np.empty((3, n), dtype=np.int64)
    sizes = np.zeros(3, dtype=np.int64)
    for q in range(n):
        k = order[q]
        bids = (is_exp[k] if k < n_run else True) and smallest[k] <= free
        if not bids:
            continue
        if paid_until[ids[k]] > paid_after:
            groups[2, sizes[2]] = k
            sizes[2] += 1
        elif q < n_elig:
            groups[0, sizes[0]] = k
            sizes[0] += 1
        else:
            groups[1, sizes[1]] = k
            sizes[1] += 1
    out_pos = np.empty(n, dtype=np.int64)
    out_gpus = np.empty(n, dtype=np.int64)
    out_frac = np.empty(n)
    n_out = 0
    for g in range(3):
        if sizes[g] and free:
            n_out, won = _group_round(
                groups[g], sizes[g], dem, count, tunable, rho, share, ideal, n_run, free,
                lease_s, tables, partial, out_pos, out_gpus, out_frac, n_out,
            )  # fmt: skip
            free -= won
    return out_pos[:n_out], out_gpus[:n_out], out_frac[:n_out]


if HAVE_NUMBA:
    _bit_length = compiled(_bit_length)
    _knapsack = compiled(_knapsack)
    _rho_of = compiled(_rho_of)
    _auction_round = compiled(_auction_round)
    auction_round = _auction_round
    _group_round = compiled(_group_round)
    contested = compiled(_contested)
else:  # pragma: no cover
    auction_round = None
    contested = None
