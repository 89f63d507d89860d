"""Placement search over a free-GPU mask: first fit, and most-consolidated by tier.

All functions are pure: they take the cluster, a boolean free mask and per-machine free
counts, and return GPU ids (int64 array) or None. GPU ids are numbered machine by machine and
machines rack by rack, so "first fit over machines in index order" is the first free ids.
"""

from __future__ import annotations

import numpy as np

from dlcluster_gym.cluster.topology import Cluster, Shape, Tier

_NO_FIT = np.iinfo(np.int64).max  # stands in for free counts too small to hold a job
_SMALL = 64  # up to this many machines or racks, best-fit scans run on Python lists


def free_count(free_per_rack: np.ndarray) -> int:
    """Free GPUs in total (an integer sum: Python's ``sum`` on a few racks, numpy's beyond)."""
    if free_per_rack.size <= _SMALL:
        return sum(free_per_rack.tolist())
    return int(free_per_rack.sum())


def best_fit(counts: np.ndarray, n: int) -> int:
    """Index of the fewest ``counts`` that hold ``n`` (the lowest index on ties), -1 if none:
    best fit over machines or racks (a Python scan on a few, ``argmin`` beyond)."""
    if counts.size <= _SMALL:
        best, most = -1, _NO_FIT
        for i, f in enumerate(counts.tolist()):
            if n <= f < most:  # strictly fewer: the lowest index on ties, as argmin
                best, most = i, f
        return best
    fits = np.where(counts >= n, counts, _NO_FIT)
    best = int(fits.argmin())  # the first of the fewest among those that hold n
    return -1 if fits[best] == _NO_FIT else best


def add_free_counts(
    cluster: Cluster,
    free_per_machine: np.ndarray,
    free_per_rack: np.ndarray,
    gpus: np.ndarray,
    d: int,
) -> None:
    """Add ``d`` to the free counts of the machines and racks of ``gpus`` (in place)."""
    if gpus.size <= 16:  # a Python loop beats ufunc.at's overhead on a few GPUs
        # count GPUs per machine first: one array update per machine and per rack
        counts: dict[int, int] = {}
        for m in cluster.gpu_machine[gpus].tolist():
            counts[m] = counts.get(m, 0) + 1
        rack_of = cluster._machine_rack_list
        if len(counts) == 1:
            ((m, k),) = counts.items()
            free_per_machine[m] += d * k
            free_per_rack[rack_of[m]] += d * k
            return
        per_rack: dict[int, int] = {}
        for m, k in counts.items():
            free_per_machine[m] += d * k
            r = rack_of[m]
            per_rack[r] = per_rack.get(r, 0) + k
        for r, k in per_rack.items():
            free_per_rack[r] += d * k
    else:
        np.add.at(free_per_machine, cluster.gpu_machine[gpus], d)
        np.add.at(free_per_rack, cluster.gpu_rack[gpus], d)


def first_fit(free_mask: np.ndarray, n: int) -> np.ndarray | None:
    """The ``n`` lowest-numbered free GPUs (first fit over machines in index order)."""
    ids = free_mask.nonzero()[0]  # flatnonzero without its ravel (the mask is flat)
    return ids[:n] if ids.size >= n else None


def _take_from_machines(
    cluster: Cluster,
    free_mask: np.ndarray,
    machines: np.ndarray,
    n: int,
    free_per_machine: np.ndarray | None = None,
) -> np.ndarray:
    """The first ``n`` free GPUs of ``machines`` in that order (each machine's in id order;
    fewer when they hold fewer). ``free_per_machine`` lets a long order be cut first."""
    grid = cluster.gpu_grid
    if grid is not None:  # equal machines: whole rows of the GPU grid at once
        if free_per_machine is not None and machines.size > 64:  # only the rows needed
            k = int(np.searchsorted(np.cumsum(free_per_machine[machines]), n)) + 1
            machines = machines[:k]
        return grid[machines][free_mask.reshape(grid.shape)[machines]][:n]
    out: list[np.ndarray] = []
    need = n
    for m in machines.tolist():
        gpus = cluster.machine_gpus(m)
        free = gpus[free_mask[gpus]]
        take = free[:need]
        out.append(take)
        need -= take.size
        if need == 0:
            break
    return np.concatenate(out)


def _fullest_first(cluster: Cluster, free_per_machine: np.ndarray, rack: int) -> np.ndarray:
    """Machines of ``rack``, most free GPUs first (lowest id on ties)."""
    if cluster.gpu_grid is not None:  # machines of a rack are consecutive ids
        first, k = cluster.rack_machine_span[rack]
        return first + np.argsort(-free_per_machine[first : first + k], kind="stable")
    machines = cluster.rack_machines(rack)
    return machines[np.argsort(-free_per_machine[machines], kind="stable")]


def on_one_machine(
    cluster: Cluster,
    free_mask: np.ndarray,
    free_per_machine: np.ndarray,
    n: int,
    machines: np.ndarray | None = None,
) -> np.ndarray | None:
    """Best fit: the machine with the fewest free GPUs that holds ``n`` (lowest id on ties)."""
    fpm = free_per_machine if machines is None else free_per_machine[machines]
    best = best_fit(fpm, n)
    if best < 0:
        return None
    m = best if machines is None else int(machines[best])
    grid = cluster.gpu_grid
    gpus = grid[m] if grid is not None else cluster.machine_gpus(m)
    return gpus[free_mask[gpus]][:n]


def on_one_rack(
    cluster: Cluster,
    free_mask: np.ndarray,
    free_per_machine: np.ndarray,
    free_per_rack: np.ndarray,
    n: int,
) -> np.ndarray | None:
    """Best-fit rack (fewest free GPUs that hold ``n``), packed onto its fullest-free machines."""
    rack = best_fit(free_per_rack, n)
    if rack < 0:
        return None
    return _take_from_machines(
        cluster, free_mask, _fullest_first(cluster, free_per_machine, rack), n
    )


def spread_packed(
    cluster: Cluster,
    free_mask: np.ndarray,
    free_per_machine: np.ndarray,
    free_per_rack: np.ndarray,
    n: int,
) -> np.ndarray | None:
    """Any placement, as few racks and machines as greedy packing gives."""
    if free_count(free_per_rack) < n:
        return None
    if cluster.gpu_grid is not None:  # the same order as below, from one sort
        # racks with most free first (lowest id on ties), in each its fullest machines first;
        # racks with nothing free come last and give nothing
        rack_free = free_per_rack[cluster.machine_rack]
        order = np.lexsort((-free_per_machine, cluster.machine_rack, -rack_free))
        return _take_from_machines(cluster, free_mask, order, n, free_per_machine)
    return _pack_racks(
        cluster, free_mask, free_per_machine, free_per_rack, _racks_fullest_first(free_per_rack), n
    )


def _racks_fullest_first(free_per_rack: np.ndarray) -> np.ndarray:
    """Racks with free GPUs, most free first (lowest id on ties)."""
    order = np.argsort(-free_per_rack, kind="stable")
    return order[free_per_rack[order] > 0]


def _pack_racks(
    cluster: Cluster,
    free_mask: np.ndarray,
    free_per_machine: np.ndarray,
    free_per_rack: np.ndarray,
    racks: np.ndarray,
    n: int,
) -> np.ndarray:
    """``n`` GPUs taken rack by rack in the given order, fullest machines first in each."""
    if cluster.gpu_grid is not None:  # one machine order over all the racks, then one take
        rank = np.full(cluster.num_racks, racks.size, dtype=np.int64)
        rank[racks] = np.arange(racks.size)
        of_machine = rank[cluster.machine_rack]
        order = np.lexsort((-free_per_machine, of_machine))  # stable: lowest id on ties
        order = order[: int(np.searchsorted(of_machine[order], racks.size))]
        return _take_from_machines(cluster, free_mask, order, n, free_per_machine)
    out: list[np.ndarray] = []
    need = n
    for rack in racks.tolist():
        order = _fullest_first(cluster, free_per_machine, rack)
        take = _take_from_machines(cluster, free_mask, order, min(need, int(free_per_rack[rack])))
        out.append(take)
        need -= take.size
        if need == 0:
            break
    return np.concatenate(out)


def consolidated(
    cluster: Cluster,
    free_mask: np.ndarray,
    free_per_machine: np.ndarray,
    free_per_rack: np.ndarray,
    n: int,
    max_tier: Tier = Tier.NETWORK,
) -> np.ndarray | None:
    """The most consolidated placement available, no wider than ``max_tier``."""
    gpus = on_one_machine(cluster, free_mask, free_per_machine, n)
    if gpus is not None or max_tier == Tier.MACHINE:
        return gpus
    gpus = on_one_rack(cluster, free_mask, free_per_machine, free_per_rack, n)
    if gpus is not None or max_tier == Tier.RACK:
        return gpus
    return spread_packed(cluster, free_mask, free_per_machine, free_per_rack, n)


def consolidated_shape(
    free_per_machine: list[int],
    free_per_rack: list[int],
    rack_machines: list[list[int]],
    n: int,
) -> Shape | None:
    """The canonical count shape (``Cluster.placement_shape``) of the placement that
    ``consolidated`` (up to the network tier) would return for ``n`` GPUs, from the free
    counts alone, without choosing GPUs; None where it returns None. ``rack_machines``: each
    rack's machine ids in id order (``ConsolidatedShapes`` answers many sizes on the same
    counts)."""
    return ConsolidatedShapes(free_per_machine, free_per_rack, rack_machines).shape(n)


class ConsolidatedShapes:
    """``consolidated_shape`` for many sizes on the same free counts: the same choices as
    ``consolidated``, the best-fit machine, else the best-fit rack packed onto its fullest
    machines, else racks with the most free first, each packed onto its fullest machines."""

    def __init__(
        self, free_per_machine: list[int], free_per_rack: list[int], rack_machines: list[list[int]]
    ) -> None:
        self.fpm, self.fpr, self.rack_machines = free_per_machine, free_per_rack, rack_machines
        self.most = max(free_per_machine) if free_per_machine else 0
        self.total = sum(free_per_rack)
        self._sorted: dict[int, list[int]] = {}  # rack -> its machines' free counts, most first
        self._order: list[int] | None = None  # racks with free GPUs, most free first

    def _counts(self, rack: int) -> list[int]:
        got = self._sorted.get(rack)
        if got is None:
            fpm = self.fpm
            got = self._sorted[rack] = sorted(
                (fpm[m] for m in self.rack_machines[rack]), reverse=True
            )
        return got

    def shape(self, n: int) -> Shape | None:
        """The shape for ``n`` GPUs (None: fewer than ``n`` free)."""
        if n <= self.most:
            return ((n,),)
        if n > self.total:
            return None
        best, fewest = -1, _NO_FIT  # best-fit rack, as ``best_fit`` (the lowest id on ties)
        for r, f in enumerate(self.fpr):
            if n <= f < fewest:
                best, fewest = r, f
        if best >= 0:
            return (_take_counts(self._counts(best), n),)
        if self._order is None:  # most free first, the lowest id on ties (a stable sort)
            fpr = self.fpr
            self._order = [r for r in sorted(range(len(fpr)), key=lambda r: -fpr[r]) if fpr[r]]
        racks: list[tuple[int, ...]] = []
        need = n
        for r in self._order:
            take = _take_counts(self._counts(r), need)
            racks.append(take)
            need -= sum(take)
            if need == 0:
                break
        racks.sort(key=lambda t: (sum(t), t), reverse=True)
        return tuple(racks)


def _take_counts(free: list[int], n: int) -> tuple[int, ...]:
    """GPUs taken per machine when up to ``n`` are packed onto machines with ``free`` GPUs
    (most first; non-increasing; machines with nothing taken left out)."""
    out: list[int] = []
    for f in free:
        if n <= 0 or f == 0:
            break
        k = f if f < n else n
        out.append(k)
        n -= k
    return tuple(out)


def at_tier(
    cluster: Cluster,
    free_mask: np.ndarray,
    free_per_machine: np.ndarray,
    free_per_rack: np.ndarray,
    n: int,
    tier: Tier,
) -> np.ndarray | None:
    """A placement at exactly ``tier`` (None when ``n`` cannot be placed that way)."""
    if tier == Tier.MACHINE:
        return on_one_machine(cluster, free_mask, free_per_machine, n)
    if tier == Tier.RACK:
        return on_one_rack(cluster, free_mask, free_per_machine, free_per_rack, n)
    return spread_packed(cluster, free_mask, free_per_machine, free_per_rack, n)


def fewest_machines(
    cluster: Cluster,
    free_mask: np.ndarray,
    free_per_machine: np.ndarray,
    n: int,
    strict: bool = True,
) -> np.ndarray | None:
    """A placement on as few machines as possible, ignoring racks (Tiresias, Dally 3.2/3.4).

    Best fit on one machine when one holds ``n``; otherwise the machines with the most free
    GPUs (index order on ties) across the whole cluster. ``strict``: only if that uses the
    minimum number of machines the job could ever occupy (on an empty cluster), else None;
    not strict: the greedy packing over whatever is free.
    """
    if n <= cluster.max_gpus_per_machine:
        gpus = on_one_machine(cluster, free_mask, free_per_machine, n)
        if gpus is not None or strict:
            return gpus
    order = np.argsort(-free_per_machine, kind="stable")
    k = _machines_needed(cluster, free_per_machine[order], n, strict)
    return None if k is None else _take_from_machines(cluster, free_mask, order[:k], n)


def _machines_needed(cluster: Cluster, free_desc: np.ndarray, n: int, strict: bool) -> int | None:
    """How many of the machines with the most free GPUs (``free_desc``: free GPUs per machine,
    most first) hold ``n`` GPUs; None when all of them do not, or (``strict``) when that is
    more machines than ``n`` GPUs could ever need."""
    k = int(np.searchsorted(np.cumsum(free_desc), n)) + 1
    if k > free_desc.size:
        return None
    if strict and k > int(np.searchsorted(cluster.machines_by_size_cumsum, n)) + 1:
        return None
    return k


def fewest_machines_exists(cluster: Cluster, free_per_machine: np.ndarray, n: int) -> bool:
    """Whether ``fewest_machines(..., n, strict=True)`` finds a placement, from the free-GPU
    counts alone (no GPUs are chosen): the same test, for jobs larger than a machine."""
    if n <= cluster.max_gpus_per_machine:
        return n <= int(free_per_machine.max(initial=0))
    free_desc = np.sort(free_per_machine)[::-1]
    return _machines_needed(cluster, free_desc, n, strict=True) is not None


def packed_on(
    cluster: Cluster,
    free_mask: np.ndarray,
    free_per_machine: np.ndarray,
    n: int,
    machines: np.ndarray,
) -> np.ndarray | None:
    """``n`` GPUs on as few of ``machines`` as possible (e.g. the machines of one GPU type):
    best fit on one machine when one holds ``n``, else the machines with the most free GPUs
    first (index order on ties)."""
    fpm = free_per_machine[machines]
    if int(fpm.sum()) < n:
        return None
    gpus = on_one_machine(cluster, free_mask, free_per_machine, n, machines)
    if gpus is not None:
        return gpus
    order = machines[np.argsort(-fpm, kind="stable")]
    return _take_from_machines(cluster, free_mask, order, n, free_per_machine)


def candidates(
    cluster: Cluster,
    free_mask: np.ndarray,
    free_per_machine: np.ndarray,
    free_per_rack: np.ndarray,
    n: int,
    tier: Tier,
    limit: int = 10,
) -> list[np.ndarray]:
    """Up to ``limit`` distinct placements of ``n`` GPUs at exactly ``tier`` (Cassini's
    placement candidates, 4.4.2 step 1: same tier, different machines/racks).

    Machine tier: one per machine that holds ``n``, best fit first. Rack tier: per rack that
    holds ``n`` (best fit first), packed onto its fullest machines, then first fit within it.
    Network tier: greedy packing starting from each rack in turn (fullest racks first).
    """
    out: list[np.ndarray] = []
    seen: set[bytes] = set()

    def add(g: np.ndarray | None) -> bool:
        if g is not None and g.size == n:
            g = np.sort(g)
            key = g.tobytes()
            if key not in seen:
                seen.add(key)
                out.append(g)
        return len(out) >= limit

    if tier == Tier.MACHINE:
        ok = np.flatnonzero(free_per_machine >= n)
        for m in ok[np.argsort(free_per_machine[ok], kind="stable")].tolist():
            gpus = cluster.machine_gpus(m)
            if add(gpus[free_mask[gpus]][:n]):
                break
        return out
    if tier == Tier.RACK:
        ok = np.flatnonzero(free_per_rack >= n)
        for r in ok[np.argsort(free_per_rack[ok], kind="stable")].tolist():
            if add(
                _take_from_machines(
                    cluster, free_mask, _fullest_first(cluster, free_per_machine, r), n
                )
            ):
                break
            if add(_take_from_machines(cluster, free_mask, cluster.rack_machines(r), n)):
                break
        return [g for g in out if cluster.placement_tier(g) == Tier.RACK]
    if int(free_per_rack.sum()) < n:
        return out
    order = _racks_fullest_first(free_per_rack)
    for i in range(order.size):
        racks = np.roll(order, -i)
        if add(_pack_racks(cluster, free_mask, free_per_machine, free_per_rack, racks, n)):
            break
    return out
