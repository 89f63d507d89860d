"""One round of Themis's auction arbiter as one compiled loop (``Themis._round`` with
``fast_paths``).

The Python form builds each bidder's bid table (``Themis._count_bids`` or the demand bids),
solves the multiple-choice knapsack (``themis.arbitrate``) and the partial allocation
(``themis.partial_fractions``) on lists of tuples. At trace scale the round runs about
100,000 times per run with a few to a few hundred bidders, so the lists, not the arithmetic,
were most of its time. This kernel does the same steps **operation for operation** on
arrays: the same float expressions in the same order, the same strict comparisons and the
same tie orders (a stable sort on the negated improvement over bids kept in bidder order is
Python's sort of ``(-gain, bidder)``), so the winners and the fractions are the same bits
(``tests/test_themis_kernel.py`` compares both on random rounds with many ties).

Without numba (``HAVE_NUMBA`` false) ``auction_round`` is None and Themis keeps the Python
form.
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


if HAVE_NUMBA:
    _bit_length = compiled(_bit_length)
    _knapsack = compiled(_knapsack)
    _rho_of = compiled(_rho_of)
    auction_round = compiled(_auction_round)
else:  # pragma: no cover
    auction_round = None
