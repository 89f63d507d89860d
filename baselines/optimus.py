"""Optimus as evaluated in Nearchus V (Peng et al., EuroSys'18, reference [7] there).

- **Profiling** (Nearchus III-C, V): before a job starts, 20 (n_ps, n_wk) configurations at
  ``node_vcpus`` (5) vCPUs per node are measured (the model's steady state on a spread placement
  over the empty cluster, with 2% multiplicative noise from the policy's generator; profiling
  time is not charged, as in the paper's JCT comparison). V: "We run profiling ... on both
  Cluster A and B using a maximum of 20 and 60 training nodes respectively ... we use 20
  configurations". Which 20 the paper does not say; ``profile="range"`` (default, our
  choice) spans the job's whole node range N = budget / node_vcpus (20 nodes on cluster A's
  100 vCPUs, 60 on cluster B's 300): a 4 x 5 grid, n_ps at 4 evenly spaced values in
  [1, N // 3] and n_wk at 5 evenly spaced values in [1, N - N // 3] (rounded, duplicates
  merged when N is small), so the largest configuration uses all N nodes and the PS share
  goes up to a third. ``profile="smallest"`` keeps the earlier 20 smallest configurations
  (n_ps = 1..4 x n_wk = 1..5, at most 9 nodes).
- **Resource-speed model**: Optimus's asynchronous-training model
  ``f(p, w) = w / (t0 + t1 w/p + t2 w + t3 p)``, fitted by non-negative least squares on
  ``w / f``.
- **Scaling**: start as (1 PS, 2 workers) at 5 vCPUs each (15 vCPUs, V-A), then every
  ``interval_s`` (10 minutes) add one 5-vCPU node, a PS or a worker, whichever the model
  predicts is faster, while the prediction improves, the budget allows and a server has room.
  Each addition restarts the job. Waiting jobs start first (FCFS, head-of-line blocking) and
  running jobs do not grow while jobs wait.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from dlcluster_gym.errors import ConfigError
from dlcluster_gym.scheduler import BaseScheduler
from dlcluster_gym.sim.actions import Action, Reconfigure, WakeUp
from dlcluster_gym.sim.boundary import JobTable
from dlcluster_gym.sim.psjobs import PSView
from dlcluster_gym.sim.view import ClusterView

from .ps_common import (
    Resources,
    check_nonnegative,
    check_positive,
    check_ps_workload,
    fit,
    start_in_order,
)

PROFILE_CONFIGS: tuple[tuple[int, int], ...] = tuple(
    (p, w) for p in range(1, 5) for w in range(1, 6)
)  # profile="smallest"
PROFILE_MODES = ("range", "smallest")


def profile_configs(max_nodes: int, mode: str = "range") -> list[tuple[int, int]]:
    """The (n_ps, n_wk) configurations profiled for a job of ``max_nodes`` nodes (Nearchus V):
    ``"range"`` a 4 x 5 grid over the whole range (see the module docstring), ``"smallest"``
    the 20 smallest configurations; both keep only n_ps + n_wk <= ``max_nodes``."""
    if mode == "smallest":
        grid = PROFILE_CONFIGS
    else:
        p_max = max(max_nodes // 3, 1)
        w_max = max(max_nodes - p_max, 1)
        ps = sorted(set(np.rint(np.linspace(1, p_max, 4)).astype(int).tolist()))
        wk = sorted(set(np.rint(np.linspace(1, w_max, 5)).astype(int).tolist()))
        grid = tuple((p, w) for p in ps for w in wk)
    return [(p, w) for p, w in grid if p + w <= max_nodes]


def _features(p: np.ndarray, w: np.ndarray) -> np.ndarray:
    return np.column_stack([np.ones_like(p), w / p, w, p])


def nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Least squares with non-negative coefficients (drop the most negative term, refit)."""
    active = list(range(a.shape[1]))
    x = np.zeros(a.shape[1])
    while active:
        sol, *_ = np.linalg.lstsq(a[:, active], b, rcond=None)
        if (sol >= 0).all():
            x[active] = sol
            return x
        active.pop(int(np.argmin(sol)))
    return x


@dataclass
class SpeedModel:
    """Optimus's fitted f(p, w) = w / (t0 + t1 w/p + t2 w + t3 p)."""

    theta: np.ndarray = field(default_factory=lambda: np.zeros(4))

    @classmethod
    def fit(cls, p: np.ndarray, w: np.ndarray, speed: np.ndarray) -> SpeedModel:
        p, w = np.asarray(p, float), np.asarray(w, float)
        return cls(nnls(_features(p, w), w / np.asarray(speed, float)))

    def __call__(self, p: float, w: float) -> float:
        denom = float(_features(np.array([p], float), np.array([w], float))[0] @ self.theta)
        return w / denom if denom > 0 else float("inf")


class Optimus(BaseScheduler):
    """Profiled resource-speed model, one node added per 10 minutes (Nearchus V)."""

    name = "optimus"
    supports_ps_jobs = True

    def __init__(
        self,
        node_vcpus: float = 5.0,
        interval_s: float = 600.0,
        profile_noise: float = 0.02,
        profile: str = "range",
    ) -> None:
        if profile not in PROFILE_MODES:
            raise ConfigError(f"profile must be one of {', '.join(PROFILE_MODES)}, got {profile!r}")
        super().__init__(
            node_vcpus=node_vcpus,
            interval_s=interval_s,
            profile_noise=profile_noise,
            profile=profile,
        )
        self.profile_mode = profile
        self.node_vcpus = check_positive("node_vcpus", node_vcpus)
        self.interval = check_positive("interval_s", interval_s)
        self.noise = check_nonnegative("profile_noise", profile_noise)
        self.models: dict[int, SpeedModel] = {}
        self.next_add: dict[int, float] = {}
        self.profiled: dict[int, list[tuple[int, int]]] = {}  # job -> configurations profiled

    def check_workload(self, view: ClusterView, jobs: JobTable) -> None:
        """Admission: PS jobs, nodes that fit a server, budgets that hold the initial
        configuration."""
        check_ps_workload(
            view, jobs, self.name, self.node_vcpus, 3 * self.node_vcpus,
            f"the initial (1 PS, 2 workers) configuration of 3 x {self.node_vcpus:g}",
        )  # fmt: skip

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.models, self.next_add, self.profiled = {}, {}, {}

    def profile(self, ps: PSView, job: int) -> SpeedModel:
        """Measure the profiling configurations and fit the model."""
        model = ps.model(job)
        empty = Resources(ps)
        empty.vcpus = ps.server_vcpus.astype(np.float64).copy()
        empty.mem = ps.server_memory_gb.astype(np.float64).copy()
        v = self.node_vcpus
        n_max = int(ps.budget(job) // v + 1e-9)
        rows = []
        self.profiled[job] = profile_configs(n_max, self.profile_mode)
        for p, w in self.profiled[job]:
            cfg = fit(empty, model, [v] * p, [v] * w)
            if cfg is not None:
                speed = ps.predict(job, cfg).speed * (1 + self.noise * self.rng.standard_normal())
                rows.append((p, w, max(speed, 1e-9)))
        arr = np.array(rows, dtype=np.float64)
        return SpeedModel.fit(arr[:, 0], arr[:, 1], arr[:, 2])

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        ps = view.ps
        assert ps is not None
        res = Resources(ps)
        v = self.node_vcpus

        def profile_once(job: int) -> None:
            if job not in self.models:
                self.models[job] = self.profile(ps, job)

        actions: list[Action] = list(start_in_order(view, res, v, profile_once))
        for a in actions:
            self.next_add[a.job] = view.now + self.interval
        queue_empty = len(actions) == view.num_waiting
        wake = [view.now + self.interval] if actions else []
        for job in view.running():
            cfg = ps.config(job)
            t = self.next_add.get(job)
            if cfg is None or t is None:
                continue
            if view.now + 1e-6 < t:
                wake.append(t)
                continue
            if not queue_empty:
                self.next_add[job] = view.now + self.interval
                wake.append(self.next_add[job])
                continue
            f = self.models[job]
            p, w = cfg.n_ps, cfg.n_wk
            if (p + w + 1) * v > ps.budget(job) + 1e-9:
                del self.next_add[job]  # budget reached: done
                continue
            now_speed = f(p, w)
            add_ps, add_wk = f(p + 1, w), f(p, w + 1)
            if max(add_ps, add_wk) <= now_speed * (1 + 1e-6):
                del self.next_add[job]  # the model predicts no gain: done
                continue
            model = ps.model(job)
            res.give(cfg, model)
            if add_ps > add_wk:
                new = fit(res, model, [*cfg.ps_vcpus, v], list(cfg.wk_vcpus), cfg)
            else:
                new = fit(res, model, list(cfg.ps_vcpus), [*cfg.wk_vcpus, v], cfg)
            if new is None:
                res.take(cfg, model)  # no room now: try again next interval
            else:
                res.take(new, model)
                actions.append(Reconfigure(job, new))
            self.next_add[job] = view.now + view.scenario.overheads.restart_s + self.interval
            wake.append(self.next_add[job])
        if wake:
            actions.append(WakeUp(min(wake)))
        return actions
