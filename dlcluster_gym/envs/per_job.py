"""Scheduler-v3's decisions: one job at a time (``actions="per-job"``).

At a decision instant the env puts one job in focus and asks one question about it:

* **waiting phase**: the focus is the highest-priority waiting job (slot order ``order``) that
  fits in the free GPUs and has not been decided at this instant. With ``auto_start=True``
  (v3's default) a job whose most consolidated placement (one machine if it fits on one, else
  one rack) is free starts there at once, as Dally's Algorithm 1 accepts such an offer, and
  the agent is asked only about the others: wait for a consolidated placement, or take a
  wider one now (delay scheduling's question). Answer ``(0, *)``: defer it
  to a later instant; ``(1, k)``: start it on its ``k``-th preferred candidate placement
  (``PREFERENCE`` over the six candidates of ``sim.offers``: machine, rack, network,
  fewest-machines, packed, first-fit).
* **preemption phase** (``preemption=True``, once no undecided waiting job fits): the focus is a
  running job whose GPUs, added to the free ones, would let a waiting job that does not fit
  start (the first under ``running_order``; at most ``PREEMPT_OFFERS`` per instant). Answer
  ``(0, *)``: keep it running; ``(1, *)``: preempt it (checkpointed; it waits again from the
  next instant). The freed GPUs may let blocked jobs start: the waiting phase resumes.

The action is ``MultiDiscrete([2, 6])``: a yes/no head and a placement head (ignored for
defer, keep and preempt) whose values rank the candidates for the focus job (``PREFERENCE``:
value 0 is its most consolidated placement), so one learned preference serves every job
size. Why two heads: the yes/no decision about the focus job is one
binary choice, so the deterministic (argmax) policy starts a job exactly when it gives
starting probability above one half, however that probability is split over placements. In
Scheduler-v2's single categorical ``Discrete(1 + K*6)``, "no more starts now" was one
action against dozens of start actions: a policy that starts something with probability
0.8, spread thin, still took "stop" as its argmax and never started a job.

No stall: where deferring would leave the cluster idle (nothing running, nothing started at
this instant), defer is masked, so a job that fits starts. Every instant ends: each job is
decided at most once per instant, at most ``max_waiting`` deferrals are asked per instant,
and a running job is offered for preemption only while the preemption could make room for a
blocked job and only if it was preempted fewer than ``max_preemptions_per_h`` times in the
last simulated hour (the per-job cap that keeps a churning policy from spending the run on
checkpoints). Episodes end at ``max_steps`` decisions at the latest (truncated, with the
unfinished jobs charged as at a stall).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from dlcluster_gym.sim.offers import NUM_CANDIDATES

WAITING, PREEMPTING = 1, 2
"""The focus phases (``PerJob.phase``; 0 when no decision is pending)."""
HOUR_S = 3600.0
PREFERENCE: dict[int, np.ndarray] = {
    best: np.array([*range(best, 3), 3, 4, 5, *range(best)]) for best in range(3)
}
"""The placement head's values 0..5 name candidates in the focus job's preference order: the
tiers from its best possible one outward (machine, rack, network; ``Tier`` of its demand on
this cluster), then fewest-machines, packed and first-fit, then the tiers narrower than its
best (never valid). Value 0 is always the most consolidated placement the job could get."""
PREEMPT_OFFERS = 4
"""Running jobs offered for preemption per instant at most (the first under
``running_order``: by default the most attained GPU-service first)."""
PHASE_FEATURES: tuple[str, ...] = ("focus_waiting", "focus_running")
"""Appended to the global features: which phase the focus job is in (the focus is the first
waiting slot in the waiting phase, the first running slot in the preemption phase)."""


class PerJob:
    """The per-job decision state of one Scheduler env episode (see the module docstring)."""

    def __init__(self, env: Any) -> None:
        """``env``: the ``SchedulerEnv`` (``actions="per-job"``) whose decisions this holds."""
        self.env = env
        self.phase = 0
        self.focus = -1
        self.deferred = 0
        self.offered_r = 0
        self.preempted_at: dict[int, list[float]] = defaultdict(list)
        self.prefs = PREFERENCE[0]  # the focus job's candidate order (waiting phase)
        self._jobs: tuple[np.ndarray, ...] | None = None  # this instant's (``_instant_jobs``)
        self._offers_at = -1

    def new_instant(self) -> None:
        """Reset the per-instant counters (the env resets its touched set)."""
        self.phase, self.focus, self.deferred, self.offered_r = 0, -1, 0, 0
        self._jobs = None
        self._offers_at = -1  # the plan's action count when the env's offers were made

    def _instant_jobs(self) -> tuple[np.ndarray, ...]:
        """(waiting jobs in the engine's order, the same in slot order, running jobs in the
        engine's order, the same in ``running_order``) at this instant: the engine's sets and
        the jobs' priority keys do not move until the instant's decisions are applied, so
        they are read and sorted once; each pick drops the touched jobs (both orders break
        ties by job id, so the order of a subset is the subset of the order)."""
        if self._jobs is None:
            e, env = self.env.engine, self.env
            waiting = np.fromiter(e.waiting, dtype=np.int64, count=len(e.waiting))
            running = np.fromiter(e.running, dtype=np.int64, count=len(e.running))
            self._jobs = (
                waiting,
                env._priority(waiting) if waiting.size > 1 else waiting,
                running,
                env._running_priority(running) if running.size > 1 else running,
            )
        return self._jobs

    # ------------------------------------------------------------------ focus
    def refresh(self) -> bool:
        """Pick the next focus job, fill the env's slots and mask; False when the instant has
        no decision left. With ``auto_start``, a waiting focus whose most consolidated
        placement is free starts there without a step."""
        while self._pick():
            if self.phase == WAITING and self.env.auto_start and self.env._mask[2]:
                self.apply(np.array([1, 0]))
                continue
            return True
        return False

    def _pick(self) -> bool:
        """The next focus job, its slots and mask (``refresh`` without the auto-start)."""
        env = self.env
        e, plan = env.engine, env._plan
        nf = int(plan.num_free)
        demand = env.obs_state.demand
        tm = env._tmask
        waiting, by_priority, running, run_order = self._instant_jobs()
        if waiting.size:
            waiting = waiting[~tm[waiting]]
            by_priority = by_priority[~tm[by_priority]]
        if running.size:
            running = running[~tm[running]]
            run_order = run_order[~tm[run_order]]
        wd = demand[waiting]
        ok = wd <= nf
        if len(plan.actions) != self._offers_at:  # else deferred or kept: the same free GPUs
            env._offers = {}
            self._offers_at = len(plan.actions)
        m = env._mask
        m[:] = False
        if ok.any() and self.deferred < env.K:
            ordered = by_priority[demand[by_priority] <= nf]  # = env._priority(waiting[ok])
            slots, hidden = ordered[: env.K], np.concatenate((waiting[~ok], ordered[env.K :]))
            cand = env._candidate_masks(demand[slots], nf)
            self._set(WAITING, slots, hidden, cand, run_order[: env.R])
            self.prefs = PREFERENCE[int(env.obs_state.best[self.focus])]
            m[0] = not self._idle(e)
            m[1] = True
            m[2:] = cand[0][self.prefs]
            return True
        if env.preemption and running.size and (~ok).any() and self.offered_r < PREEMPT_OFFERS:
            blocked = waiting[~ok]
            need = int(demand[blocked].min()) - nf  # GPUs the smallest blocked job lacks
            sel = demand[running] >= need
            big = np.flatnonzero(sel)
            sel[big[~self._under_cap(running[big])]] = False
            cands = running[sel]
            if cands.size:
                is_cand = np.zeros(tm.size, dtype=bool)
                is_cand[cands] = True
                first = run_order[is_cand[run_order]]  # = env._running_priority(cands)
                others = run_order[~is_cand[run_order]]  # the rest, in the same order
                run = np.concatenate((first, others))[: env.R]
                ordered = by_priority[demand[by_priority] > nf]  # = env._priority(blocked)
                slots, hidden = ordered[: env.K], ordered[env.K :]
                self._set(PREEMPTING, slots, hidden, np.zeros((slots.size, NUM_CANDIDATES),
                                                              dtype=bool), run)  # fmt: skip
                m[0:2] = True
                m[2] = True  # the placement head is ignored: one valid value
                return True
        self.phase, self.focus = 0, -1
        return False

    def _idle(self, e: Any) -> bool:
        """Whether deferring would leave the cluster idle: nothing running and nothing
        started at this instant. Then defer is masked: a job that fits must start (no stall
        by construction). Whether arrivals are still to come is not asked: a real scheduler
        does not know it."""
        return not e.running and self.env._n_started <= 0

    def default(self) -> np.ndarray:
        """The "no" answer (defer, keep), or, where defer is masked, a start on the first
        valid candidate (the most consolidated one): what a masked choice becomes."""
        m = self.env._mask
        c = int(np.argmax(m[2:]))
        return np.array([0 if m[0] or not self.phase else 1, c], dtype=np.int64)

    def _set(self, phase: int, slots: np.ndarray, hidden: np.ndarray, cand: np.ndarray,
             running: np.ndarray) -> None:  # fmt: skip
        env = self.env
        self.phase = phase
        self.focus = int(slots[0] if phase == WAITING else running[0])
        env._slots_w, env._slots_r, env._hidden = slots, running, hidden
        env._cand = cand
        env._move = np.zeros((running.size, NUM_CANDIDATES), dtype=bool)
        env._point = True

    def _under_cap(self, jobs: np.ndarray) -> np.ndarray:
        """Which of ``jobs`` were preempted fewer than the cap in the last simulated hour."""
        cap = self.env.max_preemptions_per_h
        now = self.env.engine.now
        out = np.ones(jobs.size, dtype=bool)
        for i, j in enumerate(jobs.tolist()):
            times = self.preempted_at.get(j)
            if times:
                times[:] = [t for t in times if now - t < HOUR_S]
                out[i] = len(times) < cap
        return out

    # ------------------------------------------------------------------ actions
    def valid(self, action: np.ndarray) -> bool:
        """Whether ``(act, candidate)`` is valid at this decision point."""
        act, c = int(action[0]), int(action[1])
        if not self.phase:
            return act == 0
        if self.phase == PREEMPTING:
            return True
        m = self.env._mask
        return bool(m[0]) if act == 0 else bool(m[2 + c])

    def apply(self, action: np.ndarray) -> None:
        """Carry out a valid action on the focus job."""
        env = self.env
        job, act = self.focus, int(action[0])
        plan = env._plan
        if self.phase == WAITING:
            if act:
                c = int(self.prefs[int(action[1])]) + 1  # the candidate (1..6) of sim.offers
                gpus = env._offer(int(env.obs_state.demand[job])).placement(c)
                assert gpus is not None
                plan.start(job, gpus)
                env._n_started += 1
                env.obs_state.note_placement(job, gpus)
            else:
                self.deferred += 1
        else:
            self.offered_r += 1
            if act:
                plan.preempt(job)
                env._n_started -= 1
                self.preempted_at[job].append(env.engine.now)
        env._touched.add(job)
        env._tmask[job] = True

    def decode(self, action: Any) -> tuple[str, int, int]:
        """``(kind, job, candidate)``: kind ``start``/``defer`` (waiting focus) or
        ``preempt``/``keep`` (running focus), ``stop`` with no focus; candidate 1..6 or 0."""
        a = np.asarray(action).reshape(-1)
        act = int(a[0])
        if self.phase == WAITING:
            if not act:
                return "defer", self.focus, 0
            return "start", self.focus, int(self.prefs[int(a[1])]) + 1
        if self.phase == PREEMPTING:
            return ("preempt" if act else "keep"), self.focus, 0
        return "stop", -1, 0

    def focus_info(self) -> tuple[str, int]:
        """``("waiting" | "running", job)`` of the focus now (``("none", -1)`` without one)."""
        return {WAITING: "waiting", PREEMPTING: "running"}.get(self.phase, "none"), self.focus

    def phase_features(self) -> np.ndarray:
        """``PHASE_FEATURES`` now."""
        return np.array([self.phase == WAITING, self.phase == PREEMPTING], dtype=np.float32)
