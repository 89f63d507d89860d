"""Engine-side state of parameter-server (PS) jobs, and the read-only view policies get of it.

Kept apart from the GPU engine: the engine creates a :class:`PSRuntime` only when the workload
has PS jobs (``Job.vcpu_budget`` set) and dispatches to it for those jobs only.

Representation (Nearchus IV): a running PS job holds a :class:`~dlcluster_gym.perf.ps.DTConfig`
(vCPUs and server of each PS and worker node, i.e. of each container). Servers have allocatable
vCPUs and memory (``Cluster.machine_vcpus`` / ``machine_memory_gb``); a node takes its vCPUs and
its model's memory on its server. A PS job holds no GPUs. ``StartPS(job, cfg)`` starts a waiting
job; ``Reconfigure(job, cfg)`` replaces a running job's DT-config and restarts it, paying the
scenario's ``overheads.restart_s`` (the job holds the new resources without progressing) and
opening a new metric epoch (samples restart, with the cold-start ramp of ``perf.ps``).

Network switches of the scenario (the same meaning as for GPU jobs): ``network: ideal`` removes
every communication cost, so a PS job's NICs never limit it (each server's NIC is taken as
infinitely fast: no PSN bottleneck, NIC load samples 0, ``predict`` alike); ``contention:
false`` turns off sharing between jobs, so PS jobs on one server do not share its NIC (each
still pays its own NIC traffic, at the whole NIC).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from dlcluster_gym.errors import ConfigError
from dlcluster_gym.perf.ps import (
    DTConfig,
    PSPerf,
    Samples,
    SampleStream,
    make_samples,
    share_nics,
    spread_place,
    steady_state,
)
from dlcluster_gym.sim.state import EngineState
from dlcluster_gym.workload.ps import MIN_NODE_VCPUS, PSModel, get_ps_model

_EPS = 1e-6


class PSRuntime:
    """vCPU/memory bookkeeping, DT-configs, steady-state speeds and metric samples of PS jobs."""

    def __init__(self, engine: EngineState) -> None:
        self.engine = engine
        cl = engine.cluster
        self.cluster = cl
        self.models: dict[int, PSModel] = {j.job_id: get_ps_model(j.model) for j in engine.jobs
                                           if j.is_ps}  # fmt: skip
        self.budget = np.array([j.vcpu_budget or 0.0 for j in engine.jobs], dtype=np.float64)
        min_mem = min(min(m.ps_mem_gb, m.wk_mem_gb) for m in self.models.values())
        for m in range(cl.num_machines):
            v, mem = float(cl.machine_vcpus[m]), float(cl.machine_memory_gb[m])
            if v < MIN_NODE_VCPUS or mem < min_mem:
                raise ConfigError(
                    f"cluster {cl.name}: server {m} has {v:g} allocatable vCPUs and {mem:g} GB, "
                    f"too small for any parameter-server node (>= {MIN_NODE_VCPUS:g} vCPU and "
                    f"{min_mem:g} GB)"
                )
        ideal = engine.scenario.network == "ideal"
        # NIC capacity the PS model sees per server: infinite under ``network: ideal``.
        self.nic_Bps = np.full(cl.num_machines, np.inf) if ideal else cl.machine_nic_Bps.copy()
        self.nic_Bps.setflags(write=False)
        self.share = engine.scenario.contention and not ideal  # jobs share server NICs
        self.free_vcpus = cl.machine_vcpus.astype(np.float64).copy()
        self.free_mem = cl.machine_memory_gb.astype(np.float64).copy()
        self.configs: dict[int, DTConfig] = {}
        self.perf: dict[int, PSPerf] = {}  # steady state with the server NICs shared
        self.alone: dict[int, PSPerf] = {}  # steady state with the whole NICs
        n = len(engine.jobs)
        self.epoch = np.zeros(n, dtype=np.int64)  # starts and restarts so far
        self.epoch_t0 = np.zeros(n)  # when the current epoch's training resumed
        self.key = int(engine.rng.integers(2**62))  # noise key: the run's generator
        self._streams: dict[tuple[int, int, float], SampleStream] = {}
        self._ts_alloc: list[float] = []
        self._ts_used: list[float] = []

    # ------------------------------------------------------------------ validation
    def check(self, bad: Any, action: Any, job: int, cfg: Any) -> DTConfig:
        """Validate a DT-config for ``job`` (its own current allocation counts as free)."""
        if not isinstance(cfg, DTConfig):
            raise bad(action, f"job {job}: config must be a perf.ps.DTConfig, got {cfg!r}")
        if job not in self.models:
            raise bad(action, f"job {job} is not a parameter-server job")
        try:
            cfg.check(f"job {job}")
        except ConfigError as exc:
            raise bad(action, str(exc)) from None
        if cfg.total > self.budget[job] + _EPS:
            raise bad(
                action,
                f"job {job}: DT-config uses {cfg.total:.3f} vCPUs, over its budget of "
                f"{self.budget[job]:g}",
            )
        srv = cfg.servers()
        nm = self.cluster.num_machines
        wrong = srv[(srv < 0) | (srv >= nm)]
        if wrong.size:
            raise bad(
                action, f"job {job}: server {int(wrong[0])} does not exist (servers 0..{nm - 1})"
            )
        fv, fm = self.free_vcpus.copy(), self.free_mem.copy()
        old = self.configs.get(job)
        if old is not None:
            np.add.at(fv, old.servers(), old.vcpus())
            np.add.at(fm, old.servers(), old.memory(self.models[job]))
        need_v = np.bincount(srv, weights=cfg.vcpus(), minlength=nm)
        need_m = np.bincount(srv, weights=cfg.memory(self.models[job]), minlength=nm)
        over = np.flatnonzero((need_v > fv + _EPS) | (need_m > fm + _EPS))
        if over.size:
            s = int(over[0])
            raise bad(
                action,
                f"job {job}: server {s} has {fv[s]:.3f} free vCPUs and {fm[s]:.1f} GB, the "
                f"DT-config needs {need_v[s]:.3f} vCPUs and {need_m[s]:.1f} GB there",
            )
        return cfg

    # ------------------------------------------------------------------ allocation
    def allocate(self, job: int, cfg: DTConfig, resume_at: float) -> PSPerf:
        model = self.models[job]
        np.subtract.at(self.free_vcpus, cfg.servers(), cfg.vcpus())
        np.subtract.at(self.free_mem, cfg.servers(), cfg.memory(model))
        self.configs[job] = cfg
        perf = steady_state(model, cfg, self.cluster.machine_cores, self.nic_Bps)
        self.alone[job] = perf
        self.perf[job] = perf
        self.epoch[job] += 1
        self.epoch_t0[job] = resume_at
        return perf

    def share_nics(self) -> list[int]:
        """Share each server's NIC among the running PS jobs on it (``perf.ps.share_nics``);
        returns the jobs whose speed changed. Nothing is shared (every job keeps its own
        steady state) with ``contention: false`` or ``network: ideal``."""
        if not self.share:
            return []
        cl = self.cluster
        demand = {j: p.nic_Bps_used for j, p in self.alone.items() if p.nic_Bps_used is not None}
        shares = share_nics(demand, self.nic_Bps)
        changed = []
        for job, frac in shares.items():
            if (frac >= 1.0).all():
                perf = self.alone[job]
            else:
                perf = steady_state(
                    self.models[job], self.configs[job], cl.machine_cores, self.nic_Bps,
                    nic_share=frac,
                )  # fmt: skip
            if perf.speed != self.perf[job].speed:
                changed.append(job)
            self.perf[job] = perf
        return changed

    def release(self, job: int) -> None:
        cfg = self.configs.pop(job, None)
        if cfg is None:
            return
        np.add.at(self.free_vcpus, cfg.servers(), cfg.vcpus())
        np.add.at(self.free_mem, cfg.servers(), cfg.memory(self.models[job]))
        del self.perf[job]
        del self.alone[job]

    # ------------------------------------------------------------------ metrics
    def samples(self, job: int, interval_s: float, last: int | None = None) -> Samples:
        perf = self.perf.get(job)
        if perf is None:
            raise KeyError(f"job {job} is not a running parameter-server job")
        if not (np.isfinite(interval_s) and interval_s > 0):
            raise ValueError(f"sampling interval must be > 0, got {interval_s!r}")
        epoch = int(self.epoch[job])
        key = (job, epoch, float(interval_s))
        stream = self._streams.get(key)
        if stream is None:
            width = 1 + perf.node_util.size + perf.ps_net.size
            stream = SampleStream(self.key, job, epoch, interval_s, width)
            self._streams = {k: v for k, v in self._streams.items() if k[0] != job or k[1] == epoch}
            self._streams[key] = stream
        return make_samples(perf, stream, float(self.epoch_t0[job]), self.engine.now, interval_s,
                            last)  # fmt: skip

    # ------------------------------------------------------------------ time series
    def record(self, replace: bool) -> None:
        alloc = float(sum(c.total for c in self.configs.values()))
        used = float(sum(p.used for p in self.perf.values()))
        if replace:
            self._ts_alloc[-1], self._ts_used[-1] = alloc, used
        else:
            self._ts_alloc.append(alloc)
            self._ts_used.append(used)

    def timeseries(self) -> dict[str, np.ndarray]:
        return {
            "alloc_vcpus": np.asarray(self._ts_alloc, dtype=np.float64),
            "used_vcpus": np.asarray(self._ts_used, dtype=np.float64),
        }


class PSView:
    """Read-only access to PS jobs for policies (``view.ps``; None on GPU-only scenarios)."""

    def __init__(self, rt: PSRuntime) -> None:
        self._rt = rt
        cl = rt.cluster
        self.num_servers = cl.num_machines
        self.server_cores = cl.machine_cores
        self.server_vcpus = cl.machine_vcpus
        self.server_memory_gb = cl.machine_memory_gb
        self.nic_Bps = rt.nic_Bps  # each server's NIC as the PS model sees it (inf: ideal)
        self.free_vcpus = _ro(rt.free_vcpus)
        self.free_memory_gb = _ro(rt.free_mem)
        self.restarts = _ro(rt.engine.resizes)

    @property
    def total_vcpus(self) -> float:
        return float(self.server_vcpus.sum())

    @property
    def num_free_vcpus(self) -> float:
        return float(self._rt.free_vcpus.sum())

    def is_ps(self, job: int) -> bool:
        return job in self._rt.models

    def budget(self, job: int) -> float:
        """The job's vCPU budget R_max."""
        return float(self._rt.budget[job])

    def model(self, job: int) -> PSModel:
        return self._rt.models[job]

    def config(self, job: int) -> DTConfig | None:
        """The running job's DT-config (None if not running)."""
        return self._rt.configs.get(job)

    def epoch_start(self, job: int) -> float:
        """When the job's current configuration started training (after its restart)."""
        return float(self._rt.epoch_t0[job])

    def samples(self, job: int, interval_s: float, last: int | None = None) -> Samples:
        """Metric samples (utilization per node, speed, PS NIC load) taken every
        ``interval_s`` since the job's current configuration started; the ``last`` ones."""
        return self._rt.samples(job, interval_s, last)

    def predict(self, job: int, cfg: DTConfig) -> PSPerf:
        """Noise-free steady state of ``job`` on ``cfg`` alone on its servers' NICs (for
        offline search and profiling; infinite NICs under ``network: ideal``)."""
        rt = self._rt
        return steady_state(rt.models[job], cfg, rt.cluster.machine_cores, rt.nic_Bps)

    def free_with(self, job: int) -> tuple[np.ndarray, np.ndarray]:
        """Free (vCPUs, memory) per server if ``job`` released its current allocation."""
        fv = self._rt.free_vcpus.copy()
        fm = self._rt.free_mem.copy()
        cfg = self._rt.configs.get(job)
        if cfg is not None:
            np.add.at(fv, cfg.servers(), cfg.vcpus())
            np.add.at(fm, cfg.servers(), cfg.memory(self._rt.models[job]))
        return fv, fm

    @staticmethod
    def place(
        vcpus: Sequence[float],
        mem: Sequence[float],
        free_vcpus: np.ndarray,
        free_mem: np.ndarray,
        avoid: np.ndarray | None = None,
    ) -> np.ndarray | None:
        """Spread placement (``perf.ps.spread_place``)."""
        return spread_place(vcpus, mem, free_vcpus, free_mem, avoid)


def _ro(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v
