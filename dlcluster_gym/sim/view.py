"""Read-only view of the engine that schedulers see, and a scratch Plan for tentative moves."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlcluster_gym.cluster.topology import Cluster, Tier
from dlcluster_gym.errors import OracleError
from dlcluster_gym.perf.contention import LinkPhases
from dlcluster_gym.perf.parallelism_links import AdaptiveTraffic
from dlcluster_gym.sim import placement
from dlcluster_gym.sim.actions import (
    Action,
    Migrate,
    Preempt,
    Resize,
    Start,
    TimeShare,
    WakeUp,
)
from dlcluster_gym.sim.boundary import FIX, JobInfo, JobTable, Oracle, PerJob, is_clairvoyant
from dlcluster_gym.sim.estimators import History
from dlcluster_gym.sim.psjobs import PSView
from dlcluster_gym.sim.state import EngineState
from dlcluster_gym.workload.models import ModelProfile


@dataclass(frozen=True, slots=True)
class Trigger:
    """One thing that happened since the scheduler was last called."""

    kind: str  # "arrival" | "finish" | "wakeup" | "round" | "start"
    job: int = -1


class ClusterView:
    """What a policy may look at. Arrays are read-only views that track the engine's state.

    Everything here is what a real cluster scheduler observes (see ``sim.boundary``): the
    cluster, the arrived jobs' descriptions (``jobs``), their attained iterations and
    service, running and waiting times, preemptions, the finished jobs' history
    (``history``). Per-job arrays are indexed by job id; entries of jobs that have not
    arrived hold 0 (NaN for times and profiles). Ground truth (job lengths, future arrivals)
    is behind ``oracle``, open only in a view made for a policy that declares
    ``clairvoyant = True``."""

    def __init__(self, engine: EngineState, *, clairvoyant: bool = False) -> None:
        self._e = engine
        self.clairvoyant = bool(clairvoyant)
        self.cluster: Cluster = engine.cluster
        self.jobs = JobTable(
            engine, clairvoyant=self.clairvoyant, policy=str(getattr(engine, "policy_name", ""))
        )
        self.num_gpus = engine.cluster.num_gpus
        self.scenario = engine.scenario
        self.free_mask = _ro(engine.free_mask)
        self.free_per_machine = _ro(engine.free_per_machine)
        self.free_per_rack = _ro(engine.free_per_rack)
        self.gpu_owner = _ro(engine.gpu_owner)
        # Submitted facts, filled when a job arrives.
        self.demand = _ro(engine.seen_demand)  # GPUs each job asks for
        self.compute_s = _ro(engine.seen_compute)  # compute per iteration (profiled)
        # [job, GPU type] factor on that compute per type (perf.gpu_speed; one column of
        # ones on a homogeneous cluster): a per-type profile, as Gavel measures
        scale = engine.type_scale
        self.type_compute_scale = _ro(np.ones((len(engine.jobs), 1)) if scale is None else scale)
        self.arrival_s = _ro(engine.seen_arrival)  # submission time
        # Attained facts.
        self.done_iters = _ro(engine.done_iters)
        self.run_time_s = _ro(engine.run_s)
        self.attained_service = _ro(engine.attained)
        self.wait_since = _ro(engine.wait_since)
        self.preemptions = _ro(engine.preemptions)
        self.iter_time_s = _ro(engine.iter_time)
        self.last_start_s = _ro(engine.last_start)
        self.history: History = engine.history  # finished jobs and their lengths
        # Parameter-server jobs on CPUs (sim.psjobs.PSView); None on GPU-only scenarios.
        self.ps: PSView | None = PSView(engine.ps) if engine.ps is not None else None
        self._plan_traffic: AdaptiveTraffic | None = None  # when the engine holds none
        self._siblings: dict[bool, ClusterView] = {self.clairvoyant: self}

    def for_policy(self, policy: object) -> ClusterView:
        """The view of the same engine that ``policy`` may read: the oracle open when it
        declares ``clairvoyant = True``, closed otherwise (for wrappers that drive another
        policy, e.g. a heuristic acting in an env)."""
        want = is_clairvoyant(policy)
        got = self._siblings.get(want)
        if got is None:
            got = self._siblings[want] = ClusterView(self._e, clairvoyant=want)
            got._siblings = self._siblings
        return got

    @property
    def oracle(self) -> Oracle:
        """Ground truth (job lengths, remaining iterations, future arrivals): only for a
        policy that declares ``clairvoyant = True``; an :class:`OracleError` otherwise."""
        if not self.clairvoyant:
            raise OracleError(
                f"policy {self.jobs.policy!r} opened the oracle (ground truth: job lengths, "
                f"future arrivals); {FIX}"
            )
        return Oracle(self._e)

    @property
    def num_job_ids(self) -> int:
        """Size of the job-id space (to size per-job arrays; not a decision input)."""
        return len(self.jobs)

    def arrivals(self, since: int = 0) -> list[int]:
        """Job ids that have arrived so far, in arrival order, from the ``since``-th on (a
        policy that keeps per-job tables passes how many it has taken in already)."""
        return self._e.arrived[since:]

    @property
    def num_arrived(self) -> int:
        return len(self._e.arrived)

    def per_job(self, fn: Callable[[JobInfo], Any], dtype: Any, fill: Any = 0) -> PerJob:
        """A per-job table of ``fn(view.jobs[j])``, computed when a job is first read after it
        arrived (see :class:`sim.boundary.PerJob`)."""
        return PerJob(self.jobs, fn, dtype, fill)

    # ---------------------------------------------------------------- time and triggers
    @property
    def now(self) -> float:
        return self._e.now

    @property
    def triggers(self) -> tuple[Trigger, ...]:
        """What happened since the last call (arrivals, finishes, wake-ups, rounds)."""
        return tuple(self._e.pending_triggers)

    # ---------------------------------------------------------------- queues
    def waiting(self) -> list[int]:
        """Waiting job ids, in the order they entered the wait queue."""
        return list(self._e.waiting)

    def iter_waiting(self) -> Iterator[int]:
        """Waiting job ids without copying (do not start jobs while iterating the engine)."""
        return iter(self._e.waiting)

    @property
    def num_waiting(self) -> int:
        return len(self._e.waiting)

    def running(self) -> list[int]:
        """Running job ids, in the order they started."""
        return list(self._e.running)

    @property
    def num_running(self) -> int:
        return len(self._e.running)

    @property
    def num_done(self) -> int:
        """Jobs finished so far."""
        return self._e.n_done

    @property
    def shares_links(self) -> bool:
        """Whether the engine models jobs sharing network links (link contention on and able
        to bind): a fact of the cluster and its configuration."""
        return self._e.links is not None

    @property
    def num_free(self) -> int:
        return placement.free_count(self._e.free_per_rack)

    def gpus_of(self, job: int) -> np.ndarray:
        """GPU ids held by a running job (empty if not running)."""
        g = self._e.job_gpus.get(job)
        return _ro(g) if g is not None else np.empty(0, dtype=np.int64)

    def holding(self, job: int) -> tuple[int, int]:
        """(GPU count, first GPU id) of a running job, (0, -1) if not running: the cheap
        question for policies that track allocations as (count, GPU type)."""
        g = self._e.job_gpus.get(job)
        return (int(g.size), int(g[0])) if g is not None and g.size else (0, -1)

    def shared_set(self, job: int) -> tuple[int, ...]:
        """The jobs that time-share ``job``'s GPU set (``actions.TimeShare``), the one holding
        the GPUs first; () when its GPUs are not time-shared."""
        shares = self._e.shares
        if shares is None or shares.holder[job] < 0:
            return ()
        return tuple(shares.members(job))

    def is_running(self, job: int) -> bool:
        return job in self._e.running

    def progress(self, job: int) -> float:
        """Fraction of the job's iterations completed: needs its length, so only for a
        finished job or through a clairvoyant view (``oracle.progress``)."""
        if self.jobs[job].finished:
            return 1.0
        return self.oracle.progress(job)

    def iterations_done(self, job: int) -> float:
        """Iterations a job has done as of now (``live`` for one job, without arrays)."""
        return self._e.done_iters_now(job)

    def live(self, jobs: np.ndarray | list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per job, as of now: iterations done, seconds holding GPUs, GPU-seconds attained.

        ``done_iters``/``run_time_s``/``attained_service`` lag for running jobs (they are
        brought up to date at events); this computes the current values, vectorized."""
        return self._e.live(np.asarray(jobs, dtype=np.int64))

    def iterations_done_of(self, jobs: np.ndarray | list[int]) -> np.ndarray:
        """``live``'s first column alone: per job, iterations done as of now."""
        return self._e.live_done(np.asarray(jobs, dtype=np.int64))

    def tier_of(self, job: int) -> Tier | None:
        """Consolidation tier of a running job's placement."""
        g = self._e.job_gpus.get(job)
        return None if g is None else self.cluster.placement_tier(g)

    def model_profile(self, job: int) -> ModelProfile:
        """Performance profile of a GPU job's model (the scenario's profile source)."""
        return self._e.profile(job)

    def comm_overhead_for(self, job: int, gpus: np.ndarray | tuple[int, ...]) -> float:
        """Predicted exposed-communication fraction of ``job`` on ``gpus`` (no contention)."""
        return self._e.comm_fraction(job, np.asarray(gpus, dtype=np.int64))

    def plan_traffic(
        self, job: int, gpus: np.ndarray
    ) -> tuple[float, float, dict[int, LinkPhases]] | None:
        """(compute s, communication s) per iteration of an adaptive-parallelism (Crius) job
        under its plan on ``gpus`` and its phases per shared link: what the engine times and
        shares (``perf.parallelism``, ``perf.parallelism_links``; the engine's own
        ``AdaptiveTraffic`` and its cache, or an equal one when the engine shares no links).
        None for other jobs or when no plan fits. The phases are shared: do not mutate."""
        e = self._e
        if e.par is None or not e.par_jobs[job]:
            return None
        gpus = np.asarray(gpus, dtype=np.int64)
        model = self.jobs[job].model
        speed = e.par.speed(model, gpus)
        if speed is None:
            return None
        if speed[1] <= 0.0:  # network: ideal, or a plan that communicates nothing
            return speed[0], speed[1], {}
        traffic = e._par_traffic
        if traffic is None:
            if self._plan_traffic is None:
                self._plan_traffic = AdaptiveTraffic(self.cluster, e.par)
            traffic = self._plan_traffic
        return speed[0], speed[1], traffic.phases(model, gpus)

    def plan(self) -> Plan:
        """A scratch copy of the free-GPU state for composing several actions."""
        return Plan(self)


class Plan:
    """Tentative allocation state: find placements, take them, and collect the actions."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view
        self.cluster = view.cluster
        self.free_mask = view.free_mask.copy()
        self.free_per_machine = view.free_per_machine.copy()
        self.free_per_rack = view.free_per_rack.copy()
        self.num_free = placement.free_count(self.free_per_rack)  # kept up to date by _mark
        self.actions: list[Action] = []

    def copy(self) -> Plan:
        """An independent copy (to try a move and throw it away)."""
        other = Plan.__new__(Plan)
        other.view, other.cluster = self.view, self.cluster
        other.free_mask = self.free_mask.copy()
        other.free_per_machine = self.free_per_machine.copy()
        other.free_per_rack = self.free_per_rack.copy()
        other.num_free = self.num_free
        other.actions = list(self.actions)
        return other

    def _mark(self, gpus: np.ndarray, free: bool) -> None:
        self.free_mask[gpus] = free
        d = 1 if free else -1
        self.num_free += d * int(gpus.size)
        placement.add_free_counts(self.cluster, self.free_per_machine, self.free_per_rack, gpus, d)

    def first_fit(self, n: int) -> np.ndarray | None:
        return placement.first_fit(self.free_mask, n)

    def find(
        self, n: int, tier: Tier | None = None, max_tier: Tier = Tier.NETWORK
    ) -> np.ndarray | None:
        """Placement at exactly ``tier``, or the most consolidated up to ``max_tier``."""
        args = (self.cluster, self.free_mask, self.free_per_machine, self.free_per_rack, n)
        if tier is not None:
            return placement.at_tier(*args, tier)
        return placement.consolidated(*args, max_tier)

    def fewest_machines(self, n: int, strict: bool = True) -> np.ndarray | None:
        """On as few machines as possible, racks ignored (Tiresias). ``strict``: only the
        minimum the job could ever use; otherwise the best packing of what is free."""
        return placement.fewest_machines(
            self.cluster, self.free_mask, self.free_per_machine, n, strict
        )

    def free_per_type(self) -> np.ndarray:
        """Free GPUs per GPU type (index into ``cluster.gpu_types``)."""
        return np.bincount(
            self.cluster.machine_type, weights=self.free_per_machine,
            minlength=len(self.cluster.gpu_types),
        ).astype(np.int64)  # fmt: skip

    def find_on_type(self, n: int, gpu_type: int) -> np.ndarray | None:
        """``n`` free GPUs of one type (index into ``cluster.gpu_types``), on as few machines
        as possible."""
        return placement.packed_on(
            self.cluster, self.free_mask, self.free_per_machine, n,
            self.cluster.type_machines[gpu_type],
        )  # fmt: skip

    def resize(self, job: int, gpus: np.ndarray) -> None:
        """Resize a running job onto ``gpus`` (may keep some of its own GPUs)."""
        gpus = np.asarray(gpus, dtype=np.int64)
        self._mark(self.view.gpus_of(job), True)
        self._mark(gpus, False)
        self.actions.append(Resize(job, tuple(gpus.tolist())))

    def start(self, job: int, gpus: np.ndarray, time_shift_s: float = 0.0) -> None:
        gpus = np.asarray(gpus, dtype=np.int64)
        self._mark(gpus, False)
        self.actions.append(Start(job, tuple(gpus.tolist()), time_shift_s))

    def preempt(self, job: int) -> None:
        if not self.view.shared_set(job):  # time-shared GPUs stay with the other sharers
            self._mark(self.view.gpus_of(job), True)
        self.actions.append(Preempt(job))

    def migrate(self, job: int, gpus: np.ndarray) -> None:
        """Move ``job`` to ``gpus``; a time-shared set's holder takes the set's other jobs
        with it, another job of the set leaves them its GPUs."""
        gpus = np.asarray(gpus, dtype=np.int64)
        shared = self.view.shared_set(job)
        if not shared or shared[0] == job:
            self._mark(self.view.gpus_of(job), True)
        self._mark(gpus, False)
        self.actions.append(Migrate(job, tuple(gpus.tolist())))

    def time_share(
        self, job: int, host: int, switch_frac: float = 0.0, host_switch_frac: float = 0.0
    ) -> None:
        """Start waiting ``job`` on running ``host``'s GPUs, sharing their time
        (``actions.TimeShare``); the free GPUs do not change."""
        self.actions.append(TimeShare(job, host, switch_frac, host_switch_frac))

    def wake_up(self, at_s: float) -> None:
        self.actions.append(WakeUp(at_s))


def _ro(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v
