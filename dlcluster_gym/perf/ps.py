"""Parameter-server (PS) jobs on CPUs: DT-configs, their training speed and its bottlenecks
(Nearchus III), and the noisy metric samples a scheduler sees.

A job's allocation is a **DT-config** (Nearchus IV): ``n_ps`` PS nodes and ``n_wk`` worker
nodes, each a container with a vCPU assignment placed on one server (:class:`DTConfig`).

Steady-state speed (steps/s) of a DT-config, :func:`steady_state`:

- **Speed tracks utilized compute** (III-A). Worker ``i`` can use ``c_i = min(a_i, mu_i)``
  vCPUs; unthrottled it makes ``c_i / wk_cpu_s`` steps/s, and the job's demand ``X`` is the
  sum. The speed is ``S = min(X, PSC limit, PSN limit)`` and every worker is throttled by the
  same factor ``S / X`` (it waits for the parameter servers), so total worker utilization is
  ``S x wk_cpu_s``: speed is linear in utilization whatever the (n_ps, n_wk) (Fig. 1b, 2).
- **MU bottleneck** (III-B, Fig. 3-4): one training process cannot use more than
  ``mu(C, k) = (C - (C - MU1(C)) k^-alpha) / k`` vCPUs, with ``C`` the server's physical cores,
  ``k`` the job's processes of the same component (workers, or PS nodes) on that server,
  ``MU1`` interpolated through 16/21/37 vCPUs on 20/32/64 cores, and ``alpha = 0.76`` fitted
  to Fig. 4 (37 -> 46 -> ~57 vCPUs for 1 -> 2 -> 10 workers on a 64-core server).
- **PSC bottleneck**: PS node ``j`` holds a share ``s_j`` of the parameters (TensorFlow's
  round-robin variable placement: the node with the largest tensors gets ``1 + imbalance``
  times the others' share, the PS-straggler effect of III-B) and needs ``S x ps_cpu_s x s_j``
  vCPUs; ``S <= min(a_j, mu_j) / (ps_cpu_s s_j)``.
- **PSN bottleneck** (Fig. 5): per step each worker pushes gradients and pulls weights,
  ``bytes_per_step`` each direction, split over PS nodes by share. Traffic between a worker and
  a PS node on the same server stays off the NIC. The NIC of server ``m`` carries
  ``B [sum_{PS j on m} s_j (1 - w_m) + w_m (1 - S_m)]`` bytes per step each way (``w_m``: the
  share of steps made by workers on ``m``, ``S_m``: the parameter share held on ``m``), and
  ``S <= nic_efficiency x NIC_m / that``. More PS nodes on more servers spread the traffic.

Metric samples (:class:`SampleStream`): every sample carries multiplicative Gaussian noise
whose standard deviation is ``noise_sd + cold_sd x exp(-t / warmup_s)``, ``t`` the time since
the (re)start: right after a restart metrics fluctuate (cold start, Nearchus IV: "it takes
time for metrics to stabilize"), then settle to the measurement noise. The fluctuation has mean
zero, so a stabilized window is an unbiased estimate of the steady state. Network samples are
fractions of the NIC line rate. Noise is keyed by (run key, job, start epoch, sample index),
so a sample has the same value however and whenever a scheduler asks for it.

Cross-job effects: containers isolate CPU (each job sees its servers' cores up to its vCPU
assignment), but jobs on one server share its NIC (:func:`share_nics`): each job's NIC traffic
at its own steady-state speed is its demand on that server, and the server's NIC goodput is
shared max-min fairly among the jobs there (``perf.network``'s rule for GPU jobs); a job whose
share is below its demand slows to what its tightest server allows. One-shot, per server.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from dlcluster_gym import numerics
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.workload.ps import PSModel

# MU bottleneck, Nearchus Fig. 3: a single worker stagnates at 16/21/37 vCPUs on servers of
# 20/32/64 cores. Fig. 4: with more workers per server total utilization rises (alpha).
MU_CORES = np.array([20.0, 32.0, 64.0])
MU_SINGLE = np.array([16.0, 21.0, 37.0])
MU_ALPHA = 0.76
NIC_EFFICIENCY = 0.96  # goodput / line rate of a saturated NIC
PS_IMBALANCE = 0.25  # extra parameter share of the PS node that gets the largest tensors
NOISE_SD = 0.02  # multiplicative measurement noise of utilization, speed and NIC samples
COLD_SD = 0.25  # extra noise right after a (re)start ...
WARMUP_S = 90.0  # ... decaying with this time constant: 5 stable 60-s samples after 5-8 min


def mu_single(cores: np.ndarray | float) -> np.ndarray:
    """Most vCPUs one training process can use on a server with ``cores`` cores (Fig. 3)."""
    c = np.asarray(cores, dtype=np.float64)
    slope = (MU_SINGLE[-1] - MU_SINGLE[-2]) / (MU_CORES[-1] - MU_CORES[-2])
    inside = np.interp(c, MU_CORES, MU_SINGLE)
    low = c * MU_SINGLE[0] / MU_CORES[0]
    high = MU_SINGLE[-1] + slope * (c - MU_CORES[-1])
    out = np.where(c < MU_CORES[0], low, np.where(c > MU_CORES[-1], high, inside))
    return np.minimum(out, c)


def mu_cap(cores: np.ndarray | float, procs: np.ndarray | float) -> np.ndarray:
    """Per-process vCPU cap with ``procs`` of the job's processes on a ``cores``-core server."""
    c = np.asarray(cores, dtype=np.float64)
    k = np.maximum(np.asarray(procs, dtype=np.float64), 1.0)
    total = c - (c - mu_single(c)) * k**-MU_ALPHA
    return total / k


@dataclass(frozen=True, slots=True)
class DTConfig:
    """A DT-config (Nearchus IV): vCPUs and server of each PS node and each worker node.

    ``r_ps`` / ``r_wk`` are the components' totals; node ``i`` of :meth:`nodes` is PS node
    ``i`` for ``i < n_ps``, else worker ``i - n_ps``.
    """

    ps_vcpus: tuple[float, ...]
    wk_vcpus: tuple[float, ...]
    ps_servers: tuple[int, ...]
    wk_servers: tuple[int, ...]

    @property
    def n_ps(self) -> int:
        return len(self.ps_vcpus)

    @property
    def n_wk(self) -> int:
        return len(self.wk_vcpus)

    @property
    def r_ps(self) -> float:
        return float(sum(self.ps_vcpus))

    @property
    def r_wk(self) -> float:
        return float(sum(self.wk_vcpus))

    @property
    def total(self) -> float:
        return self.r_ps + self.r_wk

    def vcpus(self) -> np.ndarray:
        """All nodes' vCPUs, PS nodes first."""
        return np.array(self.ps_vcpus + self.wk_vcpus, dtype=np.float64)

    def servers(self) -> np.ndarray:
        """All nodes' servers, PS nodes first."""
        return np.array(self.ps_servers + self.wk_servers, dtype=np.int64)

    def memory(self, model: PSModel) -> np.ndarray:
        """All nodes' memory requests (GB), PS nodes first."""
        return np.array([model.ps_mem_gb] * self.n_ps + [model.wk_mem_gb] * self.n_wk)

    def label(self) -> str:
        return f"({self.n_ps}ps, {self.n_wk}wk, {self.r_ps:.1f}, {self.r_wk:.1f})"

    def check(self, where: str) -> None:
        """Shape and value checks that need no cluster (raise ConfigError naming ``where``)."""
        if self.n_ps < 1 or self.n_wk < 1:
            raise ConfigError(f"{where}: a DT-config needs >= 1 PS and >= 1 worker node")
        if len(self.ps_servers) != self.n_ps or len(self.wk_servers) != self.n_wk:
            raise ConfigError(f"{where}: one server per node expected")
        v = self.vcpus()
        if not np.isfinite(v).all() or (v <= 0).any():
            raise ConfigError(f"{where}: node vCPUs must be finite and > 0, got {v.tolist()}")


@dataclass(frozen=True)
class PSPerf:
    """Steady state of a job on a DT-config."""

    speed: float  # steps/s
    demand: float  # steps/s the workers could make if the PS side kept up
    node_util: np.ndarray  # utilized vCPUs per node (PS nodes first)
    ps_net: np.ndarray  # per PS node: its server's NIC load / line rate (each direction)
    bottleneck: str  # "none" | "mu" | "psc" | "psn"
    limits: dict[str, float] = field(default_factory=dict)
    nic_Bps_used: np.ndarray | None = None  # bytes/s on each server's NIC (each direction)

    @property
    def used(self) -> float:
        return float(self.node_util.sum())


def ps_shares(n_ps: int, imbalance: float = PS_IMBALANCE) -> np.ndarray:
    """Parameter share of each PS node (the first one holds the largest tensors)."""
    w = np.ones(n_ps)
    if n_ps > 1:
        w[0] += imbalance
    return w / w.sum()


def steady_state(
    model: PSModel,
    cfg: DTConfig,
    cores: np.ndarray,
    nic_Bps: np.ndarray,
    *,
    nic_efficiency: float = NIC_EFFICIENCY,
    nic_share: np.ndarray | None = None,
) -> PSPerf:
    """Speed and per-node utilization of ``model`` on ``cfg`` (see the module docstring).

    ``cores`` and ``nic_Bps`` are per server of the cluster (``Cluster.machine_cores``,
    ``Cluster.machine_nic_Bps``); ``nic_share`` the fraction of each server's NIC this job may
    use (:func:`share_nics`; default all of it)."""
    a = cfg.vcpus()
    srv = cfg.servers()
    n_ps = cfg.n_ps
    # MU: processes of the same component on a server share its parallelism (Fig. 4 counts
    # the workers on a server; the PS node next to them is not counted).
    ps_procs = np.bincount(srv[:n_ps], minlength=cores.size)
    wk_procs = np.bincount(srv[n_ps:], minlength=cores.size)
    procs = np.concatenate([ps_procs[srv[:n_ps]], wk_procs[srv[n_ps:]]])
    cap = np.minimum(a, mu_cap(cores[srv], procs))
    wk_cap = cap[n_ps:]
    x = wk_cap / model.wk_cpu_s
    demand = float(x.sum())
    share = ps_shares(n_ps)
    psc = float(np.min(cap[:n_ps] / (model.ps_cpu_s * share)))
    # NIC bytes per step on each server used by the job.
    w_m = np.bincount(srv[n_ps:], weights=x, minlength=cores.size) / demand
    s_m = np.bincount(srv[:n_ps], weights=share, minlength=cores.size)
    per_step = model.bytes_per_step * (s_m * (1.0 - w_m) + w_m * (1.0 - s_m))
    used = per_step > 0
    nic = nic_Bps if nic_share is None else nic_Bps * nic_share
    psn = float(np.min(nic_efficiency * nic[used] / per_step[used])) if used.any() else math.inf
    speed = min(demand, psc, psn)
    if speed >= demand * (1 - 1e-12):
        mu_hit = bool((wk_cap < a[n_ps:] - 1e-9).any())
        bottleneck = "mu" if mu_hit else "none"
    else:
        bottleneck = "psc" if psc <= psn else "psn"
    throttle = speed / demand
    util = np.empty_like(a)
    util[n_ps:] = wk_cap * throttle
    util[:n_ps] = speed * model.ps_cpu_s * share
    ps_net = (speed * per_step / nic_Bps)[srv[:n_ps]]
    return PSPerf(
        nic_Bps_used=speed * per_step,
        speed=speed,
        demand=demand,
        node_util=util,
        ps_net=ps_net,
        bottleneck=bottleneck,
        limits={"workers": demand, "psc": psc, "psn": psn},
    )


def share_nics(
    demand_Bps: dict[int, np.ndarray], nic_Bps: np.ndarray, nic_efficiency: float = NIC_EFFICIENCY
) -> dict[int, np.ndarray]:
    """Per job, the fraction of each server's NIC goodput it may use when the jobs' NIC demands
    (bytes/s per server, at their own steady-state speeds) share it max-min fairly; 1.0 where
    the job gets all it asks for (its speed is then its own steady state)."""
    jobs = list(demand_Bps)
    if not jobs:
        return {}
    d = np.stack([demand_Bps[j] for j in jobs])  # jobs x servers
    cap = nic_efficiency * nic_Bps
    alloc = d.copy()
    over = np.flatnonzero(d.sum(axis=0) > cap * (1 + 1e-12))
    for s in over.tolist():
        col = d[:, s]
        on = np.flatnonzero(col > 0)
        left, rest = float(cap[s]), on[np.argsort(col[on], kind="stable")].tolist()
        while rest:
            share = left / len(rest)
            j = rest[0]
            if col[j] <= share:
                left -= col[j]
                rest.pop(0)
            else:
                alloc[rest, s] = share
                break
    limited = alloc < d * (1.0 - 1e-12)  # only where a job gets less than its demand
    frac = np.where(limited, alloc / np.where(cap > 0, cap, 1.0), 1.0)
    return {j: frac[k] for k, j in enumerate(jobs)}


def spread_place(
    vcpus: Sequence[float],
    mem: Sequence[float],
    free_vcpus: np.ndarray,
    free_mem: np.ndarray,
    avoid: np.ndarray | None = None,
) -> np.ndarray | None:
    """Servers for nodes in order, each on the server with the most free vCPUs that fits it
    (Kubernetes' least-requested spreading), fewest ``avoid`` counts first; None if one does
    not fit. ``free_*`` are not modified."""
    fv = free_vcpus.astype(np.float64).copy()
    fm = free_mem.astype(np.float64).copy()
    count = np.zeros(fv.size) if avoid is None else avoid.astype(np.float64).copy()
    out = np.empty(len(vcpus), dtype=np.int64)
    for i, (v, m) in enumerate(zip(vcpus, mem, strict=True)):
        ok = (fv >= v - 1e-9) & (fm >= m - 1e-9)
        if not ok.any():
            return None
        key = np.where(ok, count * 1e6 - fv, np.inf)
        s = int(np.argmin(key))
        out[i] = s
        fv[s] -= v
        fm[s] -= m
        count[s] += 1
    return out


class SampleStream:
    """Noisy metric samples of one job, keyed so they never depend on query order.

    Sample ``k >= 1`` of start epoch ``e`` is taken at ``t0 + k x interval`` where ``t0`` is
    when the epoch's training resumed. ``noise`` rows are drawn from a generator seeded with
    ``(key, job, epoch, interval in ms)`` and extended on demand.
    """

    def __init__(self, key: int, job: int, epoch: int, interval_s: float, width: int) -> None:
        seed = np.random.SeedSequence([key, job, epoch, round(interval_s * 1000)])
        self._rng = np.random.default_rng(seed)
        self.width = width
        self._noise = np.empty((0, width))

    def noise(self, k_max: int) -> np.ndarray:
        """Noise rows 0..k_max-1 (row k-1 belongs to sample k)."""
        if self._noise.shape[0] < k_max:
            extra = max(k_max - self._noise.shape[0], 64)
            self._noise = np.vstack([self._noise, self._rng.standard_normal((extra, self.width))])
        return self._noise[:k_max]


@dataclass(frozen=True)
class Samples:
    """Metric samples of one job since its last (re)start, oldest first."""

    t: np.ndarray  # sample times (s)
    speed: np.ndarray  # steps/s
    node_util: np.ndarray  # (samples, nodes) utilized vCPUs, PS nodes first
    ps_net: np.ndarray  # (samples, n_ps) NIC load / line rate of each PS node's server

    def __len__(self) -> int:
        return int(self.t.size)


def make_samples(
    perf: PSPerf,
    stream: SampleStream,
    t0: float,
    now: float,
    interval_s: float,
    last: int | None = None,
    *,
    noise_sd: float = NOISE_SD,
    cold_sd: float = COLD_SD,
    warmup_s: float = WARMUP_S,
) -> Samples:
    """The samples at ``t0 + k interval <= now`` (the ``last`` ones if given)."""
    k_max = math.floor((now - t0) / interval_s + 1e-9) if now > t0 else 0
    k_lo = 1 if last is None else max(1, k_max - last + 1)
    ks = np.arange(k_lo, k_max + 1)
    n_nodes = perf.node_util.size
    if ks.size == 0:
        return Samples(np.zeros(0), np.zeros(0), np.zeros((0, n_nodes)), np.zeros((0, 0)))
    t = t0 + ks * interval_s
    sd = noise_sd + cold_sd * numerics.exp(-(t - t0) / warmup_s)
    z = stream.noise(k_max)[ks - 1] * sd[:, None]
    n_ps = perf.ps_net.size
    speed = np.maximum(perf.speed * (1.0 + z[:, 0]), 0.0)
    util = perf.node_util[None, :] * (1.0 + z[:, 1 : 1 + n_nodes])
    net = perf.ps_net[None, :] * (1.0 + z[:, 1 + n_nodes : 1 + n_nodes + n_ps])
    return Samples(t, speed, np.maximum(util, 0.0), np.clip(net, 0.0, 1.0))
