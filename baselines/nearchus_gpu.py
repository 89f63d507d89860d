"""``nearchus-gpu``: Nearchus's scaling rule on GPU jobs with elastic worker counts.

**Our extension**, not in the paper: Nearchus VI argues its bottleneck-driven scaling applies to
any compute resource. Here a GPU job's demand ``num_gpus`` is its budget R_max and its worker
count is elastic (the engine's ``Resize`` keeps the global batch and pays ``restart_s``):

- FCFS start with ``ceil(r0_frac x num_gpus)`` GPUs on the most consolidated free placement
  (the analogue of R0 = 15 of 100 vCPUs), head-of-line blocking;
- every ``check_interval_s`` (the stability window: the GPU engine's speeds carry no noise),
  efficiency ``e_job = compute / (compute + exposed communication)`` of the current placement;
  if ``e_job >= e_thd_job`` the job grows multiplicatively by ``r_up`` (the Scaling Engine's
  scale-up, IV), capped by its demand and the free GPUs ("only scaled up with the available
  resources"), onto the largest placement whose predicted efficiency still passes the
  threshold; if none passes now it stays growing and retries at later decisions; if
  ``e_job < e_thd_job`` (a network bottleneck: the GPU analogue of PSN/MU) it stops growing;
- running jobs do not grow while jobs wait.

Adaptive-parallelism jobs (the Crius Table 2 models) are refused at admission
(``NotApplicableError``): their parallelism plans fit only some GPU counts in memory, which the
rule's fractional start sizes do not respect.

Growth attempts that cannot succeed are skipped (``fast_paths``, same decisions): a job whose
placement is efficient but whose next larger one is not stays "growing" and would retry its
growth search whenever the free GPUs change. When the network model's overhead of a
placement is a function of its per-rack, per-machine GPU counts alone
(:func:`counts_determine_overhead`), the best efficiency any placement of ``k`` GPUs can have
is a maximum over those count shapes, computed once per (model, k); if it is below
``e_thd_job`` for every size the search would try, the search fails whatever GPUs are free,
and is not run. Within a search, the count shape of the most consolidated placement of each
size follows from the free counts alone (``sim.placement.ConsolidatedShapes``); a size whose
shape misses ``e_thd_job`` is not searched (efficiencies are cached per count shape).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dlcluster_gym.cluster.topology import Cluster, Shape
from dlcluster_gym.errors import NotApplicableError
from dlcluster_gym.perf.parallelism import is_adaptive_model
from dlcluster_gym.scheduler import BaseScheduler
from dlcluster_gym.sim.actions import Action, Resize
from dlcluster_gym.sim.boundary import JobTable
from dlcluster_gym.sim.placement import ConsolidatedShapes
from dlcluster_gym.sim.view import ClusterView

from .ps_common import check_positive, check_unit

_EFF_CACHE_MAX = 200_000  # cached placement efficiencies (cleared when exceeded)
# Largest growth size whose best efficiency is bounded by enumerating count shapes (there are
# few shapes of up to 8 GPUs; larger sizes fall back to the search).
_BOUND_MAX_GPUS = 8


def _efficiency(overhead: float, k: int, demand: int) -> float:
    """Efficiency of a job of ``demand`` GPUs on ``k`` GPUs whose placement's exposed
    communication is ``overhead`` x its compute at the demand."""
    if k == demand:
        return 1.0 / (1.0 + overhead)
    return 1.0 / (1.0 + overhead * k / demand)


def counts_determine_overhead(cluster: Cluster) -> bool:
    """Whether ``perf.network.placement_overhead`` of any placement on ``cluster`` depends only
    on its per-rack, per-machine GPU counts (``Cluster.placement_shape``).

    True when all machines belong to one group (one ``NetParams``: ``placement_net``), hold the
    same number of GPUs, every rack the same number of machines, and the NICs are one per GPU
    (no rails) or one per machine: ``placement_nic_shape`` then builds the NIC shape from the
    count shape alone (its two fast layouts); any other NIC layout depends on which GPUs share
    a NIC, so it is not covered.
    """
    if np.unique(cluster.machine_group).size != 1:
        return False
    if np.unique(cluster.machine_num_gpus).size != 1:
        return False
    if np.unique(np.bincount(cluster.machine_rack)).size != 1:
        return False
    per_gpu = (
        cluster.num_rails <= 1
        and cluster.num_nics == cluster.num_gpus
        and bool((cluster.gpu_nic == np.arange(cluster.num_gpus)).all())
    )
    per_machine = cluster.num_nics == cluster.num_machines and bool(
        (cluster.nic_machine == np.arange(cluster.num_machines)).all()
    )
    return per_gpu or per_machine


def count_shapes(
    k: int, gpus_per_machine: int, machines_per_rack: int, racks: int
) -> list[tuple[tuple[int, ...], ...]]:
    """Every count shape of ``k`` GPUs: racks as non-increasing tuples of per-machine counts
    (each <= ``gpus_per_machine``, at most ``machines_per_rack`` machines), at most ``racks``
    racks, listed in non-increasing order (each shape once)."""
    rack_tuples: list[tuple[int, ...]] = []

    def machines(left: int, cap: int, acc: tuple[int, ...]) -> None:
        if acc:
            rack_tuples.append(acc)
        if len(acc) == machines_per_rack:
            return
        for c in range(min(cap, left), 0, -1):
            machines(left - c, c, (*acc, c))

    machines(k, gpus_per_machine, ())
    order = sorted(set(rack_tuples), key=lambda r: (sum(r), r), reverse=True)
    out: list[tuple[tuple[int, ...], ...]] = []

    def build(left: int, start: int, acc: tuple[tuple[int, ...], ...]) -> None:
        if left == 0:
            out.append(acc)
            return
        if len(acc) == racks:
            return
        for i in range(start, len(order)):
            if sum(order[i]) <= left:
                build(left - sum(order[i]), i, (*acc, order[i]))

    build(k, 0, ())
    return out


class NearchusGPU(BaseScheduler):
    """Multiplicative scale-up of GPU workers while communication stays efficient."""

    name = "nearchus-gpu"
    # Skip a growth attempt that failed on the same held and free GPUs (the same inputs give
    # the same answer). False re-tries it at every decision (tests compare).
    fast_paths: bool = True
    elastic_gpu_jobs = True  # the engine accepts Start on fewer GPUs than the demand

    def __init__(
        self,
        r0_frac: float = 0.25,
        r_up: float = 0.5,
        e_thd_job: float = 0.95,
        check_interval_s: float = 600.0,
    ) -> None:
        super().__init__(
            r0_frac=r0_frac, r_up=r_up, e_thd_job=e_thd_job, check_interval_s=check_interval_s
        )
        self.r0_frac = check_unit("r0_frac", r0_frac)
        self.r_up = check_positive("r_up", r_up)
        self.e_thd_job = check_unit("e_thd_job", e_thd_job)
        self.interval = check_positive("check_interval_s", check_interval_s)
        self.done: set[int] = set()
        self._wake = -1.0

    def check_workload(self, view: ClusterView, jobs: JobTable) -> None:
        """Admission: data-parallel GPU jobs only (no adaptive-parallelism models)."""
        adaptive = sorted({j.model for j in jobs if is_adaptive_model(j.model)})
        if adaptive:
            raise NotApplicableError(
                f"{self.name} scales data-parallel GPU jobs; scenario {view.scenario.name} has "
                f"adaptive-parallelism jobs ({', '.join(adaptive[:5])}"
                f"{', ...' if len(adaptive) > 5 else ''}), whose plans fit only some GPU counts"
            )

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self.done = set()
        self._wake = -1.0
        self._failed: dict[int, tuple[bytes, bytes]] = {}  # job -> (held, free) of a failure
        self.skipped_attempts = 0
        # Efficiency of a placement: a pure function of (model, GPUs), kept across decisions.
        self._eff: dict[tuple[str, bytes], float] = {}
        # Best efficiency of any placement of k GPUs, per (model, k) (None: not bounded).
        self._best: dict[tuple[str, int], float | None] = {}
        # Efficiency per (model, demand, count shape) (used when the counts determine it).
        self._by_shape: dict[tuple[str, int, Shape], float] = {}
        self._rack_machines = [
            view.cluster.rack_machines(r).tolist() for r in range(view.cluster.num_racks)
        ]
        self.size_skips = 0  # growth sizes whose placement would not be efficient (no search)
        self._gpu_machine = view.cluster.gpu_machine
        self._rack_of = view.cluster.machine_rack.tolist()
        self._by_counts = counts_determine_overhead(view.cluster)
        self.bounded_skips = 0  # attempts skipped because no placement could be efficient
        self._stuck: set[int] = set()  # running jobs none of whose growth sizes can be efficient

    def _efficiency(self, view: ClusterView, job: int, gpus: np.ndarray) -> float:
        """``compute / (compute + exposed communication)`` of ``job`` on ``gpus`` (cached per
        model, demand and GPU ids when ``fast_paths``: the same inputs give the same number).
        On k GPUs of a demand d the compute per iteration is d / k times the demand's and the
        communication is the same gradient's all-reduce on ``gpus`` (the engine's model):
        1 / (1 + overhead x k / d)."""
        demand = int(view.jobs[job].num_gpus)
        if not self.fast_paths:
            return _efficiency(view.comm_overhead_for(job, gpus), gpus.size, demand)
        key = (view.jobs[job].model, demand, gpus.tobytes())
        e = self._eff.get(key)
        if e is None:
            if len(self._eff) > _EFF_CACHE_MAX:
                self._eff.clear()
            if self._by_counts:  # the same on every placement of the same count shape
                shape = view.cluster.placement_shape(gpus)
                e = self._shape_efficiency(view, job, shape, gpus)
            else:
                e = _efficiency(view.comm_overhead_for(job, gpus), gpus.size, demand)
            self._eff[key] = e
        return e

    def _best_efficiency(self, view: ClusterView, job: int, k: int) -> float | None:
        """The highest efficiency any placement of ``k`` GPUs on the cluster can have for
        ``job``'s model: the maximum over every count shape (each realized on the first racks,
        machines and GPUs), exact because the overhead depends on the count shape alone. None
        when that does not hold, the model runs with adaptive parallelism (its speed depends
        on more than the counts), or ``k`` is too large to enumerate."""
        model = view.jobs[job].model
        key = (model, int(view.jobs[job].num_gpus), k)
        if key in self._best:
            return self._best[key]
        best: float | None = None
        cluster = view.cluster
        if self._by_counts and k <= _BOUND_MAX_GPUS and not is_adaptive_model(model):
            shapes = count_shapes(
                k,
                int(cluster.machine_num_gpus[0]),
                int(cluster.rack_machines(0).size),
                cluster.num_racks,
            )
            best = max((self._shape_efficiency(view, job, sh) for sh in shapes), default=0.0)
        self._best[key] = best
        return best

    def _shape_efficiency(
        self, view: ClusterView, job: int, shape: Shape, gpus: np.ndarray | None = None
    ) -> float:
        """Efficiency of ``job`` on a placement of count shape ``shape`` (on ``gpus``, or
        realized on the first racks, machines and GPUs: the same on any placement of that
        shape when the counts determine the overhead)."""
        key = (view.jobs[job].model, int(view.jobs[job].num_gpus), shape)
        e = self._by_shape.get(key)
        if e is None:
            if gpus is None:
                cluster = view.cluster
                gpus = np.concatenate(
                    [
                        cluster.machine_gpus(m)[:c]
                        for r, rack in enumerate(shape)
                        for m, c in zip(cluster.rack_machines(r).tolist(), rack, strict=False)
                    ]  # rack r's first len(rack) machines (zip stops at the shorter)
                )
            overhead = view.comm_overhead_for(job, gpus)
            e = self._by_shape[key] = _efficiency(overhead, gpus.size, key[1])
        return e

    def _cannot_grow(self, view: ClusterView, job: int, lo: int, hi: int) -> bool:
        """No placement of ``lo`` to ``hi`` GPUs anywhere reaches ``e_thd_job`` for ``job``, so
        its growth search fails whatever GPUs are free."""
        for k in range(lo, hi + 1):
            best = self._best_efficiency(view, job, k)
            if best is None or best >= self.e_thd_job:
                return False
        return True

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        plan = view.plan()
        for job in view.waiting():
            n = max(1, math.ceil(self.r0_frac * view.jobs[job].num_gpus))
            gpus = plan.find(n)
            if gpus is None:
                break
            plan.start(job, gpus)
        growing = False
        if not view.waiting() or len(plan.actions) == view.num_waiting:
            for job in view.running():
                if job in self.done:
                    continue
                if job in self._stuck:  # its search always fails: it only keeps a wake-up
                    growing = True
                    continue
                held = view.gpus_of(job)
                demand = view.jobs[job].num_gpus
                if held.size >= demand:
                    self.done.add(job)
                    continue
                if view.now - view.last_start_s[job] < self.interval - 1e-6:
                    growing = True
                    continue
                key = (held.tobytes(), plan.free_mask.tobytes())
                if self.fast_paths and self._failed.get(job) == key:
                    growing = True  # it failed on these very GPUs: it would fail again
                    self.skipped_attempts += 1
                    continue
                e = self._efficiency(view, job, held)
                if e < self.e_thd_job:
                    self.done.add(job)
                    continue
                n = min(demand, math.ceil(held.size * (1 + self.r_up)))
                if self.fast_paths:
                    if self._cannot_grow(view, job, held.size + 1, n):
                        # No efficient placement of any size it may grow to: every later
                        # search fails too (it holds these GPUs until it finishes).
                        self._stuck.add(job)
                        growing = True
                        self.bounded_skips += 1
                        continue
                    # no placement of more GPUs than its own + the free ones
                    n = min(n, held.size + plan.num_free)
                    if n > held.size and self._cannot_grow(view, job, held.size + 1, n):
                        growing = True  # the search below would fail (no efficient placement)
                        self.bounded_skips += 1
                        continue
                if n > held.size:
                    trial = None  # the plan with the job's GPUs freed, made when needed
                    by_shape = self.fast_paths and self._by_counts
                    if by_shape:  # the free counts with the job's GPUs back
                        fpm = plan.free_per_machine.tolist()
                        fpr = plan.free_per_rack.tolist()
                        for m in self._gpu_machine[held].tolist():
                            fpm[m] += 1
                            fpr[self._rack_of[m]] += 1
                        shapes = ConsolidatedShapes(fpm, fpr, self._rack_machines)
                while n > held.size:
                    if by_shape:  # the search's shape from the free counts: skip a sure miss
                        shape = shapes.shape(n)
                        if (
                            shape is None
                            or self._shape_efficiency(view, job, shape) < self.e_thd_job
                        ):
                            self.size_skips += 1
                            n -= 1
                            continue
                    if trial is None:
                        trial = plan.copy()
                        trial.preempt(job)
                    gpus = trial.find(n)
                    if gpus is not None:
                        e_new = self._efficiency(view, job, gpus)
                        if e_new >= self.e_thd_job:
                            plan.migrate(job, gpus)
                            plan.actions[-1] = Resize(job, tuple(gpus.tolist()))
                            self._failed.pop(job, None)
                            break
                    n -= 1
                else:
                    self._failed[job] = key
                growing = True
        if growing and self._wake <= view.now:  # one pending wake-up at a time
            self._wake = view.now + self.interval
            plan.wake_up(self._wake)
        return plan.actions
