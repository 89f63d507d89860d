"""Helpers shared by the parameter-server schedulers (Nearchus, Optimus, FA-BF).

A scratch :class:`Resources` tracks free vCPUs and memory per server while a policy composes
several actions in one instant; :func:`fit` places a DT-config's nodes, keeping each node on its
current server when it still fits there and spreading the others (``perf.ps.spread_place``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from dlcluster_gym.errors import ConfigError, NotApplicableError
from dlcluster_gym.perf.ps import DTConfig, spread_place
from dlcluster_gym.sim.actions import StartPS
from dlcluster_gym.sim.boundary import JobTable
from dlcluster_gym.sim.psjobs import PSView
from dlcluster_gym.sim.view import ClusterView
from dlcluster_gym.workload.ps import PSModel

_EPS = 1e-9


def require_ps(view: ClusterView, policy: str) -> PSView:
    """The view's PS part, or NotApplicableError on scenarios without PS jobs."""
    ps = view.ps
    if ps is None:
        raise NotApplicableError(
            f"policy {policy!r} schedules parameter-server jobs on CPUs; scenario "
            f"{view.scenario.name} has none (GPU jobs only)"
        )
    return ps


def check_ps_workload(
    view: ClusterView, jobs: JobTable, policy: str, node_vcpus: float, floor: float, what: str
) -> None:
    """Admission of a PS policy (``check_workload``): the scenario has PS jobs, a server can
    host a ``node_vcpus`` node (and each model's memory), every budget is at least ``floor``
    (``what``: the configuration that needs it)."""
    ps = require_ps(view, policy)
    check_node_fits(ps, view, jobs, node_vcpus, policy)
    check_budgets(ps, jobs, floor, what)


def check_budgets(ps: PSView, jobs: JobTable, floor: float, what: str) -> None:
    """ConfigError naming the first submitted PS job whose vCPU budget is below ``floor``
    (``what`` describes the configuration that needs it)."""
    for job in range(len(jobs)):
        if ps.is_ps(job) and ps.budget(job) < floor:
            raise ConfigError(
                f"job {jobs[job].name or job}: vCPU budget {ps.budget(job):g} is smaller than "
                f"{what}"
            )


def check_unit(name: str, value: float) -> float:
    """A threshold in (0, 1]."""
    if not (isinstance(value, int | float) and 0.0 < float(value) <= 1.0):
        raise ConfigError(f"{name} must be in (0, 1], got {value!r}")
    return float(value)


def check_positive(name: str, value: float) -> float:
    if not (isinstance(value, int | float) and np.isfinite(value) and float(value) > 0.0):
        raise ConfigError(f"{name} must be finite and > 0, got {value!r}")
    return float(value)


def check_nonnegative(name: str, value: float) -> float:
    if not (isinstance(value, int | float) and np.isfinite(value) and float(value) >= 0.0):
        raise ConfigError(f"{name} must be finite and >= 0, got {value!r}")
    return float(value)


def check_node_fits(
    ps: PSView, view: ClusterView, jobs: JobTable, node_vcpus: float, policy: str
) -> None:
    """ConfigError if no server can host a node of ``node_vcpus`` (and each submitted job's
    model's memory; ``jobs`` as handed to ``check_workload``)."""
    if float(ps.server_vcpus.max()) < node_vcpus - _EPS:
        raise ConfigError(
            f"policy {policy!r}: no server of cluster {view.cluster.name} can host a "
            f"{node_vcpus:g}-vCPU node (largest server: {float(ps.server_vcpus.max()):g} vCPUs)"
        )
    for job in range(len(jobs)):
        if ps.is_ps(job):
            m = ps.model(job)
            need = max(m.ps_mem_gb, m.wk_mem_gb)
            if float(ps.server_memory_gb.max()) < need:
                raise ConfigError(
                    f"policy {policy!r}: job {job} ({m.name}) needs {need:g} GB per node; the "
                    f"largest server has {float(ps.server_memory_gb.max()):g} GB"
                )


class Resources:
    """Free vCPUs and memory per server, updated as actions are composed."""

    def __init__(self, ps: PSView) -> None:
        self.ps = ps
        self.vcpus = ps.free_vcpus.astype(np.float64).copy()
        self.mem = ps.free_memory_gb.astype(np.float64).copy()

    @property
    def total(self) -> float:
        return float(self.vcpus.sum())

    def take(self, cfg: DTConfig, model: PSModel) -> None:
        np.subtract.at(self.vcpus, cfg.servers(), cfg.vcpus())
        np.subtract.at(self.mem, cfg.servers(), cfg.memory(model))

    def give(self, cfg: DTConfig, model: PSModel) -> None:
        np.add.at(self.vcpus, cfg.servers(), cfg.vcpus())
        np.add.at(self.mem, cfg.servers(), cfg.memory(model))


def fit(
    res: Resources,
    model: PSModel,
    ps_vcpus: Sequence[float],
    wk_vcpus: Sequence[float],
    old: DTConfig | None = None,
) -> DTConfig | None:
    """Place nodes with these vCPUs: node i keeps old node i's server if it fits there, the
    rest spread (PS nodes away from servers holding the job's PS nodes). ``res`` must not hold
    ``old`` (give it back first); it is not modified. None if some node does not fit."""
    fv, fm = res.vcpus.copy(), res.mem.copy()
    n_ps, n_wk = len(ps_vcpus), len(wk_vcpus)
    servers = np.full(n_ps + n_wk, -1, dtype=np.int64)
    vcpus = np.asarray(list(ps_vcpus) + list(wk_vcpus), dtype=np.float64)
    mem = np.array([model.ps_mem_gb] * n_ps + [model.wk_mem_gb] * n_wk)
    if old is not None:
        prev = list(old.ps_servers[:n_ps]) + [-1] * (n_ps - min(n_ps, old.n_ps))
        prev += list(old.wk_servers[:n_wk]) + [-1] * (n_wk - min(n_wk, old.n_wk))
        for i, s in enumerate(prev):
            if s >= 0 and fv[s] >= vcpus[i] - _EPS and fm[s] >= mem[i] - _EPS:
                servers[i] = s
                fv[s] -= vcpus[i]
                fm[s] -= mem[i]
    nm = fv.size
    for i in np.flatnonzero(servers < 0).tolist():
        is_ps = i < n_ps
        placed = servers[:n_ps] if is_ps else servers[n_ps:]
        avoid = np.bincount(placed[placed >= 0], minlength=nm).astype(np.float64)
        s = spread_place([vcpus[i]], [mem[i]], fv, fm, avoid)
        if s is None:
            return None
        servers[i] = int(s[0])
        fv[servers[i]] -= vcpus[i]
        fm[servers[i]] -= mem[i]
    return DTConfig(
        tuple(vcpus[:n_ps].tolist()),
        tuple(vcpus[n_ps:].tolist()),
        tuple(servers[:n_ps].tolist()),
        tuple(servers[n_ps:].tolist()),
    )


def even(n: int, total: float) -> list[float]:
    return [total / n] * n


def start_in_order(
    view: ClusterView,
    res: Resources,
    node_vcpus: float,
    before: Callable[[int], None] | None = None,
) -> list[StartPS]:
    """Start waiting PS jobs in arrival order at (1 PS, 2 workers) of ``node_vcpus`` each
    (Nearchus's initial DT-config, V-A), head-of-line blocking; their resources are taken
    from ``res``. ``before(job)`` runs for each job tried, before it is fitted."""
    ps = view.ps
    assert ps is not None
    v = node_vcpus
    out: list[StartPS] = []
    for job in view.waiting():
        if before is not None:
            before(job)
        model = ps.model(job)
        cfg = fit(res, model, [v], [v, v])
        if cfg is None:
            break
        res.take(cfg, model)
        out.append(StartPS(job, cfg))
    return out
