"""What an adaptive-parallelism (Crius) job sends over the shared links, as Cassini phases.

Every job's flows sit on real links shared max-min fairly with every other job
(``perf.contention``). An adaptive-parallelism job runs the best plan of ``perf.parallelism``
(Crius 5.1, Fig. 10); this module turns that plan's communication into per-link
:class:`~dlcluster_gym.perf.contention.LinkPhases`, so that the engine shares its links with the
other jobs exactly as it shares a data-parallel job's.

**Which traffic crosses a shared link.** Only what the plan itself prices over a NIC (the
machine's network interface, ``Hardware.nic`` or its cross-rack share ``Hardware.wide``);
everything it prices on the intra-machine link (NVLink / PCIe) stays inside the machine, on
ports no other job uses. Per plan operator (the plan's GPUs are the placement's GPUs by rack,
then id; stages are consecutive blocks of ``g = n / S`` of them, tensor shards innermost, as in
``perf.parallelism``):

- *data-parallel all-reduce* of stage ``i`` (Crius 5.1, ``AR_i``): its hierarchical ring
  crosses machines when the stage's replicas of one shard sit on ``k > 1`` machines; each
  machine's NIC then carries ``min(p, t) * 2 (k - 1) / k`` times the stage's fp16 gradient
  shard, spread evenly over the machine's GPUs of the stage;
- *pipeline send/recv* into stage ``i`` (``X_i``): when the plan puts the stage boundary on a
  machine boundary, the boundary activations (forward) and their gradients (backward) of one
  micro-batch leave the ``g`` GPUs of stage ``i - 1`` and enter the ``g`` GPUs of stage ``i``
  (``2 x`` the boundary bytes over each side's NICs);
- *tensor-parallel collectives* of stage ``i``: only when its tensor groups are wider than a
  machine (``t > p``): the NIC part of the hierarchical all-reduce (dense layers) and the
  bytes of the all-to-all (MoE experts) that leave a machine, per micro-batch.

Each GPU's bytes go through its own NIC; when the GPUs of the operator (a stage, or the two
stages of a boundary) span racks, they also cross those NICs' rack (rail) uplinks and the spine
link, all of them (the plan prices such a collective at the cross-rack share for all its bytes,
as a ring waits for its slowest edge). A placement that does not match the plan's packed layout
(fewer GPUs per machine than ``p``) sends the same bytes per GPU through the NICs it has.

**How it is laid on the circle** (Cassini thesis 4.1-4.3: Down = compute, then Up). The Up
time ``U`` is the plan's communication per iteration (``Plan.comm_s``: iteration time minus
the same pipeline without communication; none of it overlaps compute, so the engine's overlap
is 0), at the end of the iteration. It splits into the three terms of Crius 5.1's iteration
time (phases are fractions of their sum): first the tensor-parallel time
(``sum_i coll_i + (B - 1)(max_i C_i - max_i comp_i)``), then the exposed send/recv
``sum_i X_i`` (one micro-batch through every boundary, in stage order), then the
data-parallel synchronisation ``max_i AR_i`` after the pipeline flush (every stage's
all-reduce starts at once and lasts its own ``AR_i``). During its operator a GPU moves its
bytes at a constant rate (bytes / the operator's time, latency included, as
``perf.network.placement_traffic``); a tensor-parallel operator keeps its collective's rate
for the whole tensor-parallel time. The other ``B - 1`` micro-batches' send/recv, hidden
behind compute in Crius 5.1, are not put on the links (our choice: only what the iteration
waits for is stretched). One flow per GPU that sends.

GPUs of several types run the slowest type's plan on its ``Hardware``
(``ParallelismSpeeds.plan_hardware``), and so does their traffic.

Memoized in three levels, so that a placement costs a few dictionary look-ups once its plan
and shape were seen: the per-GPU rates of a plan (:func:`plan_rates`, per (model, hardware, GPU
count); the plan search itself is cached by ``perf.parallelism``), the phases on one link per
(rates, which plan GPUs sit on the link, which operators cross racks), so that isomorphic
placements share their :class:`LinkPhases`, and the whole ``{link: phases}`` per exact
placement (:class:`AdaptiveTraffic`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import numpy as np

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.perf.contention import LinkPhases
from dlcluster_gym.perf.parallelism import (
    Hardware,
    ParallelismSpeeds,
    Plan,
    _stage_table,
    _StageTable,
    stage_bounds,
)
from dlcluster_gym.workload.large_models import FP16, parse_large_model

__all__ = ["AdaptiveTraffic", "PlanRates", "plan_rates"]


@dataclass(frozen=True, eq=False)
class PlanRates:
    """A plan's shared-link traffic, one row per operator that crosses machines.

    Row ``r`` starts ``offset[r]`` into the Up phase and lasts ``length[r]`` (both fractions of
    the Up time); plan GPU ``q`` moves ``rate[r, q]`` bytes/s through its NIC meanwhile; the
    operator's GPUs are plan positions ``[lo[r], hi[r])``.
    """

    offset: np.ndarray
    length: np.ndarray
    rate: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


def _component_times(tab: _StageTable, choice: np.ndarray) -> tuple[float, float, float]:
    """(tensor-parallel, send/recv, data-parallel) seconds of a plan's communication."""
    idx = np.arange(choice.size)
    comp, coll = tab.comp[idx, choice], tab.coll[idx, choice]
    tp = float(coll.sum() + (tab.microbatches - 1) * ((comp + coll).max() - comp.max()))
    return max(tp, 0.0), float(tab.xfer.sum()), float(tab.ar[idx, choice].max())


@cache
def plan_rates(model_name: str, hw: Hardware, n: int, plan: Plan) -> PlanRates | None:
    """Per operator that crosses machines, each plan GPU's NIC rate (module docstring);
    None when the plan sends nothing over a NIC."""
    S = plan.stages
    tab = _stage_table(model_name, hw, n, S)
    choice = np.array([int(np.flatnonzero(tab.tensor == t)[0]) for _, t in plan.splits])
    tp_s, pp_s, dp_s = _component_times(tab, choice)
    up = tp_s + pp_s + dp_s
    if up <= 0.0:
        return None
    model, batch = parse_large_model(model_name)
    lay = model.layers
    g = n // S
    p = hw.gpus_per_node
    B = tab.microbatches
    mb = batch / B
    bounds = stage_bounds(model.name, S)
    rows: list[tuple[float, float, np.ndarray, int, int]] = []  # offset, seconds, rate, lo, hi
    for i, (d, t) in enumerate(plan.splits):
        k_i = int(choice[i])
        lo, hi = i * g, (i + 1) * g
        sl = slice(bounds[i], bounds[i + 1])
        coll = float(tab.coll[i, k_i])
        if t > p and coll > 0.0 and tp_s > 0.0:  # tensor groups span machines
            b = mb / d
            dense = ~lay.tp_alltoall[sl]
            vol = lay.tp_bytes[sl] * lay.tp_calls[sl] * b
            k = t // p
            nic_b = 2.0 * (k - 1) / k * float(vol[dense].sum())
            nic_b += p * float(vol[~dense].sum()) / t * (t - p) / t
            rate = np.zeros(n)
            rate[lo:hi] = nic_b / p / coll
            rows.append((0.0, tp_s, rate, lo, hi))
        m = min(d, max(p // t, 1))
        k = d // m
        ar = float(tab.ar[i, k_i])
        if g > 1 and k > 1 and ar > 0.0:  # replicas of a shard on several machines
            grads = FP16 * float(lay.params[sl].sum()) / t
            per_gpu = min(p, t) * 2.0 * (k - 1) / k * grads / min(p, g)
            rate = np.zeros(n)
            rate[lo:hi] = per_gpu / ar
            rows.append((tp_s + pp_s, ar, rate, lo, hi))
    at = tp_s
    for i in range(1, S):
        x = float(tab.xfer[i])
        lo = i * g
        crosses = (hw.wide is not None and lo in hw.rack_breaks) or lo % p == 0
        if crosses and x > 0.0:
            vol = float(lay.out_bytes[bounds[i] - 1]) * mb
            rate = np.zeros(n)
            rate[lo - g : lo + g] = 2.0 * vol / g / x
            rows.append((at, x, rate, lo - g, lo + g))
        at += x
    if not rows:
        return None
    arrays = (
        np.array([r[0] for r in rows]) / up,
        np.array([r[1] for r in rows]) / up,
        np.array([r[2] for r in rows]),
        np.array([r[3] for r in rows], dtype=np.int64),
        np.array([r[4] for r in rows], dtype=np.int64),
    )
    for a in arrays:
        a.setflags(write=False)
    return PlanRates(*arrays)


def _link_phases(rates: PlanRates, pos: np.ndarray, wide: np.ndarray | None) -> LinkPhases | None:
    """The phases on one link of plan GPUs ``pos`` (only the rows in ``wide`` when given):
    the rows they send in, at their summed rate, one flow per sending GPU (None: no row)."""
    r = rates.rate[:, pos]
    total = r.sum(axis=1)
    if wide is not None:
        total = np.where(wide, total, 0.0)
    rows = np.flatnonzero(total > 0.0)
    if rows.size == 0:
        return None
    packed = np.empty((5, rows.size))
    packed[0] = 1.0
    packed[1] = rates.offset[rows]
    packed[2] = rates.length[rows]
    packed[3] = total[rows]
    packed[4] = np.count_nonzero(r[rows] > 0.0, axis=1)
    packed.setflags(write=False)
    return LinkPhases.from_packed(packed, float(packed[3].max()))


class AdaptiveTraffic:
    """Per placement of an adaptive-parallelism job, its :class:`LinkPhases` on each shared
    link it crosses (module docstring), for the engine's link sharing."""

    _CACHE = 65536

    def __init__(self, cluster: Cluster, speeds: ParallelismSpeeds) -> None:
        self.cluster = cluster
        self.speeds = speeds
        self._placements: dict[tuple[str, bytes], dict[int, LinkPhases]] = {}
        # id(plan) -> (plan, its rates): plans live in perf.parallelism's caches, and the
        # identity check makes a reused id harmless.
        self._rates: dict[int, tuple[Plan, PlanRates | None]] = {}
        # (rates, rows crossing racks or b"", plan GPUs on the link) -> phases on that link
        self._links: dict[tuple[PlanRates, bytes, bytes], LinkPhases | None] = {}

    def phases(self, model: str, gpus: np.ndarray) -> dict[int, LinkPhases]:
        """``{link id: phases}`` of a job of ``model`` on ``gpus`` (sorted by link id; empty
        on one machine or when its plan sends nothing over a NIC). Shared: do not mutate."""
        gpus = np.asarray(gpus, dtype=np.int64)
        key = (model, gpus.tobytes())
        got = self._placements.get(key)
        if got is None:
            if len(self._placements) >= self._CACHE:
                self._placements.clear()
            got = self._placements[key] = self._make(model, gpus)
        return got

    def _plan_rates(self, model: str, gpus: np.ndarray) -> PlanRates | None:
        got = self.speeds.plan_hardware(model, gpus)
        if got is None:
            return None
        plan, hw = got
        known = self._rates.get(id(plan))
        if known is None or known[0] is not plan:
            if len(self._rates) >= self._CACHE:
                self._rates.clear()
            known = self._rates[id(plan)] = (plan, plan_rates(model, hw, int(gpus.size), plan))
        return known[1]

    def _make(self, model: str, gpus: np.ndarray) -> dict[int, LinkPhases]:
        c = self.cluster
        if gpus.size <= 1:
            return {}
        machines = c.gpu_machine[gpus]
        if (machines == machines[0]).all():
            return {}
        rates = self._plan_rates(model, gpus)
        if rates is None:
            return {}
        racks = c.gpu_rack[gpus]
        order = np.lexsort((gpus, racks))  # the plan's GPU order (perf.parallelism)
        racks = racks[order]
        nic = c.gpu_nic[gpus[order]]
        out: dict[int, LinkPhases] = {}
        self._on(out, rates, nic, None)
        if racks[0] != racks[-1]:
            wide = racks[rates.lo] != racks[rates.hi - 1]  # rows whose GPUs span racks
            if wide.any():
                self._on(out, rates, c.nic_uplink[nic], wide)
                if c.spine_link >= 0:
                    self._on(out, rates, np.full(nic.size, c.spine_link), wide)
        return out  # NICs, then uplinks, then the spine, each ascending: sorted by link id

    def _on(
        self, out: dict[int, LinkPhases], rates: PlanRates, link: np.ndarray,
        wide: np.ndarray | None,
    ) -> None:  # fmt: skip
        """Add the phases on each link of ``link`` (per plan GPU) to ``out``, by link id."""
        idx = np.argsort(link, kind="stable")
        ids = link[idx]
        cuts = [*np.flatnonzero(ids[1:] != ids[:-1]).tolist(), int(ids.size) - 1]
        tag = b"" if wide is None else wide.tobytes()
        store = self._links
        lo = 0
        for hi in cuts:
            pos = idx[lo : hi + 1]
            key = (rates, tag, pos.tobytes())
            ph = store.get(key, False)
            if ph is False:
                if len(store) >= self._CACHE:
                    store.clear()
                ph = store[key] = _link_phases(rates, pos, wide)
            if ph is not None:
                out[int(ids[lo])] = ph
            lo = hi + 1
