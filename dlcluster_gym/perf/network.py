"""The network model: a job's collective as flows on real links, shared max-min fairly.

This plays the role ASTRA-sim plays in Dally's simulator (ArtISt-sim, Dally 4.2.1): given a
job's model and where its GPUs are, it returns the communication per iteration, as a fraction
of compute time. As in Dally 4.2.1, the engine multiplies that fraction by the job's own compute
time per iteration from the trace ("the percentage value is applied to the iteration time from
the trace"). The engine (iteration times), the ``ideal`` bound, the offers and env features,
Cassini's link profiles and the validation reports all ask this one model.

**Links** (``Cluster._init_nics``): each GPU's port inside its machine (NVLink/NVSwitch/PCIe,
the machine tier), each NIC (a machine has one or more; several GPUs may share one), each rack
uplink (ToR to spine, or one per rail switch on a rail-optimized cluster; capacity = the NICs
below it / ``rack_uplink_oversubscription``) and, with ``spine_oversubscription > 1``, the spine.

**Collective** (cluster ``collective``). ``hierarchical`` (default; Dally 3.1 layer-wise
data-parallel synchronisation, Dally 4.2.1 per-tier topology files, Dally 5.1.2 NVSwitch /
Quantum InfiniBand / Spectrum Ethernet tiers), three stages run one after the other:

1. machine: reduce-scatter among the ``g`` GPUs of each machine as a ring over GPU ports
   (Dally 4.2.1 "NVSwitch in a ring topology"): ``2(g-1)/g * V`` bytes at the machine-tier
   bandwidth and ``2(g-1)`` latency steps (reduce-scatter here plus the matching all-gather);
   a GPU port belongs to one job, so this stage is never shared;
2. rack: each GPU of machine ``m`` holds a shard ``V/g_m`` and all-reduces it with its peers on
   the ``k`` machines of its rack (recursive halving/doubling, our reading of ASTRA-sim's
   "switch topology"): one flow per GPU of ``2(k-1)/k * V/g_m`` bytes through the GPU's NIC,
   at most the rack tier's port bandwidth (a GPU's own path to the network), ``2*ceil(log2
   k)`` steps of rack-tier latency;
3. network: the remaining shard ``V/(g_m k_r)`` is all-reduced across the ``R`` racks the same
   way: one flow per GPU through its NIC, its rack (rail) uplink and the spine link, capped at
   the rack and network tiers' port bandwidths, ``2*ceil(log2 R)`` steps of rack + network latency.

``flat-ring``: one ring over all ``n`` GPUs in which every GPU's flow (``2(n-1)/n * V``) leaves
through its NIC (and its uplink and the spine when the job spans racks): ranks that do not share
memory, such as one container per GPU talking over TCP sockets (the Pollux testbed). On one
machine both collectives are the machine ring.

**Sharing.** Inside a stage the flows of one job are shared max-min fairly on every link they
cross, several flows of one job included (GPUs sharing a NIC, machines sharing a ToR uplink):
progressive filling (:func:`maxmin_rates`) gives each flow its rate and the stage lasts until
its slowest flow is done (``max bytes / rate``; a one-shot answer: flows that finish early do
not hand their share to the others). Across jobs the engine shares each link max-min fairly per
phase on Cassini's unified circle (``perf.contention``), from the per-stage demand
:func:`placement_traffic` gives. With one NIC per GPU and no oversubscription (the Dally
presets) every flow runs at the NIC (and port) speed, and the stage times are those of the
per-GPU tier model this module had before NICs existed.

**Choices the papers leave open:**

- A synchronous collective waits for its slowest member: the machine stage uses the machine
  with the most GPUs (longest ring), the upper stages the flow with the most bytes per rate.
- Gradient volume ``V = volume_scale * grad_bytes`` (fp32), sent in ``messages`` collective
  calls per iteration (25 MB DDP gradient buckets); each call pays every stage's latency steps.
- Stage time of tier ``t``: ``T_t = V * per_byte_t + messages * per_call_t`` (from
  :func:`allreduce_tier_terms`); communication per iteration =
  ``(1 - overlap) * sum_t tier_scale_t * T_t`` exposed.
- Latencies (catalog): NVSwitch 1 us, Quantum InfiniBand 2.5 us, Spectrum Ethernet 10 us.
- A profile may cap the rate of its own flows (``CommParams.rate_cap_Bps``): every rack and
  network stage flow runs at ``min(max-min share, port, cap)``. Only measured testbed profiles
  set it (the Cassini testbed's jobs reach their profiled Up rate, not the NIC's line rate,
  ``workload.profiles.testbed_model_profile``); ``physics`` and ``dally-table1`` leave it at
  ``inf``, so their stage times are unchanged.
- Model profiles come by source (``workload.profiles``): ``physics`` (``tier_scale`` 1) by
  default; ``dally-table1`` for the Dally reproduction: Dally 4.2.2 scales each model's
  ASTRA-sim workload file so that the simulated overhead matches a measurement; we do not have
  Dally's measurements, so each Table 1 model gets one scale factor per tier
  (``CommParams.tier_scale``). Each reference placement of Table 1 exercises exactly one stage
  (8 GPUs in one machine; 8 machines x 1 GPU; 8 racks x 1 GPU), so the three factors follow in
  closed form and reproduce the 18 cells exactly (:func:`calibrate`). A calibrated stage moves
  ``tier_scale_t`` times the physical bytes at the physical rate.
- Model-parallel zoo entries (GPT, DLRM) are costed as data-parallel all-reduce of their
  gradients, a first-order stand-in for their hybrid parallelism.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from dlcluster_gym.cluster.catalog import Interconnect, interconnect
from dlcluster_gym.cluster.topology import Cluster, Shape, Tier
from dlcluster_gym.perf.traffic_kernel import traffic as compiled_traffic
from dlcluster_gym.perf.traffic_kernel import warm as _warm_traffic
from dlcluster_gym.workload.models import (
    DALLY_MODELS,
    MODEL_ZOO,
    ModelProfile,
    ddp_exposed_s,
    get_model,
)
from dlcluster_gym.workload.profiles import model_profile

NicShape = tuple[tuple[tuple[int, ...], ...], ...]
"""Per rack, per machine, the job's GPUs on each NIC of the machine (canonical order)."""

# Dally Table 1: communication overhead as % of compute time (8 GPUs; ASTRA-sim, Dally 3.2).
DALLY_TABLE1: dict[str, dict[str, float]] = {
    "vgg11": {"machine": 1.0, "rack": 6.0, "network": 7.0},
    "alexnet": {"machine": 2.0, "rack": 13.0, "network": 100.0},
    "mobilenetv3": {"machine": 42.0, "rack": 940.0, "network": 19592.0},
    "resnet18": {"machine": 7.0, "rack": 116.0, "network": 2749.0},
    "resnet50": {"machine": 12.0, "rack": 12.0, "network": 38.0},
    "bert-large": {"machine": 8.0, "rack": 23.0, "network": 715.0},
}

_TIERS = ("machine", "rack", "network")


@dataclass(frozen=True)
class NetParams:
    """What the network model needs to know of one machine group's network (hashable, so
    results are cached per (model, shape, params)).

    ``nic_Bps``: one NIC's capacity (transport efficiency applied); ``gpu_nic``: local NIC of
    each local GPU; ``uplink_Bps``: one rack uplink (per rail when ``rails``); ``spine_Bps``:
    the spine link (inf when not modelled).
    """

    machine: Interconnect
    rack: Interconnect
    network: Interconnect
    gpus_per_machine: int
    nic_Bps: float
    gpu_nic: tuple[int, ...]
    num_nics: int
    uplink_Bps: float
    spine_Bps: float = math.inf
    rails: bool = False
    collective: str = "hierarchical"

    @classmethod
    def simple(
        cls,
        machine: Interconnect,
        rack: Interconnect,
        network: Interconnect,
        gpus_per_machine: int = 8,
        machines_per_rack: int = 8,
        nics_per_machine: int | None = None,
        nic_gbps: float | None = None,
        tor_oversubscription: float = 1.0,
        collective: str = "hierarchical",
    ) -> NetParams:
        """A homogeneous layout (default: one rack-tier NIC per GPU, no oversubscription)."""
        nics = nics_per_machine or gpus_per_machine
        nic = nic_gbps * 1e9 / 8.0 if nic_gbps else rack.bandwidth_Bps
        return cls(
            machine=machine,
            rack=rack,
            network=network,
            gpus_per_machine=gpus_per_machine,
            nic_Bps=nic,
            gpu_nic=tuple(i * nics // gpus_per_machine for i in range(gpus_per_machine)),
            num_nics=nics,
            uplink_Bps=nic * nics * machines_per_rack / tor_oversubscription,
            collective=collective,
        )

    def nic_shape(self, shape: Shape) -> NicShape:
        """A machine-level shape with each machine's GPUs on its first GPU ids."""
        out = []
        for rack in shape:
            machines = []
            for g in rack:
                counts = [0] * self.num_nics
                for i in range(min(g, len(self.gpu_nic))):
                    counts[self.gpu_nic[i]] += 1
                machines.append(_canonical_nics(counts, self.rails))
            out.append(tuple(sorted(machines, key=lambda m: (sum(m), m), reverse=True)))
        out.sort(key=lambda r: (sum(sum(m) for m in r), r), reverse=True)
        return tuple(out)


def unique_small(values: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``np.unique(values, return_index=True, return_inverse=True, return_counts=True)`` of a
    short 1-D integer array (a placement's NICs, machines, racks): the same arrays (values in
    ``values.dtype``, the rest ``intp``), built in Python, several times faster than
    ``np.unique`` on tens of elements."""
    vals = values.tolist()
    first: dict[int, int] = {}
    for i, v in enumerate(vals):
        first.setdefault(v, i)
    uniq = sorted(first)
    rank = {v: r for r, v in enumerate(uniq)}
    inverse = [rank[v] for v in vals]
    counts = [0] * len(uniq)
    for r in inverse:
        counts[r] += 1
    return (
        np.array(uniq, dtype=values.dtype),
        np.array([first[v] for v in uniq], dtype=np.intp),
        np.array(inverse, dtype=np.intp),
        np.array(counts, dtype=np.intp),
    )


def _canonical_nics(counts: Iterable[int], rails: bool) -> tuple[int, ...]:
    """Per-NIC counts of one machine: by NIC index with rails (rails differ), else sorted."""
    c = tuple(int(x) for x in counts)
    return c if rails else tuple(sorted((x for x in c if x), reverse=True))


# Dally 3.3 / 5.1.2 hardware: NVSwitch in a machine, Quantum InfiniBand in a rack (one 400 Gb/s
# port per GPU), Spectrum Ethernet between racks; 8 x 8 GPUs per rack, no oversubscription.
DALLY_NET = NetParams.simple(
    interconnect("nvswitch"), interconnect("ib-quantum"), interconnect("spectrum-eth")
)


def net_params(cluster: Cluster, group: int = 0) -> NetParams:
    """The :class:`NetParams` of a machine group of ``cluster`` (cached on the cluster)."""
    cache: dict[int, NetParams] = cluster.__dict__.setdefault("_net_params", {})
    got = cache.get(group)
    if got is None:
        machines = np.flatnonzero(cluster.machine_group == group)
        m = int(machines[0])
        nics = np.flatnonzero(cluster.nic_machine == m)
        first = int(cluster.machine_first_gpu[m])
        gpus = cluster.gpu_nic[first : first + int(cluster.machine_num_gpus[m])]
        uplink = int(cluster.nic_uplink[nics[0]])
        spine = cluster.spine_link
        got = NetParams(
            machine=cluster.group_machine_link[group],
            rack=cluster.rack_link,
            network=cluster.network_link,
            gpus_per_machine=int(cluster.machine_num_gpus[m]),
            nic_Bps=float(cluster.nic_Bps[nics[0]]),
            gpu_nic=tuple(int(x) for x in gpus - nics[0]),
            num_nics=int(nics.size),
            uplink_Bps=float(cluster.link_capacity_Bps[uplink]),
            spine_Bps=float(cluster.link_capacity_Bps[spine]) if spine >= 0 else math.inf,
            rails=cluster.num_rails > 1,
            collective=cluster.config.collective,
        )
        cache[group] = got
    return got


def placement_nic_shape(cluster: Cluster, gpus: np.ndarray) -> NicShape:
    """Canonical :data:`NicShape` of a placement (GPU ids) on ``cluster``."""
    gpus = np.asarray(gpus, dtype=np.int64)
    layout = _nic_layout(cluster)
    if layout == "per-gpu":  # one NIC per GPU: each machine's count c is c NICs of 1 GPU
        return tuple(tuple((1,) * c for c in rack) for rack in cluster.placement_shape(gpus))
    if layout == "per-machine":  # one NIC per machine: the machine's count on its NIC
        return tuple(tuple((c,) for c in rack) for rack in cluster.placement_shape(gpus))
    nics, counts = np.unique(cluster.gpu_nic[gpus], return_counts=True)
    machines = cluster.nic_machine[nics]
    rails = cluster.num_rails > 1
    per_machine: dict[int, list[int]] = {}
    local = cluster.nic_local[nics]
    for m, k, c in zip(machines.tolist(), local.tolist(), counts.tolist(), strict=True):
        row = per_machine.setdefault(m, [0] * int(cluster.machine_num_nics[m]))
        row[k] = c
    per_rack: dict[int, list[tuple[int, ...]]] = {}
    racks = cluster.machine_rack
    for m, row in per_machine.items():
        per_rack.setdefault(int(racks[m]), []).append(_canonical_nics(row, rails))
    shape = [tuple(sorted(v, key=lambda x: (sum(x), x), reverse=True)) for v in per_rack.values()]
    shape.sort(key=lambda r: (sum(sum(m) for m in r), r), reverse=True)
    return tuple(shape)


def _nic_layout(cluster: Cluster) -> str:
    """'per-gpu', 'per-machine' or 'other' (cached on the cluster): the fast shape paths."""
    got = cluster.__dict__.get("_nic_layout")
    if got is None:
        rails = cluster.num_rails > 1
        if (
            not rails
            and cluster.num_nics == cluster.num_gpus
            and (cluster.gpu_nic == np.arange(cluster.num_gpus)).all()
        ):
            got = "per-gpu"
        elif (
            cluster.num_nics == cluster.num_machines
            and (cluster.nic_machine == np.arange(cluster.num_machines)).all()
        ):
            got = "per-machine"
        else:
            got = "other"
        cluster.__dict__["_nic_layout"] = got
    return got


def reference_shape(tier: Tier, n: int = 8) -> Shape:
    """Dally Table 1 placements: n GPUs on one machine / n machines x 1 GPU / n racks x 1 GPU."""
    if tier == Tier.MACHINE:
        return ((n,),)
    if tier == Tier.RACK:
        return ((1,) * n,)
    return tuple((1,) for _ in range(n))


def packed_shape(num_gpus: int, gpus_per_machine: int, machines_per_rack: int) -> Shape:
    """Most consolidated shape of ``num_gpus``: fill whole machines, then whole racks."""
    if num_gpus < 1 or gpus_per_machine < 1 or machines_per_rack < 1:
        raise ValueError(
            f"packed_shape needs positive sizes, got num_gpus={num_gpus}, "
            f"gpus_per_machine={gpus_per_machine}, machines_per_rack={machines_per_rack}"
        )
    full, rest = divmod(num_gpus, gpus_per_machine)
    machines = [gpus_per_machine] * full + ([rest] if rest else [])
    racks = [
        tuple(machines[i : i + machines_per_rack])
        for i in range(0, len(machines), machines_per_rack)
    ]
    racks.sort(key=lambda t: (sum(t), t), reverse=True)
    return tuple(racks)


def _steps(p: int) -> int:
    """Latency steps of a recursive halving/doubling all-reduce over ``p`` members."""
    return 2 * math.ceil(math.log2(p)) if p > 1 else 0


# ----------------------------------------------------------------------------- max-min


def maxmin_rates(
    flow_links: list[np.ndarray] | tuple[np.ndarray, np.ndarray],
    capacity: np.ndarray,
    flow_cap: np.ndarray | None = None,
    weight: np.ndarray | None = None,
) -> np.ndarray:
    """Max-min fair rates by progressive filling.

    ``flow_links``: the links each flow crosses, as a list of link-id arrays or as
    ``(flow_index, link_id)`` incidence arrays; ``capacity`` per link; ``flow_cap`` an optional
    per-flow ceiling (its own demand or port); ``weight`` an optional multiplicity per flow (a
    flow of weight ``w`` stands for ``w`` identical flows and gets ``w`` times the rate of one).
    Returns the rate of one flow of each entry (bytes/s). Every flow's rate is raised together
    until a link saturates or a flow reaches its ceiling; those freeze, and the rest go on.
    """
    if isinstance(flow_links, tuple):
        fi, li = (np.asarray(a, dtype=np.int64) for a in flow_links)
        n_flows = int(fi.max()) + 1 if fi.size else 0
    else:
        n_flows = len(flow_links)
        fi = np.repeat(np.arange(n_flows), [len(x) for x in flow_links])
        li = np.concatenate(flow_links).astype(np.int64) if n_flows else np.zeros(0, np.int64)
    cap = np.asarray(capacity, dtype=np.float64)
    w = np.ones(n_flows) if weight is None else np.asarray(weight, dtype=np.float64)
    ceil = np.full(n_flows, math.inf) if flow_cap is None else np.asarray(flow_cap, float)
    if np.isfinite(ceil).all():  # fast path: every flow at its ceiling fits every link
        at_ceil = np.bincount(li, weights=(w * ceil)[fi], minlength=cap.size)
        if (at_ceil <= cap * (1.0 + 1e-12)).all():
            return ceil.astype(np.float64, copy=True)
    rates = np.zeros(n_flows)
    active = np.ones(n_flows, dtype=bool)
    left = cap.copy()
    tol = 1e-12
    while active.any():
        on = active[fi]
        load = np.bincount(li[on], weights=w[fi[on]], minlength=cap.size)
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(load > 0, left / load, math.inf)
        step = min(float(share.min()), float((ceil - rates)[active].min()))
        if not math.isfinite(step):
            raise ValueError("maxmin_rates: a flow crosses no link and has no ceiling")
        rates[active] += step
        left -= step * load
        full = (load > 0) & (left <= tol * np.maximum(cap, 1.0))
        stop = np.zeros(n_flows, dtype=bool)
        stop[fi[full[li]]] = True
        stop |= rates >= ceil * (1.0 - tol)
        active &= ~stop
    return rates


# ----------------------------------------------------------------------------- flows


@dataclass(frozen=True)
class StageFlows:
    """The flows of one stage of one placement: one entry per NIC the job uses.

    ``count``: the job's GPUs on that NIC (each one flow); ``coef``: bytes per flow per byte of
    gradient volume; ``links``: the link ids each flow crosses (NIC, then uplink and spine for
    the network stage) as ``(flow index, link id)`` incidence arrays, flow by flow; ``cap``:
    a per-flow ceiling (port bandwidth); ``rate``: the max-min rate of one flow (bytes/s) on
    the job's own; ``latency_s``: latency per collective call.
    """

    count: np.ndarray
    coef: np.ndarray
    links: tuple[np.ndarray, np.ndarray]
    cap: np.ndarray
    rate: np.ndarray
    latency_s: float

    @property
    def per_byte(self) -> float:
        """Seconds per byte of gradient volume (slowest flow)."""
        return float((self.coef / self.rate).max()) if self.coef.size else 0.0


def _stages(
    nic: np.ndarray,
    uplink: np.ndarray,
    count: np.ndarray,
    machine: np.ndarray,
    rack: np.ndarray,
    capacity: np.ndarray,
    spine: int,
    net: NetParams,
    flow_cap_Bps: float = math.inf,
) -> tuple[tuple[float, float], StageFlows | None, StageFlows | None]:
    """Machine-stage terms and the rack / network stage flows of a placement.

    One row per NIC the job uses: its link id, uplink id, the job's GPUs on it, its machine
    and rack (any ids, equal for equal machines / racks). ``capacity`` indexes link ids.
    ``flow_cap_Bps``: the model's own ceiling on one flow (``CommParams.rate_cap_Bps``),
    applied with the port bandwidth to every rack and network stage flow.
    """
    per_machine = np.bincount(machine, weights=count)
    g_m = per_machine[machine]
    n_gpus = int(count.sum())
    m_ids, m_first, _, _ = unique_small(machine)
    r_ids, _, r_inv, _ = unique_small(rack)
    n_racks = int(r_ids.size)
    k_of_rack = np.bincount(r_inv[m_first], minlength=n_racks)
    k = k_of_rack[r_inv].astype(np.float64)
    g_max = int(per_machine.max())
    m_terms = (0.0, 0.0)
    if g_max > 1 and (m_ids.size == 1 or net.collective == "hierarchical"):
        m_terms = (
            2.0 * (g_max - 1) / g_max / net.machine.bandwidth_Bps,
            2.0 * (g_max - 1) * net.machine.latency_s,
        )
    if m_ids.size <= 1:
        return m_terms, None, None
    port = min(net.rack.bandwidth_Bps, flow_cap_Bps)  # a GPU's own path to the network
    wide_port = min(port, net.network.bandwidth_Bps)  # and across racks, the spine port

    def stage(coef: np.ndarray, links: tuple[np.ndarray, np.ndarray], cap: np.ndarray,
              lat: float) -> StageFlows:  # fmt: skip
        rate = maxmin_rates(links, capacity, cap, count)
        return StageFlows(count, coef, links, cap, rate, lat)

    rows = np.arange(nic.size)
    nic_only = (rows, nic.astype(np.int64))
    if n_racks > 1:  # per flow: its NIC, its uplink, the spine
        cols = (nic, uplink, np.full(nic.size, spine)) if spine >= 0 else (nic, uplink)
        wide = (np.repeat(rows, len(cols)), np.stack(cols, axis=1).astype(np.int64).ravel())
    if net.collective == "flat-ring":
        coef = np.full(count.size, 2.0 * (n_gpus - 1) / n_gpus)
        if n_racks == 1:
            return m_terms, stage(coef, nic_only, np.full(count.size, port),
                                  2 * (n_gpus - 1) * net.rack.latency_s), None  # fmt: skip
        lat = 2 * (n_gpus - 1) * (net.rack.latency_s + net.network.latency_s)
        return m_terms, None, stage(coef, wide, np.full(count.size, wide_port), lat)
    rack_stage = None
    if (k > 1).any():
        coef = np.where(k > 1, 2.0 * (k - 1.0) / k / g_m, 0.0)
        steps = max(_steps(int(x)) for x in k_of_rack)
        rack_stage = stage(coef, nic_only, np.full(count.size, port), steps * net.rack.latency_s)
    net_stage = None
    if n_racks > 1:
        coef = 2.0 * (n_racks - 1) / n_racks / (g_m * k)
        lat = _steps(n_racks) * (net.rack.latency_s + net.network.latency_s)
        net_stage = stage(coef, wide, np.full(count.size, wide_port), lat)
    return m_terms, rack_stage, net_stage


@lru_cache(maxsize=65536)
def _abstract_stages(shape: NicShape, net: NetParams, flow_cap_Bps: float = math.inf):
    """:func:`_stages` of a canonical shape, with one uplink per rack (rail) in the shape."""
    nic, up, count, machine, rack = [], [], [], [], []
    n_nic = 0
    n_m = 0
    rails = net.num_nics if net.rails else 1
    racks = len(shape)
    for r, machines in enumerate(shape):
        for counts in machines:
            for i, c in enumerate(counts):
                if c:
                    nic.append(n_nic + i)
                    up.append(r * rails + (i if net.rails else 0))
                    count.append(c)
                    machine.append(n_m)
                    rack.append(r)
            n_nic += len(counts)
            n_m += 1
    n_up = racks * rails
    caps = [np.full(n_nic, net.nic_Bps), np.full(n_up, net.uplink_Bps)]
    spine = -1
    if math.isfinite(net.spine_Bps):
        spine = n_nic + n_up
        caps.append(np.array([net.spine_Bps]))
    return _stages(
        np.asarray(nic, dtype=np.int64),
        np.asarray(up, dtype=np.int64) + n_nic,
        np.asarray(count, dtype=np.float64),
        np.asarray(machine, dtype=np.int64),
        np.asarray(rack, dtype=np.int64),
        np.concatenate(caps),
        spine,
        net,
        flow_cap_Bps,
    )


def _as_nic_shape(shape: Shape | NicShape, net: NetParams) -> NicShape:
    if shape and shape[0] and isinstance(shape[0][0], tuple):
        return shape  # type: ignore[return-value]
    return net.nic_shape(shape)  # type: ignore[arg-type]


@lru_cache(maxsize=65536)
def allreduce_tier_terms(
    shape: Shape | NicShape, net: NetParams, flow_cap_Bps: float = math.inf
) -> tuple[tuple[float, float], ...]:
    """Per stage (machine, rack, network): (seconds per gradient byte, seconds per call).

    ``shape`` is a machine-level :data:`Shape` (GPUs on each machine's first GPU ids) or a
    :data:`NicShape`. The stage time of one all-reduce call is ``bytes * first + second``.
    ``flow_cap_Bps``: the model's ceiling on one network flow (``CommParams.rate_cap_Bps``).
    """
    nshape = _as_nic_shape(shape, net)
    if sum(c for r in nshape for m in r for c in m) <= 1:
        return ((0.0, 0.0), (0.0, 0.0), (0.0, 0.0))
    m_terms, rack, netw = _abstract_stages(nshape, net, flow_cap_Bps)
    out = [m_terms]
    for st in (rack, netw):
        out.append((0.0, 0.0) if st is None else (st.per_byte, st.latency_s))
    return tuple(out)


def allreduce_terms(shape: Shape | NicShape, net: NetParams) -> tuple[float, float]:
    """Uncalibrated totals over the stages: (seconds per gradient byte, seconds per call)."""
    terms = allreduce_tier_terms(shape, net)
    return sum(b for b, _ in terms), sum(c for _, c in terms)


def _volume(profile: ModelProfile) -> float:
    return profile.comm.volume_scale * profile.grad_bytes


def stage_times_s(
    profile: ModelProfile, shape: Shape | NicShape, net: NetParams
) -> tuple[float, ...]:
    """Physical (uncalibrated, not overlapped) seconds per iteration of each stage."""
    volume, calls = _volume(profile), profile.comm.messages
    terms = allreduce_tier_terms(shape, net, profile.comm.rate_cap_Bps)
    return tuple(volume * b + calls * t for b, t in terms)


def comm_time_s(profile: ModelProfile, shape: Shape | NicShape, net: NetParams) -> float:
    """Calibrated communication seconds per iteration, before overlap with compute."""
    scale = profile.comm.tier_scale
    return sum(k * t for k, t in zip(scale, stage_times_s(profile, shape, net), strict=True))


@lru_cache(maxsize=65536)
def comm_overhead(profile: ModelProfile, shape: Shape | NicShape, net: NetParams) -> float:
    """Exposed communication per iteration as a fraction of ``profile.compute_s``.

    ``(1 - overlap) * comm / compute``; 0 for a single GPU. Cached per (model, shape, net).
    With ``comm.backward_fraction > 0`` (profile source ``physics-ddp``) the exposed part
    follows PyTorch DDP's bucket overlap instead (``workload.models.ddp_exposed_s``).
    """
    if profile.compute_s <= 0:
        return 0.0
    comm = comm_time_s(profile, shape, net)
    c = profile.comm
    if c.backward_fraction > 0:
        exposed = ddp_exposed_s(comm, profile.compute_s, c.messages, c.backward_fraction)
        return exposed / profile.compute_s
    return (1.0 - c.overlap) * comm / profile.compute_s


def placement_net(cluster: Cluster, gpus: np.ndarray) -> NetParams:
    """The :class:`NetParams` of the machine group of a placement's first GPU."""
    return net_params(cluster, int(cluster.machine_group[cluster.gpu_machine[gpus[0]]]))


def placement_overhead(cluster: Cluster, profile: ModelProfile, gpus: np.ndarray) -> float:
    """``comm_overhead`` of ``profile`` on concrete GPU ids of ``cluster`` (0 for one GPU).

    The network parameters are those of the machine group of the job's first GPU.
    """
    if gpus.size <= 1:
        return 0.0
    net = placement_net(cluster, gpus)
    return comm_overhead(profile, placement_nic_shape(cluster, gpus), net)


def exposed_comm_s(
    profile: ModelProfile, shape: Shape | NicShape, net: NetParams, compute_s: float
) -> float:
    """Exposed communication seconds for a job whose compute time per iteration is
    ``compute_s`` (Dally 4.2.1: the fraction is applied to the trace's iteration time)."""
    return comm_overhead(profile, shape, net) * compute_s


# ----------------------------------------------------------------------------- traffic


@dataclass(frozen=True, eq=False)
class PlacementTraffic:
    """A placement's demand on the shared links (NICs, uplinks, spine), per stage.

    One row per (link, stage that crosses it): ``links`` (link id), ``start``/``length``
    (where the stage sits inside the communication phase, as fractions of it: the machine
    reduce-scatter, the rack stage, the network stage, the machine all-gather), ``rate``
    (bytes/s the job's flows on that link move during the stage when alone: bytes over the
    stage's time, latency included) and ``flows`` (how many of the job's flows share the link).
    ``bytes_per_iter`` per row; ``comm_s`` the calibrated communication seconds per iteration.
    """

    links: np.ndarray
    start: np.ndarray
    length: np.ndarray
    rate: np.ndarray
    flows: np.ndarray
    bytes_per_iter: np.ndarray
    comm_s: float

    @property
    def link_ids(self) -> np.ndarray:
        """Distinct link ids crossed (sorted)."""
        return np.unique(self.links)


_NO_TRAFFIC_ARRAY = np.zeros(0)


def placement_traffic(
    cluster: Cluster, profile: ModelProfile, gpus: np.ndarray | list[int]
) -> PlacementTraffic:
    """The per-stage demand of ``profile`` on ``gpus`` on each shared link it crosses.

    The flows and their max-min rates are those :func:`allreduce_tier_terms` computes for the
    placement's shape, on the placement's own link ids. A calibrated stage (``tier_scale``)
    moves scaled bytes at the physical rate, so it lasts longer at the same rate. The
    hierarchical collective runs compiled (``perf.traffic_kernel``, the same floats).
    """
    gpus = np.asarray(gpus, dtype=np.int64)
    if gpus.size <= 1:
        return _empty_traffic()
    net = placement_net(cluster, gpus)
    if compiled_traffic is not None and net.collective == "hierarchical":
        return _compiled_placement_traffic(cluster, profile, gpus, net)
    return _numpy_placement_traffic(cluster, profile, gpus, net)


def warm_traffic(cluster: Cluster) -> None:
    """Load the compiled :func:`placement_traffic` for ``cluster``'s arrays now (numba's
    cache), not on the first new placement."""
    _warm_traffic(
        cluster.gpu_nic, cluster.nic_machine, cluster.nic_uplink, cluster.machine_rack,
        cluster.link_capacity_Bps,
    )  # fmt: skip


def _compiled_placement_traffic(
    cluster: Cluster, profile: ModelProfile, gpus: np.ndarray, net: NetParams
) -> PlacementTraffic:
    """:func:`placement_traffic` by ``perf.traffic_kernel`` (the same floats)."""
    assert compiled_traffic is not None
    ok, links, rows, total = compiled_traffic(
        gpus, cluster.gpu_nic, cluster.nic_machine, cluster.nic_uplink, cluster.machine_rack,
        cluster.link_capacity_Bps, cluster.spine_link, _traffic_terms(profile, net),
    )  # fmt: skip
    if not ok:
        return _empty_traffic()
    links.setflags(write=False)
    rows.setflags(write=False)
    return PlacementTraffic(links, *rows, comm_s=float(total))


def _empty_traffic() -> PlacementTraffic:
    return PlacementTraffic(*(np.zeros(0) for _ in range(6)), comm_s=0.0)  # type: ignore[misc]


def _numpy_placement_traffic(
    cluster: Cluster, profile: ModelProfile, gpus: np.ndarray, net: NetParams
) -> PlacementTraffic:
    """:func:`placement_traffic` in numpy (any collective; the reference of the kernel)."""
    empty = _empty_traffic()
    nics, _, _, counts = unique_small(cluster.gpu_nic[gpus])
    machine = cluster.nic_machine[nics]
    if len(set(machine.tolist())) <= 1:
        return empty
    # The stages on the placement's own links, relabelled 0.. in id order: max-min sharing
    # then runs on these few links rather than the cluster's (the same floats per link)
    uplink = cluster.nic_uplink[nics]
    spine = cluster.spine_link
    own = np.concatenate((nics, uplink, [spine])) if spine >= 0 else np.concatenate((nics, uplink))
    link_ids, _, local, _ = unique_small(own)
    n_nics = nics.size
    m_terms, rack, netw = _stages(
        local[:n_nics],
        local[n_nics : 2 * n_nics],
        counts.astype(np.float64),
        machine,
        cluster.machine_rack[machine],
        cluster.link_capacity_Bps[link_ids],
        int(local[2 * n_nics]) if spine >= 0 else -1,
        net,
        profile.comm.rate_cap_Bps,
    )
    volume, calls = _volume(profile), profile.comm.messages
    scale = profile.comm.tier_scale
    times = [scale[0] * (volume * m_terms[0] + calls * m_terms[1])]
    for k, st in enumerate((rack, netw), start=1):
        times.append(
            0.0 if st is None else scale[k] * (volume * st.per_byte + calls * st.latency_s)
        )
    total = sum(times)
    if total <= 0:
        return empty
    begin = {1: times[0] / 2.0, 2: times[0] / 2.0 + times[1]}
    cols: list[list[np.ndarray]] = [[], [], [], [], [], []]
    for k, st in ((1, rack), (2, netw)):
        if st is None or times[k] <= 0:
            continue
        byts = scale[k] * volume * st.coef * st.count  # per NIC row, all its flows
        row, ids = st.links
        link, _, inv, _ = unique_small(ids)
        link = link_ids[link]
        b = np.bincount(inv, weights=byts[row], minlength=link.size)
        f = np.bincount(inv, weights=st.count[row], minlength=link.size)
        keep = b > 0
        n = int(keep.sum())
        cols[0].append(link[keep])
        cols[1].append(np.full(n, begin[k] / total))
        cols[2].append(np.full(n, times[k] / total))
        cols[3].append(b[keep] / times[k])
        cols[4].append(f[keep])
        cols[5].append(b[keep])
    arrays = [np.concatenate(c) if c else np.zeros(0) for c in cols]
    arrays[0] = arrays[0].astype(np.int64)
    for a in arrays:
        a.setflags(write=False)
    return PlacementTraffic(*arrays, comm_s=float(total))


@lru_cache(maxsize=4096)
def _traffic_terms(profile: ModelProfile, net: NetParams) -> np.ndarray:
    """The scalars ``perf.traffic_kernel`` needs of a model on a network (remembered)."""
    c = profile.comm
    return np.array(
        [net.machine.bandwidth_Bps, net.machine.latency_s, net.rack.bandwidth_Bps,
         net.rack.latency_s, net.network.bandwidth_Bps, net.network.latency_s,
         c.rate_cap_Bps, _volume(profile), c.messages, *c.tier_scale], dtype=np.float64,
    )  # fmt: skip


# ----------------------------------------------------------------------------- Dally Table 1


def overhead_table(
    source: str = "dally-table1", net: NetParams = DALLY_NET, models: Iterable[str] | None = None
) -> dict[str, dict[str, float]]:
    """``{model: {"machine": %, "rack": %, "network": %}}``: exposed communication as % of
    compute at Dally's three 8-GPU reference placements, with profile ``source``. Default
    models: the six Dally models for ``dally-table1``, the whole zoo otherwise."""
    names = models or (DALLY_MODELS if source == "dally-table1" else sorted(MODEL_ZOO))
    out: dict[str, dict[str, float]] = {}
    for name in names:
        profile = model_profile(name, source)
        out[name] = {
            tier.label: 100.0 * comm_overhead(profile, reference_shape(tier), net) for tier in Tier
        }
    return out


def table1_overheads(net: NetParams = DALLY_NET) -> dict[str, dict[str, float]]:
    """Our Dally Table 1: ``{model: {"machine": %, "rack": %, "network": %}}`` at 8 GPUs,
    with the ``dally-table1`` model profiles."""
    return overhead_table("dally-table1", net)


def calibrate(
    net: NetParams = DALLY_NET, models: Iterable[str] = DALLY_MODELS
) -> dict[str, tuple[float, float, float]]:
    """Per-tier scale factors that make each model reproduce its Dally Table 1 row exactly.

    Each reference placement exercises one stage only, so
    ``tier_scale_t = pct_t / 100 * compute / ((1 - overlap) * T_t(reference_t))``.
    ``configs/profiles/dally-table1.yaml`` stores the result (6 significant digits).
    """
    out: dict[str, tuple[float, float, float]] = {}
    for name in models:
        profile = get_model(name)
        paper = DALLY_TABLE1[name]
        factors = []
        for tier in Tier:
            stage = stage_times_s(profile, reference_shape(tier), net)[int(tier)]
            target = paper[tier.label] / 100.0 * profile.compute_s
            factors.append(target / ((1.0 - profile.comm.overlap) * stage))
        out[name] = (factors[0], factors[1], factors[2])
    return out
