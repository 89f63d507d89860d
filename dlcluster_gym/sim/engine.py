"""Discrete-event engine: jobs arrive, a policy places them, they progress until they finish.

Events sit on a heap of ``(time, priority, seq, kind, job, version)``; ``seq`` comes from a
counter so ties are FIFO and runs are deterministic. All events at one instant are applied
first, then the policy is called once with the triggers of that instant. Between events a
running job progresses at ``1 / iteration_time``, with iteration time = compute per iteration
+ exposed communication for its placement (``perf.network``). A job's completion event
carries the job's version; any change to its speed bumps the version, so stale completions
are skipped (lazy invalidation).

Link sharing (scenario ``contention``, on by default): jobs that share a NIC, a rack uplink or
the spine stretch each other's communication under max-min fair sharing unless their phases
interleave (``perf.contention``); iteration time = compute + exposed communication x the job's
contention factor (its worst link's stretch). With ``network: ideal`` no job pays any
communication and no link is modelled. Model profiles come from ``scenario.profile``
(``workload.profiles``). The engine keeps link -> jobs membership; a start, finish,
preemption, migration, resize or time shift recomputes the stretch of the links it touches
only, and the jobs on them whose factor changed are brought up to now and rescheduled. With
contention off none of this runs and the engine is unchanged.

Overheads (scenario ``overheads``): a preempted job pays checkpoint + restore when it next
starts, a migrated job pays checkpoint + restore on its new GPUs, a resized job pays a
restart. A policy may suspend a job in place instead (``Preempt.resume_in_place_s``): started
again on the same GPUs it pays that many seconds, anywhere else checkpoint + restore. During
an overhead the job holds its GPUs but makes no progress.

Parameter-server jobs on CPUs (Nearchus; ``Job.vcpu_budget`` set): only when the workload has
some does the engine create a ``sim.psjobs.PSRuntime``, and it dispatches to it for those jobs
only. Such a job holds a DT-config (vCPUs and server of each PS and worker node) instead of
GPUs, starts with ``StartPS``, changes with ``Reconfigure`` (a restart: ``restart_s``), and
progresses at the steady-state speed of ``perf.ps``; PS jobs on one server share its NIC
(``contention: false`` turns that off; ``network: ideal`` removes the NIC bound altogether,
``sim.psjobs``). Policies must declare
``supports_ps_jobs = True`` to run on such scenarios; others get ``NotApplicableError``.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
import warnings
from collections.abc import Callable, Generator, Sequence
from typing import Any

import numpy as np

from dlcluster_gym.cluster.topology import Cluster, Tier
from dlcluster_gym.config import ScenarioConfig
from dlcluster_gym.errors import (
    ConfigError,
    DLClusterError,
    InvalidActionError,
    NotApplicableError,
    PolicyError,
    TimeLimitError,
)
from dlcluster_gym.perf.contention import (
    LinkPhases,
    SharedLinks,
    conserve_capacity,
    link_stretch,
    sharing_can_bind,
)
from dlcluster_gym.perf.gpu_speed import type_scales
from dlcluster_gym.perf.links_kernel import usage as link_usage
from dlcluster_gym.perf.network import placement_overhead
from dlcluster_gym.perf.parallelism import ParallelismSpeeds, is_adaptive_model
from dlcluster_gym.perf.parallelism_links import AdaptiveTraffic
from dlcluster_gym.perf.phase_pool import PhasePool
from dlcluster_gym.sim.actions import (
    Migrate,
    Preempt,
    Reconfigure,
    Resize,
    SetTimeShift,
    Start,
    StartPS,
    TimeShare,
    WakeUp,
    same_gpus,
)
from dlcluster_gym.sim.boundary import check_workload, is_clairvoyant
from dlcluster_gym.sim.estimators import History
from dlcluster_gym.sim.limits import TimeUp
from dlcluster_gym.sim.placement import add_free_counts, free_count
from dlcluster_gym.sim.psjobs import PSRuntime
from dlcluster_gym.sim.results import Results, build_results
from dlcluster_gym.sim.state import DONE, DROPPED, PENDING, RUNNING, WAITING
from dlcluster_gym.sim.timeshare import TimeShares, check_fraction
from dlcluster_gym.sim.view import ClusterView, Trigger
from dlcluster_gym.workload.job import Job
from dlcluster_gym.workload.models import ModelProfile
from dlcluster_gym.workload.profiles import model_profile

# Event kinds, in the order they are applied at one instant.
FINISH, ARRIVAL, WAKEUP, ROUND = 0, 1, 2, 3
_KIND_NAMES = {FINISH: "finish", ARRIVAL: "arrival", WAKEUP: "wakeup", ROUND: "round"}

_NO_LINKS = np.zeros(0, dtype=np.int64)
_NO_LINKS.setflags(write=False)
_NO_GPUS = np.zeros(0, dtype=np.int64)  # what a parameter-server job holds of GPUs
_NO_GPUS.setflags(write=False)


class Engine:
    """One simulation run of ``jobs`` on ``cluster`` under ``policy``."""

    def __init__(
        self,
        scenario: ScenarioConfig,
        cluster: Cluster,
        jobs: Sequence[Job],
        policy: Any,
        rng: np.random.Generator,
        *,
        record_events: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        self.scenario = scenario
        self.cluster = cluster
        self.jobs = list(jobs)
        self.policy = policy
        self.policy_name = getattr(policy, "name", type(policy).__name__)
        # Policies with elastic GPU jobs (nearchus-gpu) may start a job on fewer GPUs than it
        # demands and grow it with Resize (compute per iteration scales as for a resize).
        self._elastic = bool(getattr(policy, "elastic_gpu_jobs", False))
        self.rng = rng
        self.overheads = scenario.overheads
        self._progress = progress
        n = len(self.jobs)
        for i, j in enumerate(self.jobs):
            if j.job_id != i:
                raise ConfigError(
                    f"job ids must be 0..{n - 1} in order; job at {i} has id {j.job_id}"
                )
        self.now = 0.0
        # Cluster state.
        self.free_mask = np.ones(cluster.num_gpus, dtype=bool)
        self.gpu_owner = np.full(cluster.num_gpus, -1, dtype=np.int64)
        self.free_per_machine = cluster.machine_num_gpus.copy()
        self.free_per_rack = cluster.rack_num_gpus.copy()
        # Job state (numpy arrays indexed by job id).
        self.status = np.zeros(n, dtype=np.int8)
        self.iterations = np.array([j.sized_iterations for j in self.jobs], dtype=np.float64)
        self.done_iters = np.zeros(n)
        self.iter_time = np.full(n, np.nan)
        self.comm_per_iter = np.zeros(n)
        self.compute_per_iter = np.array([j.compute_s for j in self.jobs], dtype=np.float64)
        self.last_update = np.zeros(n)
        self.resume_at = np.zeros(n)  # progress starts here (after an overhead)
        self.version = np.zeros(n, dtype=np.int64)
        self.first_start = np.full(n, np.nan)
        self.finish = np.full(n, np.nan)
        self.last_start = np.full(n, np.nan)
        self.wait_since = np.full(n, np.nan)  # set at arrival (no future arrival leaks)
        # What a scheduler learns of a job when it arrives (``ClusterView.demand`` etc.).
        self.seen_demand = np.zeros(n, dtype=np.int64)
        self.seen_compute = np.full(n, np.nan)
        self.seen_arrival = np.full(n, np.nan)
        self.arrived: list[int] = []  # job ids in arrival order
        self.finished_order: list[int] = []  # job ids in finish order
        self.history = History(self)
        self.run_s = np.zeros(n)  # time holding GPUs (overheads included)
        self.overhead_s = np.zeros(n)
        self.comm_s = np.zeros(n)
        self.compute_s = np.zeros(n)
        self.attained = np.zeros(n)  # GPU-seconds of service (Tiresias 2D-LAS)
        self.preemptions = np.zeros(n, dtype=np.int64)
        self.migrations = np.zeros(n, dtype=np.int64)
        self.resizes = np.zeros(n, dtype=np.int64)
        self.tiers_used = np.zeros(n, dtype=np.int8)  # bitmask over Tier values
        self.pending_overhead = np.zeros(n)  # charged at the next start (after preemption)
        self._in_place: dict[int, np.ndarray] = {}  # suspended in place -> the GPUs it left
        self.time_shift = np.zeros(n)
        self.job_gpus: dict[int, np.ndarray] = {}
        self.alloc_n = np.zeros(n)  # GPUs held by each job (0 when not running)
        self.waiting: dict[int, None] = {}
        self.running: dict[int, None] = {}
        # Time-shared GPU sets (``TimeShare`` actions); None until the first one.
        self.shares: TimeShares | None = None
        self._ideal = scenario.network == "ideal"
        # comm_fraction per (model, GPU ids): a pure function of the two, asked again and
        # again for the same placements (offers' candidates, the start that follows, the
        # consolidation checks of running jobs).
        self._comm_memo: dict[tuple[str, bytes], float] = {}
        source = scenario.profile
        names = {j.model for j in self.jobs if not j.is_ps}
        self._profiles = {name: model_profile(name, source) for name in names}
        # Events.
        self._heap: list[tuple[float, int, int, int, int, int]] = []
        self._seq = itertools.count()
        self.sim_events = 0
        self.pending_triggers: list[Trigger] = []
        self._wakeups: set[float] = set()
        self.event_log: list[dict[str, Any]] | None = [] if record_events else None
        # Time series (one point per decision instant).
        self._ts_t: list[float] = []
        self._ts_busy: list[int] = []
        self._ts_wait: list[int] = []
        self._ts_run: list[int] = []
        self._ts_left: list[int] = []
        self.n_done = 0
        self.dropped: list[int] = []
        # Link contention (perf.contention); None when the scenario turns it off.
        # Sharing is skipped where it provably cannot bind (sharing_can_bind): same results.
        share = scenario.contention and not self._ideal and sharing_can_bind(cluster)
        self.links: SharedLinks | None = SharedLinks(cluster) if share else None
        self.contention_s = np.zeros(n)  # extra exposed-comm seconds due to link sharing
        if self.links is not None:
            self._init_contention(n)
        # Parameter-server jobs on CPUs (perf.ps, sim.psjobs); None when there are none.
        self.ps: PSRuntime | None = PSRuntime(self) if any(j.is_ps for j in self.jobs) else None
        # Adaptive-parallelism jobs (Crius Table 2 models, perf.parallelism); None when none.
        self.par_jobs = np.array([is_adaptive_model(j.model) for j in self.jobs], dtype=bool)
        self.par = ParallelismSpeeds(cluster, ideal=self._ideal) if self.par_jobs.any() else None
        # Compute time per GPU type of the other GPU jobs (perf.gpu_speed; None: one type).
        self.type_scale: np.ndarray | None = self._type_scales()
        # Their plans' traffic on the shared links (perf.parallelism_links); None when unused.
        self._par_traffic = (
            AdaptiveTraffic(cluster, self.par)
            if self.par is not None and self.links is not None
            else None
        )
        self._admit()

    # ------------------------------------------------------------------ setup
    def _type_scales(self) -> np.ndarray | None:
        """[job, GPU type] factor on a job's compute per iteration (``perf.gpu_speed``): 1 on
        the reference type and for jobs that are not scaled (adaptive parallelism, CPUs)."""
        types = self.cluster.gpu_types
        if len(types) == 1:
            return None
        out = np.ones((len(self.jobs), len(types)))
        by_family: dict[str, np.ndarray] = {}
        for j in self.jobs:
            if not j.is_ps and not self.par_jobs[j.job_id]:
                family = self._profiles[j.model].family
                if family not in by_family:
                    by_family[family] = type_scales(family, types)
                out[j.job_id] = by_family[family]
        return out

    def _slowest(self, job: int, gpus: np.ndarray) -> float:
        """The compute factor of ``job`` on ``gpus``: its slowest GPU type there."""
        assert self.type_scale is not None
        return float(self.type_scale[job, self.cluster.gpu_type_idx[gpus]].max())

    def _admit(self) -> None:
        cap = self.cluster.num_gpus
        for j in self.jobs:
            if j.num_gpus > cap:
                if self.scenario.oversize_jobs == "reject":
                    raise ConfigError(
                        f"scenario {self.scenario.name}: job {j.name or j.job_id} demands "
                        f"{j.num_gpus} GPUs but cluster {self.cluster.name} has {cap}; set "
                        "oversize_jobs: drop to drop such jobs with a warning"
                    )
                self.status[j.job_id] = DROPPED
                self.dropped.append(j.job_id)
                continue
            self._push(j.arrival_s, ARRIVAL, j.job_id)
        if self.dropped:
            warnings.warn(
                f"{len(self.dropped)} job(s) demand more than the cluster's {cap} GPUs and were "
                "dropped",
                stacklevel=3,
            )
        period = self.scenario.round_period_s
        if period:
            self._push(0.0, ROUND, -1)

    def _push(self, t: float, kind: int, job: int, version: int = 0) -> None:
        heapq.heappush(self._heap, (float(t), kind, next(self._seq), kind, job, version))

    def _log(self, event: str, job: int = -1, **extra: Any) -> None:
        if self.event_log is not None:
            rec: dict[str, Any] = {"t": self.now, "event": event}
            if job >= 0:
                rec["job"] = job
            rec.update(extra)
            self.event_log.append(rec)

    # ------------------------------------------------------------------ speed model
    def profile(self, job: int) -> ModelProfile:
        """The performance profile of a GPU job's model (from the scenario's profile source)."""
        return self._profiles[self.jobs[job].model]

    def _comm_basis(self, job: int, gpus: np.ndarray, compute: float) -> float:
        """The compute seconds that ``comm_fraction`` multiplies: ``compute`` (the job's on
        ``gpus``) when it holds its demand or runs with adaptive parallelism; otherwise its
        compute at its demand, ``compute_s``. A data-parallel job on more or fewer GPUs than
        it demands keeps its global batch, so its gradient, and the all-reduce of it on
        ``gpus``, is the same size: its communication does not scale with the larger or
        smaller compute per GPU."""
        spec = self.jobs[job]
        if gpus.size == spec.num_gpus or (self.par is not None and self.par_jobs[job]):
            return compute
        return spec.compute_s

    def comm_fraction(self, job: int, gpus: np.ndarray) -> float:
        """Exposed communication per iteration of ``job`` on ``gpus`` as a fraction of its
        compute per iteration at its demand (``compute_s``; on its demand's GPU count this is
        its compute there)."""
        if self._ideal:
            return 0.0
        if self.par is not None and self.par_jobs[job]:
            compute, comm = self._par_speed(job, gpus)
            return comm / compute
        if gpus.dtype != np.int64:
            gpus = gpus.astype(np.int64)
        model = self.jobs[job].model
        key = (model, gpus.tobytes())
        got = self._comm_memo.get(key)
        if got is None:
            got = placement_overhead(self.cluster, self._profiles[model], gpus)
            if len(self._comm_memo) >= 65536:
                self._comm_memo.clear()
            self._comm_memo[key] = got
        return got

    def _par_speed(self, job: int, gpus: np.ndarray) -> tuple[float, float]:
        """(compute, communication) seconds per iteration of an adaptive-parallelism job: its
        best plan on the type and number of GPUs it holds (``perf.parallelism``)."""
        assert self.par is not None
        speed = self.par.speed(self.jobs[job].model, gpus)
        if speed is None:  # the actions were validated; this would be an engine bug
            raise RuntimeError(f"job {job}: no feasible plan on {gpus.size} GPUs")
        return speed

    def _check_par(self, action: Any, job: int, gpus: np.ndarray) -> None:
        """An adaptive-parallelism job needs a plan that fits in its GPUs' memory."""
        if (
            self.par is not None
            and self.par_jobs[job]
            and self.par.plan(self.jobs[job].model, gpus) is None
        ):
            types = sorted({self.cluster.gpu_types[k] for k in self.cluster.gpu_type_idx[gpus]})
            raise self._bad(
                action,
                f"job {job} ({self.jobs[job].model}) fits on no parallelism plan of "
                f"{gpus.size} {'/'.join(types)} GPUs (out of memory)",
            )

    def _set_speed(self, job: int) -> None:
        if self.ps is not None and job in self.ps.perf:
            self._set_speed_ps(job)
            return
        if self.links is not None:
            self._base_speed(job)
            self._respeed(job)
            return
        gpus = self.job_gpus[job]
        spec = self.jobs[job]
        if self.par is not None and self.par_jobs[job]:  # adaptive parallelism (Crius)
            compute, comm = self._par_speed(job, gpus)
        else:
            compute = spec.compute_s * spec.num_gpus / gpus.size  # data parallel: fixed batch
            comm = self.comm_fraction(job, gpus) * self._comm_basis(job, gpus, compute)
            if self.type_scale is not None:  # the GPU type's speed; communication unchanged
                compute *= self._slowest(job, gpus)
        self.compute_per_iter[job] = compute
        self.comm_per_iter[job] = comm
        self.iter_time[job] = compute + self.comm_per_iter[job]
        self.version[job] += 1
        start = max(self.now, self.resume_at[job])
        remaining = max(self.iterations[job] - self.done_iters[job], 0.0)
        if self.shares is not None and self.shares.progress_rate[job] != 1.0:
            t = start + remaining * self.iter_time[job] / self.shares.progress_rate[job]
            self._push(t, FINISH, job, int(self.version[job]))
            return
        self._push(start + remaining * self.iter_time[job], FINISH, job, int(self.version[job]))

    def _advance(self, job: int) -> None:
        """Bring a running job's counters up to ``now``."""
        t0 = self.last_update[job]
        dt = self.now - t0
        if dt <= 0:
            return
        if self.shares is not None and self.shares.time_share[job] != 1.0:
            self._advance_shared(job, t0, dt)
            return
        self.run_s[job] += dt
        self.attained[job] += dt * self.job_gpus[job].size
        busy_from = max(t0, self.resume_at[job])
        if self.now > busy_from:
            iters = (self.now - busy_from) / self.iter_time[job]
            iters = min(iters, self.iterations[job] - self.done_iters[job])
            self.done_iters[job] += iters
            self.comm_s[job] += iters * self.comm_per_iter[job]
            self.compute_s[job] += iters * self.compute_per_iter[job]
            if self.links is not None:
                self.contention_s[job] += iters * (self.comm_per_iter[job] - self.comm_base[job])
            self.overhead_s[job] += max(0.0, busy_from - t0)
        else:
            self.overhead_s[job] += dt
        self.last_update[job] = self.now

    def _advance_shared(self, job: int, t0: float, dt: float) -> None:
        """``_advance`` for a job of a time-shared GPU set: it holds the set ``time_share`` of
        the time and progresses at ``progress_rate``; the difference is switch overhead."""
        shares = self.shares
        assert shares is not None
        held, rate = float(shares.time_share[job]), float(shares.progress_rate[job])
        self.run_s[job] += dt * held
        self.attained[job] += dt * held * self.job_gpus[job].size
        busy_from = max(t0, self.resume_at[job])
        if self.now > busy_from:
            busy = self.now - busy_from
            left = self.iterations[job] - self.done_iters[job]
            iters = min(busy * rate / self.iter_time[job], left)
            self.done_iters[job] += iters
            self.comm_s[job] += iters * self.comm_per_iter[job]
            self.compute_s[job] += iters * self.compute_per_iter[job]
            self.overhead_s[job] += (busy_from - t0) * held + busy * (held - rate)
        else:
            self.overhead_s[job] += dt * held
        self.last_update[job] = self.now

    def done_iters_now(self, job: int) -> float:
        """Iterations done as of ``now`` (without mutating state): ``live`` for one job, on
        scalars (the same float operations)."""
        done = float(self.done_iters[job])
        if self.status[job] != RUNNING:
            return done
        busy = max(self.now - max(float(self.last_update[job]), float(self.resume_at[job])), 0.0)
        if self.shares is not None and self.shares.progress_rate[job] != 1.0:
            busy *= float(self.shares.progress_rate[job])
        return min(done + busy / float(self.iter_time[job]), float(self.iterations[job]))

    def live(self, jobs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(iterations done, seconds holding GPUs, GPU-seconds attained) as of ``now``."""
        jobs = np.asarray(jobs, dtype=np.int64)
        done = self.done_iters[jobs].copy()
        run = self.run_s[jobs].copy()
        att = self.attained[jobs].copy()
        on = self.status[jobs] == RUNNING
        if on.any():
            r = jobs[on]
            self._done_now(done, on, r)
            dt = self.now - self.last_update[r]
            if self.shares is not None:  # time-shared sets: their share of the time
                dt = dt * self.shares.time_share[r]
            run[on] += dt
            att[on] += dt * self.alloc_n[r]
        return done, run, att

    def live_done(self, jobs: np.ndarray) -> np.ndarray:
        """``live``'s iterations done alone (the same floats)."""
        jobs = np.asarray(jobs, dtype=np.int64)
        done = self.done_iters[jobs].copy()
        on = self.status[jobs] == RUNNING
        if on.any():
            self._done_now(done, on, jobs[on])
        return done

    def _done_now(self, done: np.ndarray, on: np.ndarray, r: np.ndarray) -> None:
        """Bring ``done[on]``, the iterations done of the running jobs ``r``, up to now."""
        busy = np.maximum(self.now - np.maximum(self.last_update[r], self.resume_at[r]), 0.0)
        if self.shares is not None:  # time-shared sets: their rates (1 for the others)
            busy = busy * self.shares.progress_rate[r]
        done[on] = np.minimum(done[on] + busy / self.iter_time[r], self.iterations[r])

    # ------------------------------------------------------------------ link contention
    def _init_contention(self, n: int) -> None:
        links = self.links
        assert links is not None
        self.comm_base = np.zeros(n)  # exposed comm per iteration without contention
        self.contention = np.ones(n)  # factor on exposed comm (worst link's stretch)
        self._finish_at = np.full(n, math.inf)  # time of each job's valid FINISH event
        self._up_s = np.zeros(n)  # communication (Up) seconds per iteration, uncontended
        self._job_links: dict[int, np.ndarray] = {}  # running job -> link ids it crosses
        self._job_phases: dict[int, dict[int, LinkPhases]] = {}  # its phases on each link
        self._job_peak: dict[int, np.ndarray] = {}  # its capped peak demand on each link
        self._job_carry: dict[int, np.ndarray] = {}  # carried bytes per Up second on each
        self._job_carry_on: dict[int, dict[int, float]] = {}  # the same, by link id
        self._job_load: dict[int, np.ndarray] = {}  # its current share of _link_load
        self._pool = PhasePool()  # each (phases, capacity) on a link: a row for the kernel
        self._overlap = np.array(
            [
                0.0  # a plan's communication is exposed as it is (perf.parallelism_links)
                if j.is_ps or is_adaptive_model(j.model)
                else self._profiles[j.model].comm.overlap
                for j in self.jobs
            ]
        )
        n_links = links.num_links
        self._link_jobs: list[dict[int, int]] = [{} for _ in range(n_links)]  # job -> pool row
        self._link_stretch: dict[int, dict[int, float]] = {}  # only over-subscribed links
        self._job_stretch: dict[int, dict[int, float]] = {}  # the same, per job: link -> factor
        self._link_count = np.zeros(n_links, dtype=np.int64)
        self._link_peak = np.zeros(n_links)  # summed capped peak demand (bytes/s)
        self._link_load = np.zeros(n_links)  # summed time-averaged carried demand (bytes/s)
        self._ts_util_mean: list[float] = []
        self._ts_util_max: list[float] = []
        self._ts_active: list[int] = []
        self._ts_contended: list[int] = []
        self._links_changed = True  # link loads changed since the last time-series point
        self._links_row: tuple[float, float, int, int] = (0.0, 0.0, 0, 0)

    def _base_speed(self, job: int) -> None:
        """Compute and uncontended exposed comm per iteration of a running job."""
        gpus = self.job_gpus[job]
        spec = self.jobs[job]
        compute = spec.compute_s * spec.num_gpus / gpus.size
        if self.par is not None and self.par_jobs[job]:  # adaptive parallelism (Crius)
            compute = self._par_speed(job, gpus)[0]
        comm = self.comm_fraction(job, gpus) * self._comm_basis(job, gpus, compute)
        if self.type_scale is not None:  # the GPU type's speed; communication unchanged
            compute *= self._slowest(job, gpus)
        self.compute_per_iter[job] = compute
        self.comm_base[job] = comm
        up = comm / (1.0 - self._overlap[job])
        self._up_s[job] = min(up, compute + comm)

    def _respeed(self, job: int) -> None:
        """Iteration time from the base speed and the contention factor; new FINISH event."""
        comm = self.comm_base[job] * self.contention[job]
        self.comm_per_iter[job] = comm
        it = self.iter_time[job] = self.compute_per_iter[job] + comm
        version = self.version[job] = self.version[job] + 1
        start = max(self.now, self.resume_at[job])
        remaining = max(self.iterations[job] - self.done_iters[job], 0.0)
        t = start + remaining * it
        self._finish_at[job] = t
        # ``self._push(t, FINISH, job, version)`` inlined: this is the engine's hottest call
        heapq.heappush(self._heap, (float(t), FINISH, next(self._seq), FINISH, job, int(version)))
        carry = self._job_carry.get(job)
        if carry is not None:
            ids = self._job_links[job]
            load = carry * (self._up_s[job] / it)
            old = self._job_load.get(job)
            if old is not None:
                self._link_load[ids] -= old
            self._link_load[ids] += load
            self._job_load[job] = load
            self._links_changed = True

    def _traffic_phases(self, job: int, gpus: np.ndarray) -> dict[int, LinkPhases]:
        """Per shared link, the phases of ``job`` on ``gpus`` (``perf.contention``; for an
        adaptive-parallelism job its plan's, ``perf.parallelism_links``)."""
        links = self.links
        assert links is not None
        if gpus.size <= 1:
            return {}
        if self._par_traffic is not None and self.par_jobs[job]:
            return self._par_traffic.phases(self.jobs[job].model, gpus)
        profile = self._profiles[self.jobs[job].model]
        return links.phases(profile, gpus)

    def _net_join(self, job: int, tier: Tier) -> np.ndarray:
        """Put a just-placed job on the links its placement crosses; returns them."""
        links = self.links
        assert links is not None
        phases = {} if tier == Tier.MACHINE else self._traffic_phases(job, self.job_gpus[job])
        if not phases:
            self._job_links[job] = _NO_LINKS
            return _NO_LINKS
        if self._pool.full:
            self._repool()
        ids, rows = self._pool_rows(phases)
        carry = self._pool.carry[rows]
        peak = self._pool.capped[rows]
        self._job_links[job] = ids
        self._job_phases[job] = phases
        self._job_carry[job] = carry
        self._job_carry_on[job] = dict(zip(phases, carry.tolist(), strict=True))
        self._job_peak[job] = peak
        self._link_peak[ids] += peak
        self._link_count[ids] += 1
        for link, row in zip(ids.tolist(), rows.tolist(), strict=True):
            self._link_jobs[link][job] = row
        return ids

    def _pool_rows(self, phases: dict[int, LinkPhases]) -> tuple[np.ndarray, np.ndarray]:
        """(link ids, pool rows) of a placement's phases (``perf.phase_pool``: carried rate
        and capped peak per row; ``SharedLinks.phases`` and ``AdaptiveTraffic.phases`` share
        their ``LinkPhases`` between placements of the same shape, so rows recur)."""
        links = self.links
        assert links is not None
        ids = np.fromiter(phases, dtype=np.int64, count=len(phases))
        rows = self._pool.rows(list(phases.values()), links.capacity_Bps[ids].tolist())
        return ids, np.array(rows, dtype=np.int64)

    def _repool(self) -> None:
        """A new phase pool holding only the running jobs' rows (the old one is full)."""
        self._pool = PhasePool(self._pool.max_rows)
        for job, phases in self._job_phases.items():
            ids, rows = self._pool_rows(phases)
            for link, row in zip(ids.tolist(), rows.tolist(), strict=True):
                self._link_jobs[link][job] = row
        if self._pool.full:  # the running jobs alone fill it: room for as many again
            self._pool.max_rows *= 2

    def _net_leave(self, job: int) -> np.ndarray:
        """Take a job off its links (it finished, was preempted or moves); returns them."""
        ids = self._job_links.pop(job, _NO_LINKS)  # PS jobs hold no GPU links
        if ids.size:
            self._link_peak[ids] -= self._job_peak.pop(job)
            self._link_load[ids] -= self._job_load.pop(job, 0.0)
            del self._job_carry[job]
            del self._job_carry_on[job]
            del self._job_phases[job]
            self._link_count[ids] -= 1
            empty = ids[self._link_count[ids] == 0]
            self._link_peak[empty] = 0.0
            self._link_load[empty] = 0.0
            for link in ids.tolist():
                del self._link_jobs[link][job]
            self._links_changed = True
        self._job_stretch.pop(job, None)
        self.contention[job] = 1.0
        return ids

    def _net_flush(self, dirty: np.ndarray, placed: int = -1) -> None:
        """Recompute the stretch on ``dirty`` links; reschedule jobs whose factor changed.

        ``placed`` is a job the caller reschedules itself (it was just placed or moved).
        """
        if dirty.size == 0:
            return
        links = self.links
        assert links is not None
        self._links_changed = True
        cap = links.capacity_Bps
        fits = (self._link_peak[dirty] <= cap[dirty] * (1.0 + 1e-9)).tolist()
        steps: list[tuple[int, list[int] | None, list[int] | None]] = []
        for link, fit in zip(dirty.tolist(), fits, strict=True):
            members = self._link_jobs[link]
            had = self._link_stretch.pop(link, None)
            released = None
            if had:  # was over-subscribed: its remaining jobs may speed up
                for j in had:
                    per_job = self._job_stretch.get(j)
                    if per_job is not None:
                        per_job.pop(link, None)
                released = [j for j in had if j in members]
            if len(members) < 2 or fit:
                steps.append((link, released, None))
            else:
                steps.append((link, released, list(members)))
        factors = self._link_factors([(lk, jobs) for lk, _, jobs in steps if jobs is not None])
        affected: dict[int, None] = {}
        for link, released, jobs in steps:
            if released:
                affected.update(dict.fromkeys(released))
            stretch = factors.get(link) if jobs is not None else None
            if stretch is not None:
                per_link = self._link_stretch[link] = dict(zip(jobs, stretch, strict=True))
                for j, f in per_link.items():
                    self._job_stretch.setdefault(j, {})[link] = f
                affected.update(dict.fromkeys(jobs))
        if placed >= 0:
            affected[placed] = None
        for job in affected:  # its worst link's stretch (factors are >= 1)
            per_job = self._job_stretch.get(job)
            factor = max(1.0, *per_job.values()) if per_job else 1.0
            if job == placed:
                self.contention[job] = factor
            elif factor != self.contention[job] and self._finish_at[job] > self.now:
                self._advance(job)
                self.contention[job] = factor
                self._respeed(job)

    def _link_factors(self, todo: list[tuple[int, list[int]]]) -> dict[int, list[float]]:
        """Per over-subscribed link of ``todo`` (link, its jobs) where some job is stretched,
        the jobs' factors (``perf.contention.batch_stretch`` on the jobs' pool rows,
        ``perf.phase_pool``, one compiled call; or ``link_stretch`` and
        ``conserve_capacity`` link by link)."""
        out: dict[int, list[float]] = {}
        links = self.links
        if not todo or links is None:
            return out
        jobs_at: list[int] = []
        rows_at: list[int] = []
        ends = [0]
        for lk, _ in todo:  # the jobs are the link's members, in their order
            members = self._link_jobs[lk]
            jobs_at.extend(members)
            rows_at.extend(members.values())
            ends.append(len(jobs_at))
        bounds = np.array(ends, dtype=np.int64)
        got = self._pool.factors(
            bounds,
            np.array(jobs_at, dtype=np.int64),
            np.array(rows_at, dtype=np.int64),
            links.capacity_Bps[[lk for lk, _ in todo]],
            self.compute_per_iter,
            self.comm_base,
            self._up_s,
            self.time_shift,
        )
        if got is None:
            status = [0] * len(todo)
        else:
            values, status = got[0].tolist(), got[1].tolist()
        for k, (link, jobs) in enumerate(todo):
            if status[k] == 2:
                out[link] = values[bounds[k] : bounds[k + 1]]
            elif status[k] == 0:
                stretch = self._one_link_factors(link, jobs)
                if (stretch > 1.0).any():
                    out[link] = stretch.tolist()
        return out

    def _one_link_factors(self, link: int, jobs: list[int]) -> np.ndarray:
        """``link_stretch`` of one link, then ``conserve_capacity`` if it stretches a job."""
        assert self.links is not None
        cap = self.links.capacity_Bps
        arr = np.asarray(jobs, dtype=np.int64)
        stretch = link_stretch(
            self.compute_per_iter[arr] + self.comm_base[arr],
            self._up_s[arr],
            self.time_shift[arr],
            [self._job_phases[j][link] for j in jobs],
            float(cap[link]),
        )
        if (stretch > 1.0).any():  # the stretched jobs must fit the link on average
            stretch = conserve_capacity(
                stretch,
                self.compute_per_iter[arr],
                self.comm_base[arr],
                self._up_s[arr],
                np.array([self._job_carry_on[j][link] for j in jobs]),
                float(cap[link]),
            )
        return stretch

    def link_load_ratio(self) -> np.ndarray:
        """Per shared link, time-averaged carried demand / capacity now, not clipped (0 when
        idle; the sharing model keeps it <= 1, and tests check that on this value).

        A job carries its bytes per iteration on the link (its phase rates x lengths, capped
        at the capacity) once per current, stretched, iteration.
        """
        links = self.links
        if links is None:
            raise RuntimeError("link utilization needs scenario.contention on")
        return np.maximum(self._link_load, 0.0) / links.capacity_Bps

    def contended_links(self) -> np.ndarray:
        """Sorted ids of the shared links over-subscribed now (they stretch their jobs)."""
        if self.links is None:
            raise RuntimeError("contended links need scenario.contention on")
        return np.array(sorted(self._link_stretch), dtype=np.int64)

    def link_utilization(self) -> np.ndarray:
        """:meth:`link_load_ratio` clipped to [0, 1] (what the time series record)."""
        return np.minimum(self.link_load_ratio(), 1.0)

    def predicted_link_load(self, job: int, gpus: np.ndarray) -> float:
        """Highest (summed peak demand + this job's peak) / capacity over the shared links a
        placement of ``job`` on ``gpus`` would cross; 0 with contention off or no links."""
        links = self.links
        if links is None or gpus.size <= 1:
            return 0.0
        phases = self._traffic_phases(job, gpus)
        if not phases:
            return 0.0
        ids = np.fromiter(phases, dtype=np.int64, count=len(phases))
        caps = links.capacity_Bps[ids]
        peak = np.minimum([ph.peak for ph in phases.values()], caps)
        return float(((self._link_peak[ids] + peak) / caps).max())

    # ------------------------------------------------------------------ allocation
    def _allocate(self, job: int, gpus: np.ndarray) -> Tier:
        self.free_mask[gpus] = False
        self.gpu_owner[gpus] = job
        self._count_free(gpus, -1)
        self.job_gpus[job] = gpus
        self.alloc_n[job] = gpus.size
        tier = self.cluster.placement_tier(gpus)
        self.tiers_used[job] |= 1 << int(tier)
        return tier

    def _release(self, job: int) -> np.ndarray:
        if self.ps is not None:
            self.ps.release(job)
        gpus = self.job_gpus.pop(job)
        self.alloc_n[job] = 0
        self.free_mask[gpus] = True
        self.gpu_owner[gpus] = -1
        self._count_free(gpus, 1)
        return gpus

    def _count_free(self, gpus: np.ndarray, d: int) -> None:
        """Add ``d`` to the free counts of the machines and racks of ``gpus``."""
        add_free_counts(self.cluster, self.free_per_machine, self.free_per_rack, gpus, d)

    # ------------------------------------------------------------------ actions
    def _bad(self, action: Any, msg: str) -> InvalidActionError:
        return InvalidActionError(
            f"policy {self.policy_name!r} at t={self.now:.3f}s: invalid {action!r}: {msg}"
        )

    def _check_gpus(self, action: Any, job: int, gpus: Sequence[int], own: int = -1) -> np.ndarray:
        arr = np.asarray(gpus, dtype=np.int64).reshape(-1)
        if arr.size == 0:
            raise self._bad(action, f"job {job}: no GPUs given")
        ids = arr.tolist()  # Python min/max/set: placements are small
        if min(ids) < 0 or max(ids) >= self.cluster.num_gpus:
            bad = arr[(arr < 0) | (arr >= self.cluster.num_gpus)]
            raise self._bad(
                action,
                f"job {job}: GPU {int(bad[0])} does not exist (cluster "
                f"{self.cluster.name} has GPUs 0..{self.cluster.num_gpus - 1})",
            )
        if len(set(ids)) != arr.size:
            uniq, counts = np.unique(arr, return_counts=True)
            raise self._bad(action, f"job {job}: GPU {int(uniq[counts > 1][0])} listed twice")
        owners = self.gpu_owner[arr]
        if max(owners.tolist()) < 0:
            return arr  # every GPU is free
        taken = arr[(owners >= 0) & (owners != own)]
        if taken.size:
            g = int(taken[0])
            raise self._bad(
                action, f"job {job}: GPU {g} is already held by job {int(self.gpu_owner[g])}"
            )
        return arr

    def _check_job(self, action: Any, job: int, status: int) -> None:
        if not (isinstance(job, int | np.integer) and 0 <= job < len(self.jobs)):
            raise self._bad(action, f"job {job!r} does not exist")
        if self.status[job] != status:
            names = {
                PENDING: "not yet arrived",
                WAITING: "waiting",
                RUNNING: "running",
                DONE: "finished",
                DROPPED: "dropped",
            }
            raise self._bad(
                action, f"job {job} is {names[int(self.status[job])]}, expected {names[status]}"
            )

    def apply(self, actions: Sequence[Any]) -> None:
        """Validate and apply actions in order (each sees the effect of the previous ones)."""
        for a in actions:
            if isinstance(a, Start):
                self._check_job(a, a.job, WAITING)
                gpus = self._check_gpus(a, a.job, a.gpus)
                # Adaptive-parallelism jobs are elastic: any GPU count with a feasible plan.
                if (
                    gpus.size != self.jobs[a.job].num_gpus
                    and not self.par_jobs[a.job]
                    and not (self._elastic and gpus.size < self.jobs[a.job].num_gpus)
                ):
                    raise self._bad(
                        a, f"job {a.job} demands {self.jobs[a.job].num_gpus} GPUs, got {gpus.size}"
                    )
                self._check_par(a, a.job, gpus)
                if not math.isfinite(a.time_shift_s):
                    raise self._bad(a, "time shift must be finite")
                self._start(a.job, gpus, a.time_shift_s)
            elif isinstance(a, Preempt):
                self._check_job(a, a.job, RUNNING)
                cost = a.resume_in_place_s
                if cost is not None and not (
                    isinstance(cost, int | float | np.integer | np.floating)
                    and not isinstance(cost, bool)
                    and math.isfinite(cost)
                    and cost >= 0
                ):
                    raise self._bad(
                        a, f"resume_in_place_s must be None or a finite number >= 0, got {cost!r}"
                    )
                self._preempt(a.job, cost)
            elif isinstance(a, Migrate | Resize):
                self._check_job(a, a.job, RUNNING)
                if isinstance(a, Resize) and self._shared(a.job):
                    raise self._bad(a, f"job {a.job} shares its GPUs' time: it cannot be resized")
                gpus = self._check_gpus(a, a.job, a.gpus, own=a.job)
                if isinstance(a, Migrate) and gpus.size != self.job_gpus[a.job].size:
                    raise self._bad(
                        a,
                        f"job {a.job}: migration must keep "
                        f"{self.job_gpus[a.job].size} GPUs, got {gpus.size}",
                    )
                self._check_par(a, a.job, gpus)
                self._move(a.job, gpus, isinstance(a, Resize))
            elif isinstance(a, SetTimeShift):
                self._check_job(a, a.job, RUNNING)
                if not math.isfinite(a.shift_s):
                    raise self._bad(a, "time shift must be finite")
                old = self.time_shift[a.job]
                self.time_shift[a.job] = float(a.shift_s)
                if self.links is not None and self.time_shift[a.job] != old:
                    self._net_flush(self._job_links[a.job])
            elif isinstance(a, WakeUp):
                if not math.isfinite(a.at_s):
                    raise self._bad(a, "wake-up time must be finite")
                t = max(float(a.at_s), self.now)
                if t not in self._wakeups:
                    self._wakeups.add(t)
                    self._push(t, WAKEUP, -1)
            elif isinstance(a, StartPS | Reconfigure):
                self._apply_ps(a)
            elif isinstance(a, TimeShare):
                self._time_share(a)
            else:
                raise self._bad(
                    a,
                    "not an action (Start, Preempt, Migrate, Resize, SetTimeShift, WakeUp, "
                    "StartPS, Reconfigure, TimeShare)",
                )

    def _mark_started(self, job: int, gpus: np.ndarray | None = None) -> None:
        """A waiting job becomes running now (after any pending overhead; a job suspended in
        place pays checkpoint + restore instead unless ``gpus`` are the ones it left)."""
        if self._in_place:
            left = self._in_place.pop(job, None)
            if left is not None and (gpus is None or not same_gpus(left, gpus)):
                self.pending_overhead[job] = self.overheads.checkpoint_s + self.overheads.restore_s
        del self.waiting[job]
        self.running[job] = None
        self.status[job] = RUNNING
        if math.isnan(self.first_start[job]):
            self.first_start[job] = self.now
        self.last_start[job] = self.now
        self.last_update[job] = self.now
        self.resume_at[job] = self.now + self.pending_overhead[job]
        self.pending_overhead[job] = 0.0

    def _start(self, job: int, gpus: np.ndarray, shift: float) -> None:
        self._mark_started(job, gpus)
        self.time_shift[job] = shift
        tier = self._allocate(job, gpus)
        if self.links is None:
            self._set_speed(job)
        else:
            self._base_speed(job)
            self._net_flush(self._net_join(job, tier), placed=job)
            self._respeed(job)
        if self.event_log is not None:
            self._log("start", job, gpus=gpus.tolist(), tier=tier.label)

    def _preempt(self, job: int, in_place_s: float | None = None) -> None:
        self._advance(job)
        gpus = self.job_gpus[job]
        if not self._leave_shared(job):
            self._release(job)
        del self.running[job]
        self.waiting[job] = None
        self.status[job] = WAITING
        self.version[job] += 1
        self.preemptions[job] += 1
        self.wait_since[job] = self.now
        if in_place_s is None:
            self.pending_overhead[job] = self.overheads.checkpoint_s + self.overheads.restore_s
            if self._in_place:
                self._in_place.pop(job, None)
        else:
            self.pending_overhead[job] = float(in_place_s)
            self._in_place[job] = gpus
        if self.links is not None:
            self._net_flush(self._net_leave(job))
        if self.ps is not None:
            self._share_ps_nics()
        if in_place_s is None:
            self._log("preempt", job)
        else:
            self._log("preempt", job, resume_in_place_s=float(in_place_s))

    def _move(self, job: int, gpus: np.ndarray, resize: bool) -> None:
        if self._shared(job) and job in self.shares.sets:  # type: ignore[union-attr]
            self._move_shared_set(job, gpus)
            return
        self._advance(job)
        if not self._leave_shared(job):  # a sharer leaves its set's GPUs to the others
            self._release(job)
        tier = self._allocate(job, gpus)
        if resize:
            self.resizes[job] += 1
            cost = self.overheads.restart_s
        else:
            self.migrations[job] += 1
            cost = self.overheads.checkpoint_s + self.overheads.restore_s
        self.resume_at[job] = max(self.resume_at[job], self.now) + cost
        if self.links is None:
            self._set_speed(job)
        else:
            old = self._net_leave(job)
            self._base_speed(job)
            self._net_flush(np.union1d(old, self._net_join(job, tier)), placed=job)
            self._respeed(job)
        self._log("resize" if resize else "migrate", job, gpus=gpus.tolist())

    # ------------------------------------------------------------------ time-shared GPU sets
    def _shared(self, job: int) -> bool:
        """Whether ``job`` runs on a time-shared GPU set (``TimeShare``)."""
        return self.shares is not None and self.shares.holder[job] >= 0

    def _time_share(self, a: TimeShare) -> None:
        """Start waiting job ``a.job`` on the GPUs of running job ``a.host``, sharing their
        time (``actions.TimeShare``)."""
        self._check_job(a, a.job, WAITING)
        self._check_job(a, a.host, RUNNING)
        if self.links is not None or self.ps is not None or self.par is not None:
            raise self._bad(
                a,
                "time-sharing as rates needs a scenario whose jobs share no network links "
                "(contention off, or links that cannot bind), with no parameter-server or "
                "adaptive-parallelism jobs",
            )
        shares = self.shares
        if shares is not None and shares.holder[a.host] not in (-1, a.host):
            raise self._bad(
                a, f"job {a.host} runs on GPUs held by job {int(shares.holder[a.host])}"
            )
        gpus = self.job_gpus[a.host]
        if self.jobs[a.job].num_gpus != gpus.size:
            raise self._bad(
                a,
                f"job {a.job} demands {self.jobs[a.job].num_gpus} GPUs, job {a.host} holds "
                f"{gpus.size}",
            )
        try:
            f_job = check_fraction("switch_frac", a.switch_frac)
            f_host = check_fraction("host_switch_frac", a.host_switch_frac)
        except ValueError as err:
            raise self._bad(a, str(err)) from None
        if shares is None:
            shares = self.shares = TimeShares(len(self.jobs))
        for m in shares.members(a.host):
            self._advance(m)  # at the old rates, up to now
        self._mark_started(a.job, gpus)
        self.job_gpus[a.job] = gpus
        self.alloc_n[a.job] = gpus.size
        self.tiers_used[a.job] |= 1 << int(self.cluster.placement_tier(gpus))
        shares.join(a.host, a.job, f_job, f_host)
        self._overhead_in_turns(a.job)
        for m in shares.members(a.host):
            self._set_speed(m)  # new rates: new finish times
        self._log("timeshare", a.job, host=a.host, gpus=gpus.tolist())

    def _overhead_in_turns(self, job: int) -> None:
        """A time-shared job pays an overhead pending from now in its own turns: it lasts
        ``1 / time_share`` times as long (the time share at this moment)."""
        shares = self.shares
        assert shares is not None
        pending = self.resume_at[job] - self.now
        if pending > 0 and shares.time_share[job] != 1.0:
            self.resume_at[job] = self.now + pending / shares.time_share[job]

    def _leave_shared(self, job: int) -> bool:
        """``job`` (its counters brought up to now) leaves its time-shared GPU set, if in
        one. True when other jobs keep running on the GPUs (then they are not released and
        ``job`` no longer holds them); the others run at their new rates from now."""
        shares = self.shares
        if shares is None or shares.holder[job] < 0:
            return False
        old = int(shares.holder[job])
        for m in shares.members(job):
            if m != job:
                self._advance(m)
        new = shares.leave(job)
        gpus = self.job_gpus.pop(job)
        self.alloc_n[job] = 0
        if old == job:  # the next job in join order holds the GPUs
            self.gpu_owner[gpus] = new
        for m in shares.members(new):
            self._set_speed(m)
        return True

    def _move_shared_set(self, holder: int, gpus: np.ndarray) -> None:
        """``Migrate`` of a time-shared set's holder: every job of the set moves with it,
        each paying checkpoint + restore."""
        shares = self.shares
        assert shares is not None
        members = shares.members(holder)
        for m in members:
            self._advance(m)
        self._release(holder)
        tier = self._allocate(holder, gpus)
        cost = self.overheads.checkpoint_s + self.overheads.restore_s
        new = self.job_gpus[holder]
        for m in members:
            if m != holder:
                self.job_gpus[m] = new
                self.tiers_used[m] |= 1 << int(tier)
            self.migrations[m] += 1
            self.resume_at[m] = max(self.resume_at[m], self.now) + cost
            self._overhead_in_turns(m)
            self._set_speed(m)
            self._log("migrate", m, gpus=new.tolist())

    # ------------------------------------------------------------------ parameter-server jobs
    def _apply_ps(self, a: StartPS | Reconfigure) -> None:
        """StartPS / Reconfigure (sim.psjobs): validate the DT-config and apply it."""
        if self.ps is None:
            raise self._bad(a, "the scenario has no parameter-server jobs")
        start = isinstance(a, StartPS)
        self._check_job(a, a.job, WAITING if start else RUNNING)
        cfg = self.ps.check(self._bad, a, a.job, a.config)
        job = a.job
        if start:
            self._mark_started(job)
        else:
            self._advance(job)
            self.ps.release(job)
            self.resizes[job] += 1
            self.resume_at[job] = max(self.resume_at[job], self.now) + self.overheads.restart_s
        self.job_gpus[job] = _NO_GPUS
        self.tiers_used[job] |= 1 << int(Tier.MACHINE if len(set(cfg.servers().tolist())) == 1
                                         else Tier.RACK)  # fmt: skip
        self.ps.allocate(job, cfg, float(self.resume_at[job]))
        self._share_ps_nics(job)
        self._set_speed_ps(job)
        self._log("start" if start else "reconfigure", job, config=cfg.label())

    def _share_ps_nics(self, placed: int = -1) -> None:
        """PS jobs on one server share its NIC (``perf.ps.share_nics``): re-speed the running
        jobs whose share changed (``placed`` is re-speeded by the caller)."""
        assert self.ps is not None
        for other in self.ps.share_nics():
            if other != placed and self.status[other] == RUNNING:
                self._advance(other)
                self._set_speed_ps(other)

    def _set_speed_ps(self, job: int) -> None:
        """A PS job progresses at its DT-config's steady-state speed (``perf.ps``)."""
        assert self.ps is not None
        step = 1.0 / self.ps.perf[job].speed
        self.compute_per_iter[job] = step
        self.comm_per_iter[job] = 0.0
        self.iter_time[job] = step
        self.version[job] += 1
        start = max(self.now, self.resume_at[job])
        remaining = max(self.iterations[job] - self.done_iters[job], 0.0)
        self._push(start + remaining * step, FINISH, job, int(self.version[job]))

    # ------------------------------------------------------------------ main loop
    def _finish(self, job: int) -> None:
        self._advance(job)
        self.done_iters[job] = self.iterations[job]
        if not self._leave_shared(job):
            self._release(job)
        del self.running[job]
        self.status[job] = DONE
        self.finish[job] = self.now
        self.finished_order.append(job)
        if self.links is not None:
            self._net_flush(self._net_leave(job))
        if self.ps is not None:
            self._share_ps_nics()
        self._log("finish", job)

    def _record(self) -> None:
        busy = self.cluster.num_gpus - free_count(self.free_per_rack)
        left = len(self.jobs) - len(self.dropped) - self.n_done
        if self._ts_t and self._ts_t[-1] == self.now:
            self._ts_busy[-1], self._ts_wait[-1], self._ts_run[-1], self._ts_left[-1] = (
                busy,
                len(self.waiting),
                len(self.running),
                left,
            )
            if self.links is not None:
                self._record_links(replace=True)
            if self.ps is not None:
                self.ps.record(replace=True)
            return
        self._ts_t.append(self.now)
        self._ts_busy.append(busy)
        self._ts_wait.append(len(self.waiting))
        self._ts_run.append(len(self.running))
        self._ts_left.append(left)
        if self.links is not None:
            self._record_links(replace=False)
        if self.ps is not None:
            self.ps.record(replace=False)

    def _record_links(self, replace: bool) -> None:
        """Mean / max utilization over links carrying jobs, and how many are contended."""
        if self._links_changed or not self._ts_util_mean:
            assert self.links is not None
            if link_usage is not None:  # compiled, the same floats
                mean, peak, n_active = link_usage(
                    self._link_count, self._link_load, self.links.capacity_Bps
                )
            else:
                mean, peak, n_active = self._link_usage()
            self._links_row = (mean, peak, n_active, len(self._link_stretch))
            self._links_changed = False
        mean, peak, active_n, contended = self._links_row
        if replace:
            self._ts_util_mean[-1], self._ts_util_max[-1] = mean, peak
            self._ts_active[-1], self._ts_contended[-1] = active_n, contended
        else:
            self._ts_util_mean.append(mean)
            self._ts_util_max.append(peak)
            self._ts_active.append(active_n)
            self._ts_contended.append(contended)

    def _link_usage(self) -> tuple[float, float, int]:
        """(mean, max, number) of the utilization of the links carrying jobs."""
        active = np.flatnonzero(self._link_count)
        if not active.size:
            return 0.0, 0.0, 0
        assert self.links is not None  # link_utilization() on the active links only
        load = np.maximum(self._link_load[active], 0.0)
        util = np.minimum(load / self.links.capacity_Bps[active], 1.0)
        return float(util.sum()) / active.size, float(util.max()), int(active.size)

    def run(self) -> Results:
        """Run to the end under ``self.policy`` and return the results."""
        steps = self.instants()
        try:
            view = next(steps)
            while True:
                view = steps.send(self._decide(view))
        except StopIteration as stop:
            return stop.value

    def _decide(self, view: ClusterView) -> Sequence[Any]:
        """``policy.schedule(view)``; a crash or a result that is not a sequence of actions is
        a :class:`PolicyError` naming the policy, the simulated time and the triggers."""
        try:
            actions = self.policy.schedule(view)
        except TimeUp:  # the run's wall-clock limit struck inside the policy
            raise TimeLimitError(
                f"policy {self.policy_name!r} was still in schedule() at t={self.now:.3f}s "
                f"({self._triggers_text()})"
            ) from None
        except DLClusterError:
            raise
        except Exception as exc:
            raise PolicyError(
                f"policy {self.policy_name!r} raised {type(exc).__name__}: {exc} in schedule() "
                f"at t={self.now:.3f}s ({self._triggers_text()})"
            ) from exc
        if isinstance(actions, str | bytes) or not hasattr(actions, "__iter__"):
            raise PolicyError(
                f"policy {self.policy_name!r}: schedule() returned {actions!r} at "
                f"t={self.now:.3f}s ({self._triggers_text()}); it must return a list of actions "
                "([] to do nothing)"
            )
        return actions

    def _triggers_text(self) -> str:
        shown = [
            f"{t.kind} of job {t.job}" if t.job >= 0 else t.kind for t in self.pending_triggers[:3]
        ]
        more = len(self.pending_triggers) - len(shown)
        return "trigger: " + ", ".join(shown) + (f" and {more} more" if more > 0 else "")

    def instants(self) -> Generator[ClusterView, Sequence[Any], Results]:
        """The run as a generator: yields the view at every decision instant and takes the
        actions for it via ``send``; returns the results. ``run`` drives it with the policy;
        a Gymnasium env drives it with its own decisions."""
        t_wall = time.perf_counter()
        if self.ps is not None and not getattr(self.policy, "supports_ps_jobs", False):
            raise NotApplicableError(
                f"policy {self.policy_name!r} schedules GPU jobs; scenario "
                f"{self.scenario.name} has parameter-server jobs on CPUs (use a policy with "
                "supports_ps_jobs = True: nearchus, optimus, fa-bf)"
            )
        reset = getattr(self.policy, "reset", None)
        view = ClusterView(self, clairvoyant=is_clairvoyant(self.policy))
        check_workload(self.policy, view)
        if reset is not None:
            reset(view, self.rng)
        heap = self._heap
        n_total = len(self.jobs) - len(self.dropped)
        n_done = 0
        horizon = self.scenario.max_sim_time_s
        period = self.scenario.round_period_s
        while heap:
            t = heap[0][0]
            if t > horizon:
                warnings.warn(
                    f"stopped at the simulated-time horizon {horizon:.0f}s with "
                    f"{n_total - n_done} job(s) unfinished",
                    stacklevel=2,
                )
                break
            self.now = t
            self.pending_triggers = []
            while heap and heap[0][0] == t:
                _, _, _, kind, job, ver = heapq.heappop(heap)
                if kind == FINISH:
                    if ver != self.version[job] or self.status[job] != RUNNING:
                        continue  # stale: the job's speed changed since this was queued
                    self._finish(job)
                    n_done += 1
                    self.n_done = n_done
                elif kind == ARRIVAL:
                    self.status[job] = WAITING
                    self.waiting[job] = None
                    spec = self.jobs[job]
                    self.wait_since[job] = self.seen_arrival[job] = spec.arrival_s
                    self.seen_demand[job] = spec.num_gpus
                    self.seen_compute[job] = spec.compute_s
                    self.arrived.append(job)
                    self._log("arrival", job)
                elif kind == WAKEUP:
                    self._wakeups.discard(t)
                elif kind == ROUND and period and n_done < n_total:
                    self._push(t + period, ROUND, -1)
                self.sim_events += 1
                self.pending_triggers.append(Trigger(_KIND_NAMES[kind], job))
            if not self.pending_triggers:
                continue
            self.apply((yield view))
            self._record()
            if self._progress is not None:
                self._progress(n_done, n_total)
            if n_done == n_total:
                break
            if not self.running and not self._future_events():
                break  # nothing can change any more: remaining jobs are reported unfinished
        for job in list(self.running):
            self._advance(job)
        wall = time.perf_counter() - t_wall
        return build_results(self, wall)

    def cut(self) -> Results:
        """Stop the run now (an env's step limit): running jobs brought up to now, the
        results of what happened so far, jobs not finished reported unfinished."""
        for job in list(self.running):
            self._advance(job)
        return build_results(self, 0.0)

    def _future_events(self) -> bool:
        """Whether any arrival, finish or wake-up is still queued (rounds alone don't count)."""
        return any(e[3] != ROUND for e in self._heap)

    def timeseries(self) -> dict[str, np.ndarray]:
        """One point per decision instant; the link columns only when contention is on."""
        ts = {
            "t": np.asarray(self._ts_t),
            "busy_gpus": np.asarray(self._ts_busy, dtype=np.int64),
            "waiting": np.asarray(self._ts_wait, dtype=np.int64),
            "running": np.asarray(self._ts_run, dtype=np.int64),
            "remaining": np.asarray(self._ts_left, dtype=np.int64),
        }
        if self.links is not None:
            ts.update(
                link_util_mean=np.asarray(self._ts_util_mean, dtype=np.float64),
                link_util_max=np.asarray(self._ts_util_max, dtype=np.float64),
                links_active=np.asarray(self._ts_active, dtype=np.int64),
                links_contended=np.asarray(self._ts_contended, dtype=np.int64),
            )
        if self.ps is not None:
            ts.update(self.ps.timeseries())
        return ts
