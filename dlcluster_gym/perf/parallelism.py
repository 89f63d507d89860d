"""Data / tensor / pipeline parallelism plans of large models on one GPU type (Crius 4-5).

A **plan** for ``n`` GPUs of one type: ``S`` pipeline stages (contiguous layer ranges from the
FLOPs-balanced partition of Crius 4.2, ``n / S`` GPUs each), and per stage a split of its GPUs
into ``d`` data-parallel replicas x ``t`` tensor-parallel shards. Its iteration time follows
Crius 5.1 (Fig. 10, after Alpa and GPipe), with ``B = 4 S`` micro-batches:

    T_i   = C_i + X_i                       (stage latency of one micro-batch, fwd + bwd)
    C_i   = compute_i + tensor collectives_i
    X_i   = send/recv of the boundary activations from stage i-1 (and gradients back)
    iter  = sum_i T_i + (B - 1) max_i C_i + max_i AR_i

i.e. the first micro-batch through all stages plus ``B - 1`` more at the pace of the slowest
stage with its (overlapped) inter-stage communication subtracted, plus the data-parallel
gradient synchronisation ``AR_i`` after the pipeline drains (stages sync in parallel).

- **compute**: ``3 x forward FLOPs`` of the stage's samples / ``t``, at the GPU's dense fp16
  peak times an efficiency ``u_max * w / (w + W_HALF)`` that falls when a GPU gets little work
  per micro-batch (``w`` forward FLOPs): small kernels do not fill a GPU.
- **tensor parallelism**: Megatron all-reduces of the layer activations (dense layers,
  convolutions) or all-to-all token exchange (MoE experts) inside a stage, on the machine's
  intra-node link (NVLink or PCIe) when ``t`` fits in a machine, else hierarchically over the
  machine's NIC (InfiniBand).
- **data parallelism**: ring all-reduce of the stage's fp16 gradients among its ``d`` replicas
  (intra-node link, or hierarchical over the NICs of the machines the stage spans; the ``t``
  shard groups of a machine share its NIC).
- **pipeline**: send/recv of one micro-batch's boundary activations, forward and backward,
  over the NIC when the stage boundary is a machine boundary (GPUs are laid out packed, stage
  after stage, tensor shards innermost), else the intra-node link.
- **memory** per GPU: fp16 weights and gradients of the stage's ``1/t`` shard, fp32 master
  weights and Adam moments sharded over the ``d`` replicas too (Alpa-style sharded
  data-parallel optimizer state, ZeRO stage 1), kept activations of the in-flight
  micro-batches (1F1B: stage ``i`` of ``S`` holds ``S - i``), and a fixed workspace. Plans over
  the GPU's memory are infeasible (OOM).

**Network** (our extension, the paper is silent). Crius 5.1 prices a communication
operator from its volume on the interconnect it runs on (operators profiled offline per GPU
and interconnect, "traffic-based interpolation"), with no topology above the machine. Here a
job's placement decides that interconnect for traffic between racks too
(``placement_hardware``):

- *cross-rack share*: when the job spans racks, every NIC of it sends across racks at once,
  one flow per NIC through the NIC, its rack (rail) uplink and the spine link, shared max-min
  fairly (``perf.network.maxmin_rates``, the way a data-parallel job's network stage shares
  them among its own flows); the smallest fraction of NIC capacity any of them gets times
  the machine's NIC speed is ``Hardware.wide``. ToR oversubscription, a spine link and rails
  thus reach a lone job; with 1:1 uplinks and no spine it is the NIC (nothing changes);
- *which operators*: the plan's GPUs are the placement's GPUs by rack (then id), so the racks
  begin at known positions (``Hardware.rack_breaks``). A collective among GPUs of more than
  one rack (a stage's data-parallel all-reduce, a tensor group wider than a machine) runs at
  ``wide`` for all its bytes (a ring waits for its slowest edge), and so does the send/recv
  into a stage that begins a new rack; everything else keeps the NIC or intra-machine link;
- latency: the NIC's (Crius's operators carry no per-hop topology latency), so 1:1 clusters
  keep exactly their previous iteration times;
- the plan is re-optimised for the placement (adaptive parallelism tunes for the GPUs it
  runs on); Crius's own Cell estimation (``cluster_hardware``) stays topology-unaware, as
  its offline-profiled operators are;
- sharing with other jobs: the plan's traffic over NICs, uplinks and spine joins the
  engine's shared links (``perf.parallelism_links``), so with ``contention`` on other jobs'
  traffic slows an adaptive job's communication and it slows theirs;
- ``network: ideal``: every link free (``ideal_hardware``), no communication at all.

Adaptive parallelism (the ground truth a running job achieves) is the exhaustive search over
``S`` and every per-stage split for the fastest feasible plan. The search is exact but not
brute force: the objective is a sum plus two maxima, so for each candidate pair of maxima the
stages choose independently (``_optimise``). Results are cached per (model, GPU hardware,
count).

Cells (Crius 4.2): ``cell_estimate`` is the agile estimation of 5.1, the best of the ``2^S``
plans assembled from each stage's data-only and tensor-only splits; ``cell_tune`` is the
Cell-guided tuning of 5.2, the best plan with each stage limited to the half of its split range
(data-only..half-hybrid or half-hybrid..tensor-only) its estimated plan favours.

The parameters are our choices (Crius gives none): efficiency ``U_MAX`` per model family
(fp16 mixed precision: transformers 50% of peak, MoE 45%, convolutions 40%), ``W_HALF`` = 20
GFLOPs, a 2 GiB workspace, 16 bytes of weights + gradients + Adam state per parameter.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

import numpy as np

from dlcluster_gym.cluster.catalog import GPUType, Interconnect, gpu_type
from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.perf.network import maxmin_rates
from dlcluster_gym.workload.large_models import (
    FP16,
    LargeModel,
    is_large_model,
    parse_large_model,
)

U_MAX = {"bert": 0.50, "moe": 0.45, "wresnet": 0.40}
# Samples per GPU per micro-batch at which kernel efficiency halves: a convolution sample
# at the late 7x7 stages is a small GEMM; a 512- or 1024-token sample is a large one.
S_HALF = {"bert": 1.0, "moe": 0.25, "wresnet": 4.0}
WORKSPACE_B = 2.0 * 2**30  # CUDA context, framework and collective buffers
WEIGHT_GRAD_B = 4.0  # fp16 weight + fp16 gradient per parameter (replicated over d)
OPTIMIZER_B = 12.0  # fp32 master weight + Adam m, v per parameter (sharded over d)
MICROBATCHES_PER_STAGE = 4  # B = 4 x stages (GPipe, Crius 5.1 Fig. 10)

__all__ = [
    "Hardware",
    "ParallelismSpeeds",
    "Plan",
    "best_plan",
    "cell_estimate",
    "cell_tune",
    "cluster_hardware",
    "cross_rack_share",
    "data_parallel_plan",
    "evaluate",
    "ideal_hardware",
    "is_adaptive_model",
    "iteration_time",
    "min_feasible_gpus",
    "placement_hardware",
    "plan_space_size",
    "stage_bounds",
    "stage_choices",
    "uplinks_can_bind",
]


def is_adaptive_model(name: str) -> bool:
    """Whether jobs of model ``name`` run with adaptive parallelism (Crius Table 2 models)."""
    return is_large_model(name)


@dataclass(frozen=True)
class Hardware:
    """What the parallelism model needs to know about one kind of machine."""

    gpu: GPUType
    gpus_per_node: int
    intra: Interconnect  # GPU-GPU inside a machine (NVLink / PCIe), per GPU
    nic: Interconnect  # the machine's network interface (InfiniBand), per machine
    # Per machine, traffic that leaves its rack (its share of the ToR / rail uplink and spine,
    # ``placement_hardware``); None: the NIC. ``rack_breaks``: positions in the plan's GPU
    # order (stage after stage, tensor shards innermost) at which the next rack begins.
    wide: Interconnect | None = None
    rack_breaks: tuple[int, ...] = ()

    def crosses(self, lo: int, hi: int) -> bool:
        """Whether plan GPUs ``[lo, hi)`` span more than one rack."""
        return any(lo < b < hi for b in self.rack_breaks)

    def link(self, lo: int, hi: int) -> Interconnect:
        """The inter-machine link of a collective among plan GPUs ``[lo, hi)``: the NIC, or
        the machine's cross-rack share when they span racks (a ring waits for its slowest
        edge, so the whole collective runs at that share)."""
        if self.wide is not None and self.crosses(lo, hi):
            return self.wide
        return self.nic

    @property
    def name(self) -> str:
        return self.gpu.name

    @property
    def memory_B(self) -> float:
        return self.gpu.memory_gb * 2**30

    @property
    def peak_flops(self) -> float:
        return self.gpu.fp16_tflops * 1e12

    @classmethod
    def of(cls, gpu: str, gpus_per_node: int, intra: Interconnect, nic: Interconnect) -> Hardware:
        return cls(gpu_type(gpu), int(gpus_per_node), intra, nic)


@dataclass(frozen=True)
class Plan:
    """One parallelism plan and what it costs on one ``Hardware`` and GPU count."""

    stages: int
    splits: tuple[tuple[int, int], ...]  # per stage (data replicas, tensor shards)
    iter_time_s: float
    compute_s: float  # the same pipeline with every communication time set to zero
    memory_B: tuple[float, ...]  # per GPU, per stage

    @property
    def comm_s(self) -> float:
        """Iteration time not spent computing (collectives, send/recv, not hidden)."""
        return max(self.iter_time_s - self.compute_s, 0.0)

    @property
    def label(self) -> str:
        """e.g. ``P2[D4xT1|D2xT2]``."""
        inner = "|".join(f"D{d}xT{t}" for d, t in self.splits)
        return f"P{self.stages}[{inner}]"


# --------------------------------------------------------------------------- partitioning


@cache
def stage_bounds(model_name: str, stages: int) -> tuple[int, ...]:
    """Layer boundaries ``(0, b1, ..., L)`` of a FLOPs-balanced ``stages``-way partition.

    Crius 4.2 (Fig. 7): GPUs are mapped to layers in proportion to their FLOPs, so every stage
    should hold ``1/stages`` of the FLOPs; among the layer boundaries whose cumulative FLOPs lie
    within a quarter stage of each ideal cut, the one with the least output bytes (the
    cheapest inter-stage communication) is chosen (nearest the ideal cut on ties).
    """
    model, _ = parse_large_model(model_name)
    n = model.num_layers
    if not 1 <= stages <= n:
        raise ConfigError(f"{model.name}: {stages} pipeline stages for {n} layers")
    f = model.layers.fwd_flops
    cum = np.cumsum(f) / f.sum()  # cum[k]: fraction of FLOPs in layers 0..k
    out = model.layers.out_bytes
    bounds = [0]
    for k in range(1, stages):
        lo, hi = bounds[-1] + 1, n - (stages - k)  # boundary b: layers [.., b) | [b, ..)
        cand = np.arange(lo, hi + 1)
        frac = cum[cand - 1]
        ideal = k / stages
        near = cand[np.abs(frac - ideal) <= 0.25 / stages]
        if near.size == 0:
            best = int(cand[np.argmin(np.abs(frac - ideal))])
        else:
            key = np.lexsort((np.abs(cum[near - 1] - ideal), out[near - 1]))
            best = int(near[key[0]])
        bounds.append(best)
    bounds.append(n)
    return tuple(bounds)


# --------------------------------------------------------------------------- collectives


def _allreduce(volume: np.ndarray, calls: np.ndarray, group: int, members_per_node: int,
               nic_sharers: int, hw: Hardware, nic: Interconnect | None = None,
               ) -> np.ndarray:  # fmt: skip
    """Ring (hierarchical across machines) all-reduce time of ``volume`` bytes in ``calls``
    collectives over ``group`` GPUs, ``members_per_node`` of them per machine, across
    machines over ``nic`` (default ``hw.nic``)."""
    if group <= 1:
        return np.zeros_like(volume)
    intra, nic = hw.intra, hw.nic if nic is None else nic
    m = min(group, max(members_per_node, 1))
    k = group // m
    t = np.zeros_like(volume)
    if m > 1:
        t = (
            t
            + 2.0 * (m - 1) / m * volume / intra.bandwidth_Bps
            + calls * 2 * (m - 1) * (intra.latency_s)
        )
    if k > 1:
        t = (
            t
            + nic_sharers * 2.0 * (k - 1) / k * volume / nic.bandwidth_Bps
            + calls * 2 * (k - 1) * nic.latency_s
        )
    return t


def _alltoall(volume: np.ndarray, calls: np.ndarray, group: int, hw: Hardware,
              nic: Interconnect | None = None) -> np.ndarray:  # fmt: skip
    """All-to-all time: each of ``group`` GPUs holds ``volume / group`` bytes and keeps only
    ``1/group`` of them; what leaves a machine crosses its NIC (``nic``, default ``hw.nic``)."""
    if group <= 1:
        return np.zeros_like(volume)
    nic = hw.nic if nic is None else nic
    p = hw.gpus_per_node
    per_gpu = volume / group
    if group <= p:
        return per_gpu * (group - 1) / group / hw.intra.bandwidth_Bps + calls * hw.intra.latency_s
    inside = per_gpu * (p - 1) / group / hw.intra.bandwidth_Bps
    leaving = p * per_gpu * (group - p) / group / nic.bandwidth_Bps
    return inside + leaving + calls * (hw.intra.latency_s + nic.latency_s)


# --------------------------------------------------------------------------- stage tables


@dataclass(frozen=True)
class _StageTable:
    """Per stage i and split option k (t = tensor[k]): costs of one micro-batch."""

    tensor: np.ndarray  # [K] tensor shards of each option
    comp: np.ndarray  # [S, K] compute seconds per micro-batch (fwd + bwd)
    coll: np.ndarray  # [S, K] tensor-collective seconds per micro-batch
    ar: np.ndarray  # [S, K] data-parallel all-reduce seconds per iteration
    mem: np.ndarray  # [S, K] bytes per GPU
    ok: np.ndarray  # [S, K] valid (enough samples per replica) and fits in memory
    xfer: np.ndarray  # [S] send/recv seconds into each stage per micro-batch
    microbatches: int
    gpus_per_stage: int


def _tensor_options(g: int) -> np.ndarray:
    t = [1]
    while t[-1] * 2 <= g and g % (t[-1] * 2) == 0:
        t.append(t[-1] * 2)
    return np.asarray(t, dtype=np.int64)


@cache
def _stage_table(model_name: str, hw: Hardware, n: int, stages: int) -> _StageTable:
    model, batch = parse_large_model(model_name)
    lay = model.layers
    g = n // stages
    tensor = _tensor_options(g)
    data = g // tensor
    B = MICROBATCHES_PER_STAGE * stages
    mb = batch / B  # samples per micro-batch
    b = mb / data  # [K] samples per replica per micro-batch
    bounds = stage_bounds(model.name, stages)
    p = hw.gpus_per_node
    umax = U_MAX[model.family]
    S, K = stages, tensor.size
    comp = np.empty((S, K))
    coll = np.empty((S, K))
    ar = np.empty((S, K))
    mem = np.empty((S, K))
    xfer = np.zeros(S)
    for i in range(S):
        sl = slice(bounds[i], bounds[i + 1])
        fwd = float(lay.fwd_flops[sl].sum())
        params = float(lay.params[sl].sum())
        act = float(lay.act_bytes[sl].sum())
        w = fwd * b / tensor  # forward FLOPs per GPU per micro-batch
        eff = umax * (b / tensor) / (b / tensor + S_HALF[model.family])
        comp[i] = 3.0 * w / (hw.peak_flops * eff)
        dense = ~lay.tp_alltoall[sl]
        ar_vol = float((lay.tp_bytes[sl] * lay.tp_calls[sl])[dense].sum())
        ar_calls = float(lay.tp_calls[sl][dense].sum())
        a2a_vol = float((lay.tp_bytes[sl] * lay.tp_calls[sl])[~dense].sum())
        a2a_calls = float(lay.tp_calls[sl][~dense].sum())
        lo = i * g
        for k, t in enumerate(tensor.tolist()):
            tp_nic = hw.nic  # tensor groups of t consecutive GPUs: over NICs when t > p
            if (
                hw.wide is not None
                and t > p
                and any(hw.crosses(lo + r * t, lo + (r + 1) * t) for r in range(g // t))
            ):
                tp_nic = hw.wide
            c = _allreduce(np.array(ar_vol * b[k]), np.array(ar_calls), t, p, 1, hw, tp_nic)
            c = c + _alltoall(np.array(a2a_vol * b[k]), np.array(a2a_calls), t, hw, tp_nic)
            coll[i, k] = float(c)
            d = int(data[k])
            grads = FP16 * params / t
            ar[i, k] = float(
                _allreduce(np.array(grads), np.array(1.0), d, max(p // t, 1), min(p, t), hw,
                           hw.link(lo, lo + g))
            ) if g > 1 else 0.0  # fmt: skip
        inflight = min(B, S - i)
        state = params / tensor * (WEIGHT_GRAD_B + OPTIMIZER_B / data) + WORKSPACE_B
        mem[i] = state + act * b / tensor * inflight
        # Activation recomputation when the kept activations do not fit: keep only each
        # layer's output, recompute one layer at a time (one more forward pass).
        kept = float(lay.out_bytes[sl].sum()) * inflight + float(lay.act_bytes[sl].max())
        remat = mem[i] > hw.memory_B
        mem[i] = np.where(remat, state + kept * b / tensor, mem[i])
        comp[i] = np.where(remat, comp[i] * 4.0 / 3.0, comp[i])
        if i > 0:
            vol = float(lay.out_bytes[bounds[i] - 1]) * mb
            if hw.wide is not None and lo in hw.rack_breaks:  # the boundary leaves a rack
                bw, lat = hw.wide.bandwidth_Bps * max(1, g // p), hw.wide.latency_s
            elif (i * g) % p == 0:
                bw, lat = hw.nic.bandwidth_Bps * max(1, g // p), hw.nic.latency_s
            else:
                bw, lat = hw.intra.bandwidth_Bps, hw.intra.latency_s
            xfer[i] = 2.0 * (vol / bw + lat)
    ok = (b >= 1.0)[None, :] & (mem <= hw.memory_B)
    return _StageTable(tensor, comp, coll, ar, mem, ok, xfer, B, g)


# --------------------------------------------------------------------------- optimisation


def _optimise(tab: _StageTable, allowed: np.ndarray | None = None) -> tuple[float, np.ndarray]:
    """Fastest per-stage choice of split options: (iteration time, option index per stage).

    Minimises ``sum_i (C_i + X_i) + (B-1) max_i C_i + max_i AR_i`` exactly: for every pair of
    candidate maxima (c*, a*) each stage independently takes its cheapest option within both.
    ``allowed`` [S, K] restricts the options (Cell estimation and pruned tuning).
    """
    C = tab.comp + tab.coll
    ok = tab.ok if allowed is None else tab.ok & allowed
    if not ok.any(axis=1).all():
        return math.inf, np.zeros(0, dtype=np.int64)
    A = tab.ar
    cs = np.unique(C[ok])
    as_ = np.unique(A[ok])
    # [Pc, Pa, S, K]
    m = (
        ok[None, None]
        & (C[None, None] <= cs[:, None, None, None])
        & (A[None, None] <= as_[None, :, None, None])
    )
    Cm = np.where(m, C[None, None], np.inf)
    per_stage = Cm.min(axis=3)  # [Pc, Pa, S]
    total = per_stage.sum(axis=2) + (tab.microbatches - 1) * cs[:, None] + as_[None, :]
    flat = int(np.argmin(total))
    best = float(total.flat[flat])
    if not math.isfinite(best):
        return math.inf, np.zeros(0, dtype=np.int64)
    ic, ia = divmod(flat, as_.size)
    choice = Cm[ic, ia].argmin(axis=1)
    return best + float(tab.xfer.sum()), choice


def _plan(tab: _StageTable, choice: np.ndarray, iter_time: float) -> Plan:
    idx = np.arange(choice.size)
    t = tab.tensor[choice]
    g = tab.gpus_per_stage
    comp = tab.comp[idx, choice]
    compute = float(comp.sum() + (tab.microbatches - 1) * comp.max())
    splits = tuple((int(g // int(x)), int(x)) for x in t.tolist())
    return Plan(choice.size, splits, iter_time, compute, tuple(tab.mem[idx, choice].tolist()))


def stage_choices(model_name: str, n: int) -> tuple[int, ...]:
    """Pipeline stage counts Crius considers for ``n`` GPUs: 1, 2, 4, ... up to ``n`` (4.2,
    6.1: log N_G choices), dividing ``n``, at most the model's layer count."""
    model, _ = parse_large_model(model_name)
    out, s = [], 1
    while s <= n and s <= model.num_layers:
        if n % s == 0:
            out.append(s)
        s *= 2
    return tuple(out)


def _check(model_name: str, n: int) -> None:
    if not isinstance(n, int | np.integer) or n <= 0:
        raise ConfigError(f"{model_name}: GPU count must be a positive integer, got {n!r}")


@cache
def best_in_stages(model_name: str, hw: Hardware, n: int, stages: int) -> Plan | None:
    """The fastest feasible plan with exactly ``stages`` stages (the optimum of a Cell)."""
    tab = _stage_table(model_name, hw, n, stages)
    t, choice = _optimise(tab)
    return None if not math.isfinite(t) else _plan(tab, choice, t)


@cache
def best_plan(model_name: str, hw: Hardware, n: int) -> Plan | None:
    """Adaptive parallelism: the fastest feasible plan on ``n`` GPUs of ``hw`` (None: OOM)."""
    _check(model_name, n)
    best: Plan | None = None
    for s in stage_choices(model_name, n):
        p = best_in_stages(model_name, hw, n, s)
        if p is not None and (best is None or p.iter_time_s < best.iter_time_s):
            best = p
    return best


def iteration_time(model_name: str, hw: Hardware, n: int) -> float:
    """Iteration time of the best plan (``inf`` when no plan fits in memory)."""
    p = best_plan(model_name, hw, n)
    return math.inf if p is None else p.iter_time_s


@cache
def data_parallel_plan(model_name: str, hw: Hardware, n: int) -> Plan | None:
    """The data-parallel-only plan (one stage, ``n`` replicas): the profile the baselines of
    Crius 8.1 schedule with. None when it does not fit in memory."""
    _check(model_name, n)
    tab = _stage_table(model_name, hw, n, 1)
    allowed = np.zeros_like(tab.ok)
    allowed[:, 0] = True
    t, choice = _optimise(tab, allowed)
    return None if not math.isfinite(t) else _plan(tab, choice, t)


@cache
def cell_estimate(model_name: str, hw: Hardware, n: int, stages: int) -> Plan | None:
    """Agile Cell estimation (Crius 5.1): the best of the 2^S plans assembled from each
    stage's data-parallel-only and tensor-parallel-only splits (an OOM split is dropped for
    its stage; a Cell where a stage has neither is infeasible, None)."""
    tab = _stage_table(model_name, hw, n, stages)
    allowed = np.zeros_like(tab.ok)
    allowed[:, 0] = True
    allowed[:, -1] = True
    t, choice = _optimise(tab, allowed)
    return None if not math.isfinite(t) else _plan(tab, choice, t)


def _pruned(tab: _StageTable, favour_tensor: np.ndarray) -> np.ndarray:
    K = tab.tensor.size
    half = (K - 1) / 2.0  # option index of the half-hybrid split t = sqrt(g)
    k = np.arange(K)[None, :]
    lo = k <= math.ceil(half)
    hi = k >= math.floor(half)
    return np.where(favour_tensor[:, None], hi, lo)


@cache
def cell_tune(model_name: str, hw: Hardware, n: int, stages: int) -> Plan | None:
    """Cell-guided tuning (Crius 5.2, Fig. 11): the best plan inside the Cell with each stage
    searched only over the half of its split range that the estimated plan favours
    (data-only..half-hybrid or half-hybrid..tensor-only)."""
    est = cell_estimate(model_name, hw, n, stages)
    if est is None:
        return None
    tab = _stage_table(model_name, hw, n, stages)
    favour = np.array([t > 1 for _, t in est.splits])
    t, choice = _optimise(tab, _pruned(tab, favour))
    return None if not math.isfinite(t) else _plan(tab, choice, t)


def plan_space_size(model_name: str, hw: Hardware, n: int, stages: int | None = None,
                    pruned_by: Plan | None = None) -> int:  # fmt: skip
    """How many plans a search enumerates: all splits of all stages (for every stage count
    when ``stages`` is None), or, with ``pruned_by`` (an estimated plan of the Cell), only the
    favoured half-ranges of 5.2."""
    total = 0
    for s in stage_choices(model_name, n) if stages is None else (stages,):
        tab = _stage_table(model_name, hw, n, s)
        valid = tab.tensor.size * np.ones(s, dtype=np.int64)
        if pruned_by is not None:
            favour = np.array([t > 1 for _, t in pruned_by.splits])
            valid = _pruned(tab, favour).sum(axis=1)
        total += int(np.prod(valid.astype(object)))
    return total


def evaluate(model_name: str, hw: Hardware, n: int, splits: tuple[tuple[int, int], ...]) -> Plan:
    """Cost of one explicit plan (``splits``: per stage (data, tensor)); ``iter_time_s`` is
    ``inf`` when it does not fit in memory."""
    _check(model_name, n)
    stages = len(splits)
    if n % stages:
        raise ConfigError(f"{model_name}: {stages} stages do not divide {n} GPUs")
    tab = _stage_table(model_name, hw, n, stages)
    g = n // stages
    choice = []
    for d, t in splits:
        if d * t != g or t not in tab.tensor:
            raise ConfigError(f"{model_name}: split D{d}xT{t} does not cover {g} GPUs per stage")
        choice.append(int(np.flatnonzero(tab.tensor == t)[0]))
    allowed = np.zeros_like(tab.ok)
    allowed[np.arange(stages), choice] = True
    t_iter, ch = _optimise(tab, allowed)
    if not math.isfinite(t_iter):
        tab_all = _stage_table(model_name, hw, n, stages)
        idx = np.arange(stages)
        return Plan(stages, tuple(splits), math.inf, math.inf,
                    tuple(tab_all.mem[idx, choice].tolist()))  # fmt: skip
    return _plan(tab, ch, t_iter)


def min_feasible_gpus(model_name: str, hw: Hardware, max_gpus: int) -> int | None:
    """Smallest power-of-two GPU count (<= ``max_gpus``) with a feasible plan, or None."""
    n = 1
    while n <= max_gpus:
        if best_plan(model_name, hw, n) is not None:
            return n
        n *= 2
    return None


def model_of(name: str) -> tuple[LargeModel, int]:
    """(model, global batch) of a job's model name."""
    return parse_large_model(name)


# --------------------------------------------------------------------------- clusters


def cluster_hardware(cluster: Cluster) -> tuple[Hardware, ...]:
    """One ``Hardware`` per GPU type of ``cluster`` (index = ``cluster.gpu_types``), from the
    first machine group of that type: its GPUs per machine, intra-machine link
    (``machine_link``) and NIC (``nic_gbps``, else the machine uplink; latency of the rack
    tier)."""
    out = []
    for k in range(len(cluster.gpu_types)):
        m = int(np.flatnonzero(cluster.machine_type == k)[0])
        group = int(cluster.machine_group[m])
        nic_bw = float(cluster.machine_nic_Bps[m])
        nic = Interconnect(
            f"nic-{nic_bw * 8 / 1e9:g}g", nic_bw, cluster.rack_link.latency_s, "machine NIC"
        )
        out.append(Hardware(
            gpu_type(cluster.gpu_types[k]), int(cluster.machine_num_gpus[m]),
            cluster.group_machine_link[group], nic,
        ))  # fmt: skip
    return tuple(out)


FREE_LINK = Interconnect("ideal", math.inf, 0.0, "no communication cost (network: ideal)")


def ideal_hardware(hw: Hardware) -> Hardware:
    """``hw`` with free links (infinite bandwidth, zero latency): scenario ``network: ideal``.

    Every communication term of a plan is then zero, so the best plan is the fastest
    compute-only pipeline that fits in memory (adaptive parallelism still chooses it)."""
    return Hardware(hw.gpu, hw.gpus_per_node, FREE_LINK, FREE_LINK)


def uplinks_can_bind(cluster: Cluster) -> bool:
    """Whether a lone job's cross-rack traffic can ever get less than its NICs' speed on
    ``cluster``: only with ToR (rail) uplink oversubscription or a modelled spine link."""
    return cluster.config.rack_uplink_oversubscription > 1.0 or cluster.spine_link >= 0


def cross_rack_share(cluster: Cluster, gpus: np.ndarray) -> float:
    """Smallest fraction of its capacity any NIC of the placement gets when every NIC of the
    job sends across racks at once: one flow per NIC through the NIC, its rack (rail) uplink
    and the spine link, shared max-min fairly (``perf.network.maxmin_rates``), each capped at
    its NIC. 1.0 when the placement sits in one rack."""
    gpus = np.asarray(gpus, dtype=np.int64)
    if np.unique(cluster.machine_rack[cluster.gpu_machine[gpus]]).size <= 1:
        return 1.0
    nics = np.unique(cluster.gpu_nic[gpus])
    tail = [cluster.spine_link] if cluster.spine_link >= 0 else []
    links = [np.array([n, u, *tail]) for n, u in zip(nics.tolist(),
                                                    cluster.nic_uplink[nics].tolist(),
                                                    strict=True)]  # fmt: skip
    cap = cluster.nic_Bps[nics]
    rates = maxmin_rates(links, cluster.link_capacity_Bps, cap)
    return float(min((rates / cap).min(), 1.0))


def placement_hardware(
    cluster: Cluster, gpus: np.ndarray, hardware: tuple[Hardware, ...] | None = None
) -> tuple[Hardware, ...]:
    """``hardware`` (default ``cluster_hardware``) as seen by a job on ``gpus``: the
    cross-rack share of its NICs (:func:`cross_rack_share`) as ``Hardware.wide`` and where its
    racks begin in the plan's GPU order (its GPUs by rack, then id) as ``rack_breaks``.
    Unchanged (the same objects, so the plan caches hit) when the placement sits in one rack
    or its cross-rack traffic runs at full NIC speed."""
    hw = cluster_hardware(cluster) if hardware is None else hardware
    gpus = np.asarray(gpus, dtype=np.int64)
    if gpus.size <= 1 or not uplinks_can_bind(cluster):
        return hw
    share = cross_rack_share(cluster, gpus)
    if share >= 1.0:
        return hw
    racks = cluster.machine_rack[cluster.gpu_machine[gpus]]
    ordered = racks[np.lexsort((gpus, racks))]
    breaks = tuple(int(x) for x in np.flatnonzero(ordered[1:] != ordered[:-1]) + 1)
    out = []
    for h in hw:
        bw = h.nic.bandwidth_Bps * share
        wide = Interconnect(f"{h.nic.name}-x{share:.4g}", bw, h.nic.latency_s,
                            "the machine's share of its rack uplink / spine")  # fmt: skip
        out.append(Hardware(h.gpu, h.gpus_per_node, h.intra, h.nic, wide, breaks))
    return tuple(out)


class ParallelismSpeeds:
    """The engine's speed path for adaptive-parallelism jobs (Crius Table 2 models).

    A job runs with the best plan for the GPUs it holds (``best_plan``): their type and count.
    GPUs of several types (a heterogeneity-unaware policy's placement) run at the pace of the
    slowest type among them and must fit the smallest (synchronous training waits for its
    slowest worker). The placement's spread over machines is not modelled (plans assume
    packed machines); its spread over racks is (``placement_hardware``). ``ideal`` (scenario
    ``network: ideal``): every link is free, so a job runs its best compute-only plan and
    pays no communication.
    """

    def __init__(self, cluster: Cluster, ideal: bool = False) -> None:
        self.cluster = cluster
        self.ideal = ideal
        hardware = cluster_hardware(cluster)
        self.hardware = tuple(ideal_hardware(h) for h in hardware) if ideal else hardware
        self._placed = not ideal and uplinks_can_bind(cluster)
        self._memo: dict[bytes, tuple[Hardware, ...]] = {}
        self._plans: dict[tuple[str, bytes], tuple[Plan, Hardware] | None] = {}

    def hardware_of(self, gpus: np.ndarray) -> tuple[Hardware, ...]:
        """Per GPU type, the ``Hardware`` a job on ``gpus`` sees (``placement_hardware``)."""
        if not self._placed:
            return self.hardware
        key = np.asarray(gpus, dtype=np.int64).tobytes()
        got = self._memo.get(key)
        if got is None:
            got = placement_hardware(self.cluster, gpus, self.hardware)
            if len(self._memo) >= 65536:
                self._memo.clear()
            self._memo[key] = got
        return got

    def plan(self, model: str, gpus: np.ndarray) -> Plan | None:
        """The plan a job of ``model`` runs on ``gpus`` (None: no plan fits in memory)."""
        got = self.plan_hardware(model, gpus)
        return None if got is None else got[0]

    def plan_hardware(self, model: str, gpus: np.ndarray) -> tuple[Plan, Hardware] | None:
        """:meth:`plan` and the ``Hardware`` it runs on (that of the slowest GPU type),
        remembered per (model, GPU ids): the engine asks again for every placement it
        checks, times and puts on the shared links."""
        gpus = np.asarray(gpus, dtype=np.int64)
        key = (model, gpus.tobytes())
        got = self._plans.get(key, self)
        if got is self:
            if len(self._plans) >= 65536:
                self._plans.clear()
            got = self._plans[key] = self._plan_hardware(model, gpus)
        return got  # type: ignore[return-value]

    def _plan_hardware(self, model: str, gpus: np.ndarray) -> tuple[Plan, Hardware] | None:
        types = self.cluster.gpu_type_idx[gpus]
        if not types.size:
            return None
        lo, hi = int(types.min()), int(types.max())
        kinds = [lo] if lo == hi else np.unique(types).tolist()  # one type: the usual case
        hardware = self.hardware_of(gpus)
        worst: tuple[Plan, Hardware] | None = None
        for k in kinds:
            p = best_plan(model, hardware[k], int(gpus.size))
            if p is None:
                return None
            if worst is None or p.iter_time_s > worst[0].iter_time_s:
                worst = (p, hardware[k])
        return worst

    def speed(self, model: str, gpus: np.ndarray) -> tuple[float, float] | None:
        """(compute seconds, communication seconds) per iteration, or None when OOM."""
        p = self.plan(model, gpus)
        if p is None:
            return None
        return (p.compute_s, 0.0) if self.ideal else (p.compute_s, p.comm_s)
