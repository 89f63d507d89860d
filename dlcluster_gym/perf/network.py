"""Network-tier model: exposed all-reduce time of a placement, as a fraction of compute time.

This plays the role ASTRA-sim plays in Dally's simulator (ArtISt-sim, Dally 4.2.1): given a
job's model and the *shape* of its placement (per rack, the GPU count of each machine), it
returns the exposed communication per iteration as a fraction of compute time. As in Dally
4.2.1, the engine multiplies that fraction by the job's own compute time per iteration from
the trace ("the percentage value is applied to the iteration time from the trace").

The collective is a hierarchical all-reduce over the tiers the placement spans (Dally 3.1
layer-wise data-parallel synchronisation; Dally 4.2.1 per-tier topology files; Dally 5.1.2
NVSwitch / Quantum InfiniBand / Spectrum Ethernet tiers):

1. machine: reduce-scatter among the ``g`` GPUs of each machine as a ring (Dally 4.2.1 "NVSwitch
   in a ring topology"): ``2(g-1)/g * V`` bytes at the machine bandwidth and ``2(g-1)`` latency
   steps (reduce-scatter here plus the matching all-gather at the end);
2. rack: each GPU's shard (``V/g``) is all-reduced across the ``k`` machines of its rack with
   recursive halving/doubling, our reading of ASTRA-sim's "switch topology" (Dally 4.2.1):
   ``2(k-1)/k * V/g`` bytes at the rack bandwidth and ``2*ceil(log2 k)`` latency steps;
3. network: the remaining shard (``V/(g k)``) is all-reduced across the ``R`` racks the same
   way. A message between racks leaves through the machine's NIC and the ToR (the rack tier)
   and then crosses the spine, so this stage runs at ``min(rack, network)`` bandwidth and pays
   ``rack + network`` latency per step.

Choices the paper leaves open, made here:

- Bandwidths in ``Interconnect`` are per GPU and per direction; every GPU has its own path to
  each tier (DGX-style one NIC per GPU), so stages of different GPUs run in parallel.
- Unbalanced placements: a synchronous collective waits for its slowest member, so the machine
  stage uses the machine with the most GPUs (longest ring), and the upper stages use the
  machine (rack) with the fewest GPUs, which carries the largest shard. The rack stage takes
  the slowest rack; the network stage the rack with the fewest shard holders.
- Gradient volume ``V = volume_scale * grad_bytes`` (fp32), sent in ``messages`` collective
  calls per iteration (25 MB DDP gradient buckets); each call pays every stage's latency steps.
- Stage time of tier ``t``: ``T_t = V * per_byte_t + messages * per_call_t`` (from
  :func:`allreduce_tier_terms`); exposed communication per iteration =
  ``(1 - overlap) * sum_t tier_scale_t * T_t``. It is linear in the stage times, so it is
  positive for every multi-GPU placement and grows with the GPU count and span.
- Latencies (catalog): NVSwitch 1 us, Quantum InfiniBand 2.5 us, Spectrum Ethernet 10 us per
  step.
- Calibration (Dally 4.2.2 scales each model's ASTRA-sim workload file so that the simulated
  overhead matches a measurement): we do not have Dally's measurements, so each Table 1
  model gets one scale factor per tier (``CommParams.tier_scale``). Each reference placement of
  Table 1 exercises exactly one stage (8 GPUs in one machine: the machine ring only; 8 machines
  x 1 GPU: the rack stage only; 8 racks x 1 GPU: the network stage only), so the three factors
  follow in closed form and reproduce the 18 cells exactly (:func:`calibrate`). Away from the
  reference placements the physical stage structure (participants per stage, shard sizes,
  latency steps) decides how the overhead scales. Other models are uncalibrated (factors 1,
  physics defaults from ``workload.models.physics_comm``).
- Model-parallel zoo entries (GPT, DLRM) are costed as data-parallel all-reduce of their
  gradients, a first-order stand-in for their hybrid parallelism.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from functools import lru_cache

import numpy as np

from dlcluster_gym.cluster.catalog import Interconnect, interconnect
from dlcluster_gym.cluster.topology import Cluster, Shape, Tier
from dlcluster_gym.workload.models import DALLY_MODELS, ModelProfile, get_model

Links = tuple[Interconnect, Interconnect, Interconnect]
"""(machine, rack, network) links seen by a job."""

# Dally Table 1: communication overhead as % of compute time (8 GPUs; ASTRA-sim, Dally 3.2).
DALLY_TABLE1: dict[str, dict[str, float]] = {
    "vgg11": {"machine": 1.0, "rack": 6.0, "network": 7.0},
    "alexnet": {"machine": 2.0, "rack": 13.0, "network": 100.0},
    "mobilenetv3": {"machine": 42.0, "rack": 940.0, "network": 19592.0},
    "resnet18": {"machine": 7.0, "rack": 116.0, "network": 2749.0},
    "resnet50": {"machine": 12.0, "rack": 12.0, "network": 38.0},
    "bert-large": {"machine": 8.0, "rack": 23.0, "network": 715.0},
}

# Dally 3.3 / 5.1.2 hardware: NVSwitch in a machine, Quantum InfiniBand in a rack, Spectrum
# Ethernet between racks.
DALLY_LINKS: Links = (
    interconnect("nvswitch"),
    interconnect("ib-quantum"),
    interconnect("spectrum-eth"),
)

_TIERS = ("machine", "rack", "network")


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


@lru_cache(maxsize=65536)
def allreduce_tier_terms(shape: Shape, links: Links) -> tuple[tuple[float, float], ...]:
    """Per stage (machine, rack, network): (seconds per gradient byte, seconds per call).

    The stage time of one all-reduce call is ``bytes * first + second``.
    """
    machine, rack, network = links
    counts = [c for r in shape for c in r]
    if sum(counts) <= 1:
        return ((0.0, 0.0), (0.0, 0.0), (0.0, 0.0))
    g_max = max(counts)
    m_terms = (0.0, 0.0)
    if g_max > 1:  # stage 1: ring inside the machine with the most GPUs
        m_terms = (
            2.0 * (g_max - 1) / g_max / machine.bandwidth_Bps,
            2.0 * (g_max - 1) * machine.latency_s,
        )
    # stage 2: halving/doubling across the machines of each rack; the slowest rack counts
    rack_byte = 0.0
    rack_steps = 0
    for r in shape:
        k = len(r)
        if k > 1:
            rack_byte = max(rack_byte, 2.0 * (k - 1) / k / min(r))
            rack_steps = max(rack_steps, _steps(k))
    r_terms = (rack_byte / rack.bandwidth_Bps, rack_steps * rack.latency_s)
    # stage 3: across racks, through NIC + ToR + spine
    n_terms = (0.0, 0.0)
    n_racks = len(shape)
    if n_racks > 1:
        holders = min(len(r) * min(r) for r in shape)
        bw = min(rack.bandwidth_Bps, network.bandwidth_Bps)
        n_terms = (
            2.0 * (n_racks - 1) / n_racks / holders / bw,
            _steps(n_racks) * (rack.latency_s + network.latency_s),
        )
    return (m_terms, r_terms, n_terms)


def allreduce_terms(shape: Shape, links: Links) -> tuple[float, float]:
    """Uncalibrated totals over the stages: (seconds per gradient byte, seconds per call)."""
    terms = allreduce_tier_terms(shape, links)
    return sum(b for b, _ in terms), sum(c for _, c in terms)


def stage_times_s(profile: ModelProfile, shape: Shape, links: Links) -> tuple[float, ...]:
    """Physical (uncalibrated, not overlapped) seconds per iteration of each stage."""
    c = profile.comm
    volume = c.volume_scale * profile.grad_bytes
    return tuple(volume * b + c.messages * t for b, t in allreduce_tier_terms(shape, links))


def comm_time_s(profile: ModelProfile, shape: Shape, links: Links) -> float:
    """Calibrated communication seconds per iteration, before overlap with compute."""
    scale = profile.comm.tier_scale
    return sum(k * t for k, t in zip(scale, stage_times_s(profile, shape, links), strict=True))


@lru_cache(maxsize=65536)
def comm_overhead(profile: ModelProfile, shape: Shape, links: Links) -> float:
    """Exposed communication per iteration as a fraction of ``profile.compute_s``.

    ``(1 - overlap) * comm / compute``; 0 for a single GPU. Cached per (model, shape, links).
    """
    if profile.compute_s <= 0:
        return 0.0
    return (1.0 - profile.comm.overlap) * comm_time_s(profile, shape, links) / profile.compute_s


def placement_overhead(cluster: Cluster, profile: ModelProfile, gpus: np.ndarray) -> float:
    """``comm_overhead`` of ``profile`` on concrete GPU ids of ``cluster`` (0 for one GPU).

    The links are those of the machine group of the job's first GPU.
    """
    if gpus.size <= 1:
        return 0.0
    group = int(cluster.machine_group[cluster.gpu_machine[gpus[0]]])
    return comm_overhead(profile, cluster.placement_shape(gpus), cluster.links_for_group(group))


def exposed_comm_s(profile: ModelProfile, shape: Shape, links: Links, compute_s: float) -> float:
    """Exposed communication seconds for a job whose compute time per iteration is
    ``compute_s`` (Dally 4.2.1: the fraction is applied to the trace's iteration time)."""
    return comm_overhead(profile, shape, links) * compute_s


def table1_overheads(links: Links = DALLY_LINKS) -> dict[str, dict[str, float]]:
    """Our Dally Table 1: ``{model: {"machine": %, "rack": %, "network": %}}`` at 8 GPUs."""
    out: dict[str, dict[str, float]] = {}
    for name in DALLY_MODELS:
        profile = get_model(name)
        out[name] = {
            tier.label: 100.0 * comm_overhead(profile, reference_shape(tier), links)
            for tier in Tier
        }
    return out


def calibrate(
    links: Links = DALLY_LINKS, models: Iterable[str] = DALLY_MODELS
) -> dict[str, tuple[float, float, float]]:
    """Per-tier scale factors that make each model reproduce its Dally Table 1 row exactly.

    Each reference placement exercises one stage only, so
    ``tier_scale_t = pct_t / 100 * compute / ((1 - overlap) * T_t(reference_t))``.
    The zoo stores the result as literals (rounded to 6 significant digits).
    """
    out: dict[str, tuple[float, float, float]] = {}
    for name in models:
        profile = get_model(name)
        paper = DALLY_TABLE1[name]
        factors = []
        for tier in Tier:
            stage = stage_times_s(profile, reference_shape(tier), links)[int(tier)]
            target = paper[tier.label] / 100.0 * profile.compute_s
            factors.append(target / ((1.0 - profile.comm.overlap) * stage))
        out[name] = (factors[0], factors[1], factors[2])
    return out
