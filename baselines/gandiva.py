"""Gandiva (Xiao et al., OSDI'18): time-slicing by suspend-resume, GPU oversubscription,
introspective unpacking and migration; and ``gandiva-placement``, its placement-and-migration
part alone, as the Dally evaluation characterises it.

Sources. The Gandiva paper is not among the project's papers. Its mechanism is taken from
the paper's abstract (GPUs time-sliced across jobs, job performance introspected, jobs
migrated to better-fit GPUs), its section 4.1 for the cost of a suspend-resume, the accounts
of it in Dally 5.1.3 ("network-agnostic ...
migrating jobs to more favorable GPU consolidation whenever resources become available") and
Crius 8.1 and 9 (it refines its decisions introspectively from runtime profiling; it profiles
jobs and schedules them with migration and other mechanisms), the Gavel authors' notes on the
paper's section 4.2 and its Algorithm 1 (stanford-futuredata/gavel, related_work/gandiva.md),
and public reading notes of its sections 4.1 (mechanisms: suspend-resume and packing,
migration, grow-shrink) and 4.2 (reactive and introspective modes).

``gandiva`` (:class:`Gandiva`, the default), paper -> code:

- **Time-slicing** (4.1, suspend-resume; public summaries of the paper describe GPU time
  sliced among jobs in 60 s slices): ``quantum_s`` = 60 s, a round-robin rotation of the
  jobs that share one GPU set. A job alone on its GPUs is never suspended. Two forms of
  the same round robin (``timeslice``):

  - ``"quanta"``: every switch simulated. A GPU holds one job at a time (the engine's gang
    scheduling). The scheduler ticks at the multiples of ``quantum_s`` while some set is
    shared (a ``WakeUp`` at the next tick that matters); at a tick, in every shared set
    whose running job's turn is over, that job is suspended in place (``Preempt`` with
    ``resume_in_place_s``) and the next job in turn order starts on the same GPUs
    (``Start``).
  - ``"rates"``: the ``k`` jobs of a set all run on its GPUs (``TimeShare``,
    ``sim.timeshare``), each holding them ``1 / k`` of the time and progressing at
    ``(1 - f) / k``, ``f`` the fraction of a turn its switch takes (below). The rates change
    only when the set's jobs change, so the cost grows with those changes, not with quanta.
    Lowering the height (below) takes the job whose turn comes next in the round robin the
    rates stand for (turns switch at the quantum boundaries from the first one after the set
    became shared), as the quanta form does. Not modelled in this form: a newcomer's wait
    for the next boundary (it shares at once), and which job of a set is on the network
    links, so the form needs a scenario whose jobs share no links.
  - ``"auto"`` (default): ``"rates"`` where the engine shares no links (link contention off
    or unable to bind: the trace clusters and the Dally presets), ``"quanta"`` elsewhere.
    On twelve-job cases the two forms give the same average JCT within 0.5 %
    (``tests/test_gandiva_rates.py``); on whole workloads single runs can differ a lot either
    way (placements diverge after the first different choice: 0.83-1.63x on the overloaded
    ``dally-poisson-2rack`` over ten seeds, mean 1.05x).
- **Switch cost** (4.1): Gandiva suspends a job when a mini-batch ends, where its GPU memory
  use is lowest, keeps its state in host memory and copies it back on resume. The paper's
  text is not available here: public reading notes of 4.1 report a suspend-resume of about
  100 ms (under O(100 ms)) for the image classification jobs it measures.
  ``suspend_resume_s="paper"`` (default) charges a resume 0.1 s for a model of family
  ``cnn`` (image classification) and 1 s for family ``nlp`` (language models) and for the
  other families (our choice: ten times the measured figure, for models whose state is
  larger; not a figure checked against the paper). As in the paper the switch is
  part of the slice: a job resumed at a tick yields at the next one (59.9 s of progress in
  60 s for a CNN). A number charges every switch that many seconds (less than
  ``quantum_s``). Only a resume on the GPUs the job left is cheap (its state waits beside
  them): a suspended job that starts on other GPUs (free GPUs when the height is lowered,
  or its set's new GPUs after a migration) pays the scenario's checkpoint + restore, as
  migrations and other policies' preemptions do, and its quantum of progress follows that
  overhead. ``suspend_resume_s="overheads"`` charges checkpoint + restore for every
  switch, each followed by a quantum of progress (with the defaults, 10 + 20 s, a job
  resumed at a tick yields two ticks later: 90 s of progress in 120 s): every switch
  priced as a migration. In the rates form, ``f`` is the switch over the quantum
  (``"paper"`` and numbers) or checkpoint + restore over the turn it starts (30 s of 120 s
  with ``"overheads"``); a job suspended to take free GPUs, and a set that migrates, pay
  checkpoint + restore in their own turns. Not modelled: a suspend waits for the end of the
  current mini-batch (under one iteration), which here happens at once.
- **Reactive mode** (4.2, Algorithm 1 as the Gavel notes summarise it): on arrivals and
  departures a waiting job takes free GPUs if enough are free (servers of its affinity,
  then unassigned ones, then others) and otherwise time-shares GPUs of jobs of its own size
  ("affinity"); only when neither is possible does it wait in the queue. Here: free GPUs in
  arrival order, each job the lowest-numbered free GPUs (first fit, network-agnostic as Dally
  5.1.3 describes Gandiva; a job that does not fit lets later ones go first), exactly as
  ``gandiva-placement``; otherwise the job joins the GPU set of a job with the same GPU
  demand that is shared by the fewest jobs (ties: the oldest set), if fewer than
  ``max_share`` jobs share it (an adaptive-parallelism job only one whose GPUs fit a plan
  of its model); otherwise it waits. When a job finishes, the next job of its
  set starts on its GPUs.
- **Oversubscription cap** (``max_share``, default 2 jobs per GPU set, the running one
  included). The sources available here give no numeric limit; 2 is our choice: the
  smallest oversubscription that lets more jobs than GPUs make progress, bounding every
  job's share of its GPUs to one half (plus the switch overheads). ``max_share=1`` turns
  oversubscription, and so time-slicing, off.
- **Lowering the height when GPUs free up** (4.2, introspective mode: jobs are re-placed as
  resources change). GPUs still free after the waiting jobs that share nothing were placed
  go to the waiting members of shared GPU sets, most shared set first, in turn order, each on
  the lowest-numbered free GPUs; such a job then has GPUs of its own.
- **Introspective unpacking** (4.1 packing: Gandiva packs jobs only under overload, watches
  the packed jobs' progress rate, and undoes a packing that does worse than time-slicing).
  A GPU here runs one job at a time, so two jobs interfere only through the network links
  their placements share (link contention). The policy keeps, per running job, the lowest
  iteration time it has observed since the job started on its current GPUs (observed
  progress, ``view.iter_time_s``: what Gandiva measures at mini-batch boundaries). A job
  whose observed iteration time rises above ``unpack_slowdown`` (default 1.2, our choice)
  times that value moves to the most consolidated free GPUs, if alone there it would run at
  least as fast as it did before the drop (``view.comm_overhead_for``) and the saving over
  its estimated remaining iterations pays the checkpoint + restore (``worth_moving``, on
  the observed iteration time). No job length is used. ``unpack_slowdown=.inf`` turns it
  off.
- **Migration for locality** (4.1 migration; Dally 5.1.3), as ``gandiva-placement``: after a
  completion, with the GPUs still free, each running job placed wider than it could be
  (network tier first, then rack; older first) moves to the most consolidated free placement
  that is strictly tighter, when the saving over its estimated remaining iterations pays the
  checkpoint + restore (``remaining``, default ``"history"``; ``"known"`` is a clairvoyant
  variant). A moved job's set moves with it. ``migration=false`` turns migration and
  unpacking off.
- **Not modelled**: running two jobs on one GPU at once (packing proper; the engine gives
  each GPU to one job), grow-shrink (jobs keep their GPU demand), and the affinity of
  servers when placing on free GPUs (first fit, as above).

``gandiva-placement`` (:class:`GandivaPlacementOnly`): the placement and migration above
without time-slicing, oversubscription or unpacking: jobs run to completion once started.
This is how Dally 5.1.3 characterises Gandiva (the committed Gandiva rows of the Dally
reproduction are this behaviour). ``gandiva`` with ``max_share=1`` and
``unpack_slowdown=.inf`` makes the same decisions.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter, deque
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from dlcluster_gym.cluster.topology import Tier
from dlcluster_gym.errors import ConfigError, NotApplicableError
from dlcluster_gym.perf.parallelism import is_adaptive_model
from dlcluster_gym.scheduler import BaseScheduler
from dlcluster_gym.sim.actions import Action, Preempt, Start, same_gpus
from dlcluster_gym.sim.offers import FIRST_FIT, WAIT, Offer, OfferGen, drive, make_offer
from dlcluster_gym.sim.view import ClusterView, Plan

from .consolidation import best_tiers, check_remaining, worth_moving

QUANTUM_S = 60.0  # one-minute time slices (4.1; see the module docstring)
# Suspend-resume at a mini-batch boundary, per model family (4.1 as public reading notes report
# it: about 0.1 s for image classification jobs); language models and other families: 1 s
# (our choice, ten times that, for a larger model state).
SUSPEND_RESUME_S: dict[str, float] = {"cnn": 0.1, "nlp": 1.0}
SUSPEND_RESUME_OTHER_S = 1.0
MAX_SHARE = 2  # jobs per GPU set, the running one included (our choice; see the docstring)
UNPACK_SLOWDOWN = 1.2  # observed iteration time over the best seen on the same GPUs (ours)
_EPS = 1e-9  # relative tolerance of quantum boundaries
TIMESLICE_FORMS = ("auto", "rates", "quanta")


class GandivaPlacementOnly(BaseScheduler):
    """``gandiva-placement``: greedy network-agnostic placement with migration for locality,
    no time-slicing (see the module docstring)."""

    name = "gandiva-placement"

    def __init__(self, *, migration: bool = True, remaining: str = "history") -> None:
        super().__init__(migration=migration, remaining=check_remaining(remaining))
        self.migration = bool(migration)
        self.remaining = remaining
        self.clairvoyant = remaining == "known"

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        self._demand = view.demand
        self._best = best_tiers(view)
        self._tier = np.full(view.num_job_ids, -1, dtype=np.int8)

    def schedule(self, view: ClusterView) -> Sequence[Action]:
        return drive(self.offers(view), self.choose)

    @staticmethod
    def choose(offer: Offer) -> int:
        """Network-agnostic: the lowest-numbered free GPUs."""
        return FIRST_FIT if offer.mask[FIRST_FIT] else WAIT

    def offers(self, view: ClusterView) -> OfferGen:
        """Waiting jobs in arrival order, each offered the free GPUs if enough are free;
        then migrations with what is left (base-policy decisions, not offered)."""
        plan = view.plan()
        if plan.num_free == 0:
            return ()
        now = view.now
        for job in view.waiting():
            if plan.num_free == 0:
                break
            n = int(self._demand[job])
            if n <= plan.num_free:
                offer = make_offer(plan, job, n, now - float(view.wait_since[job]))
                gpus = offer.placement((yield offer))
                if gpus is not None:
                    plan.start(job, gpus)
                    self._tier[job] = view.cluster.placement_tier(gpus)
        if self.migration and plan.num_free and any(t.kind == "finish" for t in view.triggers):
            self._migrate(view, plan)
        return plan.actions

    def _movable(self, view: ClusterView) -> np.ndarray:
        """Running jobs a migration may move."""
        return np.asarray(view.running(), dtype=np.int64)

    def _moved(self, view: ClusterView, job: int, gpus: np.ndarray) -> None:
        """Bookkeeping after ``job`` was planned to move to ``gpus``."""
        self._tier[job] = view.cluster.placement_tier(gpus)

    def _migrate(self, view: ClusterView, plan: Plan) -> None:
        running = self._movable(view)
        if running.size == 0:
            return
        wide = running[self._tier[running] > self._best[running]]
        start = np.asarray(view.last_start_s)[wide]
        moved: set[int] = set()
        for job in wide[np.lexsort((wide, start, -self._tier[wide]))].tolist():
            mover = self._mover(job)
            if mover in moved:
                continue
            tighter = Tier(int(self._tier[job]) - 1)
            gpus = plan.find(int(self._demand[job]), max_tier=tighter)
            if gpus is not None and worth_moving(view, job, gpus, self.remaining):
                plan.migrate(mover, gpus)
                self._moved(view, mover, gpus)
                moved.add(mover)

    def _mover(self, job: int) -> int:
        """The job whose ``Migrate`` moves ``job`` (itself)."""
        return job


@dataclass(slots=True)
class _Set:
    """A GPU set and the jobs that time-share it: ``ring[0]`` holds the GPUs, the others wait
    their turn in order (the rates form: all run, in join order; ``turns_from``: when the
    round robin that the rates stand for first switched turns)."""

    gpus: np.ndarray
    tier: int
    ring: deque[int]
    turns_from: float = math.nan


class Gandiva(GandivaPlacementOnly):
    """``gandiva``: time-slicing by suspend-resume in quanta (each switch at the paper's
    measured cost, ``suspend_resume_s``), oversubscription of GPU sets by jobs of the same size
    up to ``max_share``, introspective unpacking on observed progress, migration for locality
    (see the module docstring)."""

    name = "gandiva"

    def __init__(
        self,
        *,
        migration: bool = True,
        remaining: str = "history",
        quantum_s: float = QUANTUM_S,
        max_share: int = MAX_SHARE,
        unpack_slowdown: float = UNPACK_SLOWDOWN,
        suspend_resume_s: float | Literal["paper", "overheads"] = "paper",
        timeslice: Literal["auto", "rates", "quanta"] = "auto",
    ) -> None:
        if not (isinstance(quantum_s, int | float) and math.isfinite(quantum_s) and quantum_s > 0):
            raise ConfigError(
                f"quantum_s must be a finite number of seconds > 0, got {quantum_s!r}"
            )
        longest = _check_suspend_resume(suspend_resume_s)
        if longest >= quantum_s:
            raise ConfigError(
                f"suspend_resume_s ({suspend_resume_s!r}: up to {longest:g} s per switch) must "
                f"be shorter than quantum_s ({quantum_s!r} s), else a time slice holds no "
                "progress"
            )
        if timeslice not in TIMESLICE_FORMS:
            raise ConfigError(
                f"timeslice must be one of {', '.join(TIMESLICE_FORMS)}, got {timeslice!r}"
            )
        if isinstance(max_share, bool) or not (isinstance(max_share, int) and max_share >= 1):
            raise ConfigError(f"max_share must be an integer >= 1, got {max_share!r}")
        ok = isinstance(unpack_slowdown, int | float) and unpack_slowdown >= 1.0
        if not ok:  # NaN fails the comparison; .inf turns unpacking off
            raise ConfigError(
                f"unpack_slowdown must be a number >= 1 (.inf: no unpacking), got "
                f"{unpack_slowdown!r}"
            )
        super().__init__(migration=migration, remaining=remaining)
        self.params.update(
            quantum_s=quantum_s,
            max_share=max_share,
            unpack_slowdown=unpack_slowdown,
            suspend_resume_s=suspend_resume_s,
            timeslice=timeslice,
        )
        self.timeslice = timeslice
        self.suspend_resume_s = (
            suspend_resume_s if isinstance(suspend_resume_s, str) else float(suspend_resume_s)
        )
        self.quantum_s = float(quantum_s)
        self.max_share = int(max_share)
        self.unpack_slowdown = float(unpack_slowdown)

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        super().reset(view, rng)
        n = view.num_job_ids
        self._set_of = np.full(n, -1, dtype=np.int64)  # GPU set of each admitted job
        self._turn_end = np.full(n, np.inf)  # when the running job's quantum is over
        # suspended jobs -> (the GPUs they left, the seconds a resume there costs; None:
        # checkpoint + restore)
        self._left: dict[int, tuple[np.ndarray, float | None]] = {}
        self._flag = np.zeros(n, dtype=bool)  # scratch mask
        self._best_iter = np.full(n, np.nan)  # lowest observed iteration time on its GPUs
        self._sets: dict[int, _Set] = {}
        self._shared: set[int] = set()  # ids of the sets shared by two jobs or more
        self._open: dict[int, set[int]] = {}  # GPU count -> sets with room for one more job
        self._turns: list[tuple[float, int, int]] = []  # (quantum end, set, job) of shared sets
        self._queue: dict[int, None] = {}  # waiting jobs in no set, in arrival order
        self._queue_sizes: Counter[int] = Counter()  # their GPU demands
        self._seen = 0  # arrivals taken into the queue
        self._next_id = 0
        self._wake = -math.inf
        self._skip: set[int] = set()  # jobs suspended or moved at this instant (not movable)
        self._moved_now: set[int] = set()  # jobs migrated at this instant
        ov = view.scenario.overheads
        self._switch_s = float(ov.checkpoint_s + ov.restore_s)  # migration; a resume elsewhere
        if self.timeslice == "rates" and view.shares_links:
            raise NotApplicableError(
                f"gandiva with timeslice='rates' needs a scenario whose jobs share no network "
                f"links; {view.scenario.name} models link contention (use timeslice='quanta' "
                "or 'auto')"
            )
        # The rates form: the sharers of a set all run, at rates (sim.timeshare).
        self._rates = self.timeslice == "rates" or (
            self.timeslice == "auto" and not view.shares_links
        )
        self._sharer = np.zeros(n, dtype=bool)  # rates form: runs on another job's GPUs

    # ------------------------------------------------------------------ bookkeeping
    def _new_set(self, view: ClusterView, job: int, gpus: np.ndarray) -> None:
        sid = self._next_id
        self._next_id += 1
        tier = int(view.cluster.placement_tier(gpus))
        s = _Set(np.asarray(gpus, dtype=np.int64), tier, deque([job]))
        self._sets[sid] = s
        self._set_of[job] = sid
        self._best_iter[job] = np.nan  # new GPUs: observe afresh
        self._begin_turn(sid, view.now)
        self._update_room(sid, s.gpus.size)

    def _begin_turn(self, sid: int, now: float) -> None:
        """The first job of set ``sid`` starts on the set's GPUs now. Its turn is one quantum,
        its suspend-resume included; a checkpoint + restore that the engine charges instead
        (a resume on other GPUs, or every switch with ``suspend_resume_s="overheads"``)
        comes first and the quantum follows it."""
        s = self._sets[sid]
        job = s.ring[0]
        self._tier[job] = s.tier
        if self._rates:
            return
        left = self._left.pop(job, None)
        switch = 0.0  # a first start, or a suspend-resume within the quantum
        if left is not None and (left[1] is None or not same_gpus(left[0], s.gpus)):
            switch = self._switch_s
        self._turn_end[job] = now + switch + self.quantum_s
        if sid in self._shared:
            heapq.heappush(self._turns, (float(self._turn_end[job]), sid, job))

    def _update_room(self, sid: int, n: int) -> None:
        """Keep ``_open`` and ``_shared`` in step with set ``sid`` of ``n`` GPUs (its
        current number of jobs; 0 once dissolved)."""
        s = self._sets.get(sid)
        h = 0 if s is None else len(s.ring)
        room = self._open.setdefault(n, set())
        if 0 < h < self.max_share:
            room.add(sid)
        else:
            room.discard(sid)
        if s is not None and h >= 2:
            if sid not in self._shared:
                self._shared.add(sid)
                job = s.ring[0]
                if not self._rates:
                    heapq.heappush(self._turns, (float(self._turn_end[job]), sid, job))
        else:
            self._shared.discard(sid)

    def _leave(self, sid: int, job: int) -> None:
        """``job`` no longer belongs to set ``sid``; an empty set is dissolved."""
        s = self._sets[sid]
        s.ring.remove(job)
        self._set_of[job] = -1
        self._sharer[job] = False
        if not s.ring:
            del self._sets[sid]
        else:
            self._sharer[s.ring[0]] = False  # rates form: it now holds the GPUs
        self._update_room(sid, int(s.gpus.size))

    def _dequeue(self, job: int) -> None:
        del self._queue[job]
        self._queue_sizes[int(self._demand[job])] -= 1

    # ------------------------------------------------------------------ decisions
    def offers(self, view: ClusterView) -> OfferGen:
        """Departures, then the waiting jobs in no set (free GPUs offered in arrival order,
        else a shared set), then the waiting members of shared sets (free GPUs offered), then
        the quantum rotations, migrations and unpacking (base-policy decisions), and a
        wake-up at the next quantum end."""
        plan = view.plan()
        now = view.now
        for job in view.arrivals(self._seen):
            self._queue[job] = None
            self._queue_sizes[int(self._demand[job])] += 1
        self._seen = view.num_arrived
        finished = False
        # Departures: the next job of the set resumes on its GPUs.
        for t in view.triggers:
            if t.kind != "finish":
                continue
            finished = True
            sid = int(self._set_of[t.job])
            if sid < 0:
                continue
            self._leave(sid, t.job)
            if sid in self._sets and not self._rates:  # rates form: the others run already
                plan.start(self._sets[sid].ring[0], self._sets[sid].gpus)
                self._begin_turn(sid, now)
        # Reactive mode: free GPUs first, else time-share a set of jobs of the same size.
        if self._queue and self._queue_may_move(plan.num_free):
            for job in list(self._queue):
                n = int(self._demand[job])
                if n <= plan.num_free:
                    offer = make_offer(plan, job, n, now - float(view.wait_since[job]))
                    gpus = offer.placement((yield offer))
                    if gpus is not None:
                        plan.start(job, gpus)
                        self._dequeue(job)
                        self._new_set(view, job, gpus)
                elif self._open.get(n) and self._share(view, plan, job, n):
                    self._dequeue(job)
        # Lower the height: free GPUs to the waiting members of shared sets.
        unshared: set[int] = set()
        if self._shared and plan.num_free:
            unshared = yield from self._unshare(view, plan)
        tick = not self._rates and self._turns and self._is_tick(now)
        self._skip = self._rotate(view, plan, now) if tick else set()
        self._skip |= unshared  # they moved at this instant: not movable again
        self._moved_now = set()
        unpack = self.migration and self.unpack_slowdown < math.inf
        slow = self._observe(view) if unpack else None
        if self.migration and plan.num_free and finished:
            self._migrate(view, plan)
        if slow is not None and slow.size and plan.num_free:
            self._unpack(view, plan, slow)
        if not self._rates:
            self._wake_at_next_turn(plan, now)
        return plan.actions

    def _queue_may_move(self, free: int) -> bool:
        """Whether some job of the queue fits the free GPUs or a set with room."""
        return any(c and (n <= free or self._open.get(n)) for n, c in self._queue_sizes.items())

    def _share(self, view: ClusterView, plan: Plan, job: int, n: int) -> bool:
        """Admit ``job`` to the least shared set of jobs of its size with room (ties: the
        oldest set) on whose GPUs it can run; False when there is none."""
        adaptive = is_adaptive_model(view.jobs[job].model)
        for sid in sorted(self._open[n], key=lambda i: (len(self._sets[i].ring), i)):
            s = self._sets[sid]
            # an adaptive-parallelism job needs a plan that fits in the set's GPU memory
            if adaptive and view.plan_traffic(job, s.gpus) is None:
                continue
            s.ring.append(job)
            self._set_of[job] = sid
            if self._rates:  # it runs at once, on the set's GPUs, at the shared rates
                host = s.ring[0]
                if len(s.ring) == 2:  # the quanta form's first switch: the next boundary
                    t = self._next_tick(view.now)
                    s.turns_from = (
                        t if t > view.now else self._next_tick(view.now + self.quantum_s / 2)
                    )
                plan.time_share(
                    job, host, self._switch_frac(view, job), self._switch_frac(view, host)
                )
                self._sharer[job] = True
                self._tier[job] = s.tier
            self._update_room(sid, n)
            return True
        return False

    def _turn_after(self, s: _Set, now: float) -> int:
        """Rates form: the job of ``s`` whose turn follows the current one in the round
        robin that the rates stand for (the quanta form lowers the height with it: the next
        job in turn, waiting while another runs). Turns switch at quantum boundaries from
        ``turns_from`` on, each a quantum long (with ``suspend_resume_s="overheads"``, the
        checkpoint + restore and a quantum, to the next boundary)."""
        k = len(s.ring)
        if math.isnan(s.turns_from) or now < s.turns_from:
            return s.ring[1]
        turn = self._overheads_turn() if self.suspend_resume_s == "overheads" else self.quantum_s
        running = (1 + math.floor((now - s.turns_from) / turn + _EPS)) % k
        return s.ring[(running + 1) % k]

    def _overheads_turn(self) -> float:
        """A turn with ``suspend_resume_s="overheads"``: checkpoint + restore, then a quantum,
        to the next quantum boundary."""
        q = self.quantum_s
        return math.ceil((self._switch_s + q) / q - _EPS) * q

    def _switch_frac(self, view: ClusterView, job: int) -> float:
        """Rates form: the fraction of each of ``job``'s turns that its suspend-resume takes
        in the quanta form (``suspend_resume_s``): the cost over the quantum, the cost being
        part of it; with ``"overheads"`` checkpoint + restore over the turn it starts (the
        overhead, then a quantum, to the next quantum boundary)."""
        cost = self._suspend_resume_of(view, job)
        if cost is None:
            return self._switch_s / self._overheads_turn()
        return cost / self.quantum_s

    def _unshare(self, view: ClusterView, plan: Plan) -> Generator[Offer, int, set[int]]:
        """Offer the free GPUs to the waiting members of shared sets, the most shared set
        first (ties: the oldest), each set's members in turn order. Returns the jobs that
        took free GPUs."""
        now = view.now
        declined: set[int] = set()
        moved: set[int] = set()
        while plan.num_free:
            cands = [
                (-len(self._sets[sid].ring), sid)
                for sid in self._shared
                if sid not in declined and self._sets[sid].gpus.size <= plan.num_free
            ]
            if not cands:
                return moved
            _, sid = min(cands)
            s = self._sets[sid]
            job = self._turn_after(s, now) if self._rates else s.ring[1]
            n = int(s.gpus.size)
            offer = make_offer(plan, job, n, now - float(view.wait_since[job]))
            gpus = offer.placement((yield offer))
            if gpus is None:
                declined.add(sid)
                continue
            if self._rates:  # suspended on the shared GPUs, resumed on its own
                plan.preempt(job)
            plan.start(job, gpus)
            self._leave(sid, job)
            self._new_set(view, job, gpus)
            moved.add(job)
        return moved

    def _live(self, end: float, sid: int, job: int) -> bool:
        """Whether a ``_turns`` entry is still the current quantum of a shared set."""
        s = self._sets.get(sid)
        return (
            s is not None
            and sid in self._shared
            and s.ring[0] == job
            and self._turn_end[job] == end
        )

    def _due(self, now: float) -> tuple[int, int] | None:
        """Pop the next (set, job) whose quantum is over by ``now``, skipping stale entries."""
        turns = self._turns
        limit = now + _EPS * max(1.0, abs(now))
        while turns and turns[0][0] <= limit:
            end, sid, job = heapq.heappop(turns)
            if self._live(end, sid, job):
                return sid, job
        return None

    def _rotate(self, view: ClusterView, plan: Plan, now: float) -> set[int]:
        """Round robin: in every shared set whose running job's quantum is over, that job is
        suspended in place (its suspend-resume cost, ``Preempt.resume_in_place_s``) and the
        next one starts on the same GPUs. Returns the suspended jobs."""
        out: set[int] = set()
        while (due := self._due(now)) is not None:
            sid, run = due
            s = self._sets[sid]
            cost = self._suspend_resume_of(view, run)
            self._left[run] = (s.gpus, cost)
            self._turn_end[run] = math.inf
            out.add(run)
            s.ring.rotate(-1)
            # the GPUs change hands: the plan's free GPUs stay as they are
            plan.actions += (Preempt(run, cost), Start(s.ring[0], tuple(s.gpus.tolist())))
            self._begin_turn(sid, now)
        return out

    def _suspend_resume_of(self, view: ClusterView, job: int) -> float | None:
        """Seconds a suspend-resume of ``job`` in place costs (None: checkpoint + restore)."""
        mode = self.suspend_resume_s
        if mode == "overheads":
            return None
        if mode == "paper":
            family = view.model_profile(job).family
            return SUSPEND_RESUME_S.get(family, SUSPEND_RESUME_OTHER_S)
        return float(mode)

    def _is_tick(self, now: float) -> bool:
        """Whether ``now`` is a quantum boundary (a multiple of ``quantum_s``)."""
        k = round(now / self.quantum_s)
        return abs(now - k * self.quantum_s) <= _EPS * max(1.0, abs(now))

    def _next_tick(self, t: float) -> float:
        """The first quantum boundary at or after ``t``."""
        q = self.quantum_s
        return math.ceil(t / q - _EPS) * q

    def _wake_at_next_turn(self, plan: Plan, now: float) -> None:
        """A wake-up at the first quantum boundary at or after the earliest quantum end of
        the shared sets (stale entries dropped)."""
        turns = self._turns
        while turns and not self._live(*turns[0]):
            heapq.heappop(turns)
        if not turns:
            return
        t = self._next_tick(max(turns[0][0], now))
        if t <= now:
            t = self._next_tick(now + self.quantum_s / 2)
        if t < self._wake or self._wake <= now:
            self._wake = t
            plan.wake_up(t)

    def _movable(self, view: ClusterView) -> np.ndarray:
        """Running jobs that hold their set's GPUs and were not suspended at this instant."""
        jobs = np.asarray(view.running(), dtype=np.int64)
        keep = self._set_of[jobs] >= 0
        if self._skip:
            skip = np.fromiter(self._skip, dtype=np.int64, count=len(self._skip))
            self._flag[skip] = True
            keep &= ~self._flag[jobs]
            self._flag[skip] = False
        return jobs[keep]

    def _mover(self, job: int) -> int:
        """Rates form: the holder of ``job``'s set (a set moves as one, with its holder)."""
        if self._rates and self._sharer[job]:
            return int(self._sets[int(self._set_of[job])].ring[0])
        return job

    def _moved(self, view: ClusterView, job: int, gpus: np.ndarray) -> None:
        """A migrated job's set moves with it, and its quantum is extended by the switch."""
        sid = int(self._set_of[job])
        s = self._sets[sid]
        s.gpus = np.asarray(gpus, dtype=np.int64)
        s.tier = int(view.cluster.placement_tier(gpus))
        self._tier[job] = s.tier
        if self._rates:  # the set's other jobs moved with it
            self._tier[list(s.ring)] = s.tier
        else:
            self._turn_end[job] += self._switch_s
            if sid in self._shared:
                heapq.heappush(self._turns, (float(self._turn_end[job]), sid, job))
        self._best_iter[job] = np.nan
        self._moved_now.add(job)

    def _observe(self, view: ClusterView) -> np.ndarray:
        """Record the observed iteration times of the running jobs (those suspended at this
        instant aside); returns the jobs whose observed iteration time rose above
        ``unpack_slowdown`` x the lowest seen on their current GPUs, most slowed first."""
        jobs = self._movable(view)
        if jobs.size == 0:
            return jobs
        it = np.asarray(view.iter_time_s)[jobs]
        best = self._best_iter[jobs]
        with np.errstate(invalid="ignore"):
            slow = it > self.unpack_slowdown * best  # nothing seen yet (NaN): not slow
        self._best_iter[jobs] = np.fmin(best, it)
        if not slow.any():
            return jobs[:0]
        cand, ratio = jobs[slow], it[slow] / best[slow]
        return cand[np.lexsort((cand, -ratio))]

    def _unpack(self, view: ClusterView, plan: Plan, slow: np.ndarray) -> None:
        """Move the jobs whose observed progress dropped to the most consolidated free GPUs,
        most slowed first, when the job alone there would run at least as fast as it was
        observed to run before the drop and the move pays (``worth_moving``)."""
        for job in slow.tolist():
            if not plan.num_free:
                return
            if self._mover(job) in self._moved_now:
                continue
            gpus = plan.find(int(self._demand[job]))
            if gpus is None:
                continue
            # the move must promise the rate the job had before the drop, and pay for itself
            alone = float(view.compute_s[job]) * (1.0 + view.comm_overhead_for(job, gpus))
            if alone <= self._best_iter[job] and worth_moving(view, job, gpus, self.remaining):
                mover = self._mover(job)  # rates form: the set moves as one
                plan.migrate(mover, gpus)
                self._moved(view, mover, gpus)


def _check_suspend_resume(value: object) -> float:
    """Validate ``suspend_resume_s``; returns the longest switch it gives (0 for
    ``"overheads"``, whose switch extends the quantum instead)."""
    if value == "paper":
        return max(*SUSPEND_RESUME_S.values(), SUSPEND_RESUME_OTHER_S)
    if value == "overheads":
        return 0.0
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if number and math.isfinite(value) and value >= 0:  # type: ignore[arg-type]
        return float(value)  # type: ignore[arg-type]
    raise ConfigError(
        "suspend_resume_s must be 'paper' (the paper's measured suspend-resume per model "
        "family), 'overheads' (the scenario's checkpoint + restore) or a finite number of "
        f"seconds >= 0, got {value!r}"
    )
