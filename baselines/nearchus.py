"""Nearchus (Tariq et al., "Accelerating Containerized Machine Learning Workloads"), section IV.

Per parameter-server job, an iterative directed search for the DT-config
``(n_ps, n_wk, r_ps, r_wk)`` with the highest resource utilization:

- **Start** (IV, "Resource Scaling Up"; V-A): a job leaves the FCFS waiting queue as soon as
  ``R0`` vCPUs (15 by default, capped by its budget) fit, as (1 PS, 2 workers) with ``R0 / 3``
  each. Head-of-line blocking: a job that does not fit blocks the ones behind it (FCFS,
  "System Implementation").
- **Stability Detector**: metrics (per-node utilization and training speed) are sampled every
  ``sample_interval_s`` since the job's last (re)start; the job is stable when both have a
  coefficient of variation below ``cv_max`` (5%) over ``n_comp`` (5) consecutive samples. With
  60 s samples and the post-restart fluctuation of ``perf.ps`` this takes 5-8 minutes, as in
  the paper.
- **Scaling Engine**: ``e_job = sum(u_i) / sum(a_i)``. If ``e_job >= e_thd_job`` (0.95) scale up:
  every node grows by ``r_up`` (50%) of its assignment, capped by the budget and the free vCPUs.
  Otherwise: the Resource Optimizer first (below); if it changes nothing, check PSN: a PS node
  with more than ``psn_frac`` (10%) of its last ``n_net`` (30) network samples since the last
  decision above ``psn_util`` (90%) of the NIC line rate -> add a PS node; else (MU bottleneck)
  add a worker; both split their component's vCPUs evenly over its nodes.
- **Resource Optimizer** (node level, then component level), triggered when some node has
  ``e_i < e_thd_opt`` (0.8): within a component, nodes below the threshold give their idle
  vCPUs (down to ``u_i / keep_eff``) to the component's other nodes, proportionally to their
  assignments; then, if one component is below ``e_thd_opt`` and the other saturated, idle vCPUs
  move from the first to the second, proportionally.
- **Stop**: the search ends (the last DT-config runs to the end, IV) when the job is at its
  budget with ``e_job >= e_thd_job``, or when ``patience`` consecutive decisions do not raise the
  stabilized speed by ``min_gain``; then the job returns to its fastest DT-config seen.

Choices where the paper is silent (documented in docs/nearchus.md):

- Component level moves vCPUs only to a *saturated* component (``e >= e_thd_job``): a component
  below that already has spare vCPUs and cannot use more (the MU case is left to scale-out).
- A donor node keeps ``u_i / keep_eff`` (``keep_eff`` = 0.9) rather than exactly ``u_i``, so it
  is not throttled by noise, and at least ``min_node_vcpus``.
- While jobs wait, running jobs do not scale up (FCFS: free vCPUs go to the queue first).
- A scale-up that cannot get at least 1 vCPU waits for the next stable sample (no restart).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from dlcluster_gym.errors import ConfigError
from dlcluster_gym.perf.ps import DTConfig, Samples
from dlcluster_gym.scheduler import BaseScheduler
from dlcluster_gym.sim.actions import Action, Reconfigure, StartPS, WakeUp
from dlcluster_gym.sim.boundary import JobTable
from dlcluster_gym.sim.psjobs import PSView
from dlcluster_gym.sim.view import ClusterView
from dlcluster_gym.workload.ps import MIN_CONFIG_NODES

from .ps_common import (
    Resources,
    check_nonnegative,
    check_positive,
    check_ps_workload,
    check_unit,
    even,
    fit,
)

_EPS = 1e-9


@dataclass
class _JobState:
    best_speed: float = 0.0
    best_cfg: DTConfig | None = None
    stalls: int = 0
    frozen: bool = False
    decided_t0: float = -1.0  # epoch start of the last decision (one decision per epoch)
    last: str = "start"


class Nearchus(BaseScheduler):
    """Nearchus (IV) with the paper's defaults (V-A)."""

    name = "nearchus"
    supports_ps_jobs = True

    def __init__(
        self,
        r0_vcpus: float = 15.0,
        r_up: float = 0.5,
        e_thd_job: float = 0.95,
        e_thd_opt: float = 0.8,
        cv_max: float = 0.05,
        n_comp: int = 5,
        n_net: int = 30,
        psn_frac: float = 0.1,
        psn_util: float = 0.9,
        sample_interval_s: float = 60.0,
        keep_eff: float = 0.9,
        min_node_vcpus: float = 0.5,
        min_gain: float = 0.02,
        patience: int = 2,
    ) -> None:
        super().__init__(
            r0_vcpus=r0_vcpus, r_up=r_up, e_thd_job=e_thd_job, e_thd_opt=e_thd_opt,
            cv_max=cv_max, n_comp=n_comp, n_net=n_net, psn_frac=psn_frac, psn_util=psn_util,
            sample_interval_s=sample_interval_s, keep_eff=keep_eff,
            min_node_vcpus=min_node_vcpus, min_gain=min_gain, patience=patience,
        )  # fmt: skip
        self.e_thd_job = check_unit("e_thd_job", e_thd_job)
        self.e_thd_opt = check_unit("e_thd_opt", e_thd_opt)
        self.cv_max = check_unit("cv_max", cv_max)
        self.psn_frac = check_unit("psn_frac", psn_frac)
        self.psn_util = check_unit("psn_util", psn_util)
        self.keep_eff = check_unit("keep_eff", keep_eff)
        self.r0 = check_positive("r0_vcpus", r0_vcpus)
        self.r_up = check_positive("r_up", r_up)
        self.interval = check_positive("sample_interval_s", sample_interval_s)
        self.min_node = check_positive("min_node_vcpus", min_node_vcpus)
        self.min_gain = check_nonnegative("min_gain", min_gain)
        for name, v in (("n_comp", n_comp), ("n_net", n_net), ("patience", patience)):
            if not (isinstance(v, int) and v >= 1):
                raise ConfigError(f"{name} must be an integer >= 1, got {v!r}")
        self.n_comp, self.n_net, self.patience = n_comp, n_net, patience
        self.state: dict[int, _JobState] = {}
        self.decisions: list[tuple[float, int, str, str]] = []  # (t, job, kind, config)

    # ------------------------------------------------------------------ setup
    def check_workload(self, view: ClusterView, jobs: JobTable) -> None:
        """Admission: PS jobs, nodes that fit a server, budgets that hold the minimal
        DT-config."""
        floor = MIN_CONFIG_NODES * self.min_node
        check_ps_workload(
            view, jobs, self.name, self.min_node, floor - _EPS,
            f"the minimal (1 PS, 2 workers) DT-config of {floor:g} vCPUs "
            f"({MIN_CONFIG_NODES} x min_node_vcpus={self.min_node:g})",
        )  # fmt: skip

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.state = {}
        self.decisions = []

    # ------------------------------------------------------------------ main
    def schedule(self, view: ClusterView) -> Sequence[Action]:
        ps = view.ps
        assert ps is not None
        res = Resources(ps)
        actions: list[Action] = []
        for job in view.waiting():
            if not ps.is_ps(job):
                continue
            r0 = min(self.r0, ps.budget(job))
            model = ps.model(job)
            cfg = fit(res, model, [r0 / 3], even(2, 2 * r0 / 3))
            if cfg is None:
                break  # FCFS: the head of the queue blocks the rest
            res.take(cfg, model)
            actions.append(StartPS(job, cfg))
            self.state[job] = _JobState()
            self._note(view, job, "start", cfg)
        queue_empty = len(actions) == view.num_waiting
        next_t = view.now + self.interval if actions else np.inf
        restart_s = view.scenario.overheads.restart_s
        for job in view.running():
            st = self.state.get(job)
            cfg = ps.config(job)
            if st is None or cfg is None or st.frozen:
                continue
            t0 = ps.epoch_start(job)
            if st.decided_t0 != t0:
                new = self._decide(view, ps, job, cfg, st, res, queue_empty)
                if new is not None:
                    model = ps.model(job)
                    res.give(cfg, model)
                    res.take(new, model)
                    actions.append(Reconfigure(job, new))
                    next_t = min(next_t, view.now + restart_s + self.interval)
                    continue  # samples restart after the restart overhead
            if not st.frozen:
                k = max(np.floor((view.now - t0) / self.interval + 1e-9), 0.0) + 1.0
                next_t = min(next_t, t0 + k * self.interval)
        if np.isfinite(next_t):
            actions.append(WakeUp(float(next_t)))
        return actions

    def _note(self, view: ClusterView, job: int, kind: str, cfg: DTConfig) -> None:
        self.decisions.append((view.now, job, kind, cfg.label()))

    # ------------------------------------------------------------------ decisions
    def _stable(self, s: Samples) -> bool:
        if len(s) < self.n_comp:
            return False
        util = s.node_util[-self.n_comp :].sum(axis=1)
        speed = s.speed[-self.n_comp :]
        for x in (util, speed):
            m = float(x.mean())
            if m <= 0 or float(x.std()) / m >= self.cv_max:
                return False
        return True

    def _decide(
        self,
        view: ClusterView,
        ps: PSView,
        job: int,
        cfg: DTConfig,
        st: _JobState,
        res: Resources,
        queue_empty: bool,
    ) -> DTConfig | None:
        s = ps.samples(job, self.interval, last=max(self.n_net, self.n_comp))
        if not self._stable(s):
            return None
        u = s.node_util[-self.n_comp :].mean(axis=0)
        a = cfg.vcpus()
        speed = float(s.speed[-self.n_comp :].mean())
        e_job = float(u.sum() / a.sum())
        model = ps.model(job)
        budget = ps.budget(job)
        if st.last != "capped":
            if speed > st.best_speed * (1.0 + self.min_gain):
                st.best_speed, st.best_cfg, st.stalls = speed, cfg, 0
            elif st.last != "start":
                st.stalls += 1
        st.decided_t0 = ps.epoch_start(job)
        if st.stalls >= self.patience:
            st.frozen = True
            return self._revert(view, job, cfg, st, res, model)
        res.give(cfg, model)
        try:
            if e_job >= self.e_thd_job:
                if cfg.total >= budget - 1e-6:
                    st.frozen = True
                    self._note(view, job, "converged", cfg)
                    return None
                if not queue_empty:
                    st.last, st.decided_t0 = "capped", -1.0
                    return None
                new = self._scale_up(res, model, cfg, budget)
                if new is None:
                    st.last, st.decided_t0 = "capped", -1.0  # retry at the next sample
                    return None
                kind = "scale-up"
            else:
                new = self._optimize(res, model, cfg, u)
                kind = "adjust"
                if new is None:
                    if self._psn(s, cfg):
                        new, kind = self._add_ps(res, model, cfg), "add-ps"
                    else:
                        new, kind = self._add_worker(res, model, cfg), "add-worker"
                if new is None:
                    st.stalls += 1
                    return None
        finally:
            res.take(cfg, model)
        st.last = kind
        self._note(view, job, kind, new)
        return new

    def _revert(
        self,
        view: ClusterView,
        job: int,
        cfg: DTConfig,
        st: _JobState,
        res: Resources,
        model,
    ) -> DTConfig | None:
        best = st.best_cfg
        if best is None or best == cfg:
            self._note(view, job, "stop", cfg)
            return None
        res.give(cfg, model)
        new = fit(res, model, best.ps_vcpus, best.wk_vcpus, best)
        res.take(cfg, model)
        if new is None:
            self._note(view, job, "stop", cfg)
            return None
        self._note(view, job, "revert", new)
        return new

    def _scale_up(self, res: Resources, model, cfg: DTConfig, budget: float) -> DTConfig | None:
        """Multiplicative increase by r_up, capped by budget and free vCPUs (IV)."""
        add = min(cfg.total * self.r_up, budget - cfg.total, res.total - 0.0)
        # res holds the job's own vCPUs as free: only the rest is new.
        add = min(add, res.total - cfg.total)
        while add >= 1.0:
            f = 1.0 + add / cfg.total
            new = fit(res, model, [v * f for v in cfg.ps_vcpus], [v * f for v in cfg.wk_vcpus],
                      cfg)  # fmt: skip
            if new is not None:
                return new
            add /= 2.0
        return None

    def _optimize(self, res: Resources, model, cfg: DTConfig, u: np.ndarray) -> DTConfig | None:
        """Node-level, then component-level resource assignment adjustment (IV)."""
        a = cfg.vcpus()
        e = u / a
        if not (e < self.e_thd_opt).any():
            return None
        new = a.copy()
        n_ps = cfg.n_ps
        comps = (np.arange(n_ps), np.arange(n_ps, a.size))
        keep = np.maximum(u / self.keep_eff, self.min_node)
        for idx in comps:
            low = idx[e[idx] < self.e_thd_opt]
            high = idx[e[idx] >= self.e_thd_opt]
            if low.size == 0 or high.size == 0:
                continue
            freed = float(np.maximum(new[low] - keep[low], 0.0).sum())
            new[low] = np.minimum(new[low], keep[low])
            new[high] += freed * new[high] / new[high].sum()
        ce = [float(u[idx].sum() / new[idx].sum()) for idx in comps]
        for donor, taker in ((0, 1), (1, 0)):
            if ce[donor] < self.e_thd_opt and ce[taker] >= self.e_thd_job:
                d, t = comps[donor], comps[taker]
                freed = float(np.maximum(new[d] - keep[d], 0.0).sum())
                new[d] = np.minimum(new[d], keep[d])
                new[t] += freed * new[t] / new[t].sum()
                break
        moved = float(np.abs(new - a).sum()) / 2.0
        if moved < max(0.5, 0.02 * a.sum()):
            return None
        return fit(res, model, new[:n_ps].tolist(), new[n_ps:].tolist(), cfg)

    def _psn(self, s: Samples, cfg: DTConfig) -> bool:
        """PSN bottleneck: a PS node with > psn_frac of its samples above psn_util (IV)."""
        net = s.ps_net[-self.n_net :]
        if net.size == 0:
            return False
        return bool(((net > self.psn_util).mean(axis=0) > self.psn_frac).any())

    def _add_ps(self, res: Resources, model, cfg: DTConfig) -> DTConfig | None:
        n = cfg.n_ps + 1
        per = max(cfg.r_ps / n, self.min_node)
        extra = per * n - cfg.r_ps  # taken from the workers if the PS share is too thin
        wk = [v - extra * v / cfg.r_wk for v in cfg.wk_vcpus]
        if min(wk) < self.min_node:
            return None
        return fit(res, model, [per] * n, wk, cfg)

    def _add_worker(self, res: Resources, model, cfg: DTConfig) -> DTConfig | None:
        n = cfg.n_wk + 1
        if cfg.r_wk / n < self.min_node:
            return None
        return fit(res, model, list(cfg.ps_vcpus), even(n, cfg.r_wk), cfg)
