"""``DLCluster/Scheduler-v2`` (and ``-v1``, ``-v0``): the agent runs the whole queue (which
job, where, whom to preempt or move)."""

from __future__ import annotations

import math
from collections.abc import Generator, Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from dlcluster_gym.config import ScenarioConfig
from dlcluster_gym.envs.base import (
    COMMON_KWARGS,
    ClusterEnv,
    check_flag,
    check_kwargs,
    check_reset_options,
    finite_number,
    serial_remaining_s,
    stalled,
)
from dlcluster_gym.envs.per_job import PHASE_FEATURES, PerJob
from dlcluster_gym.envs.queue_obs import (
    MACHINE_FEATURES,
    MACHINE_LINK_FEATURES,
    NG,
    NH,
    NR,
    NW,
    RACK_FEATURES,
    RACK_LINK_FEATURES,
    SPINE_FEATURES,
    QueueObserver,
)
from dlcluster_gym.envs.versions import version_name, warn_leaks
from dlcluster_gym.errors import ConfigError, InvalidActionError
from dlcluster_gym.sim.offers import (
    ACTION_NAMES,
    FEWEST_MACHINES,
    FIRST_FIT,
    MACHINE,
    NETWORK,
    NUM_CANDIDATES,
    PACKED,
    RACK,
    Offer,
)
from dlcluster_gym.sim.view import ClusterView, Plan

STOP = 0
ORDERS: tuple[str, ...] = ("las", "arrival", "nw_sens", "demand", "srw")
RUNNING_ORDERS: tuple[str, ...] = ("attained", "recent", "wide")
MOVE_MODES: tuple[str, ...] = ("migrate", "restart")
UNFINISHED_PENALTIES: tuple[str, ...] = ("serial", "fixed")
STALL_ENDS: tuple[str, ...] = ("terminated", "truncated")
OBSERVATIONS: tuple[str, ...] = ("flat", "dict", "graph")
V0_FIXED_PENALTY_S = 7 * 24 * 3600.0  # v0's unfinished_penalty_s default
SCHEDULER_KWARGS = (*COMMON_KWARGS, "max_waiting", "max_running", "preemption", "requeue",
                    "move_as",
                    "order", "running_order", "known_durations", "observation", "invalid_action",
                    "invalid_penalty", "wait_retry_s", "unfinished_penalty_s", "max_machines",
                    "max_racks", "skip_trivial", "unfinished_penalty", "stall_end", "actions",
                    "max_steps", "max_preemptions_per_h", "auto_start",
                    "history_features")  # fmt: skip
ACTION_DESIGNS: tuple[str, ...] = ("slots", "per-job")
PER_JOB_MAX_STEPS = 100_000  # Scheduler-v3's default episode step limit
PER_JOB_MAX_PREEMPTIONS_PER_H = 2  # Scheduler-v3's default per-job preemption cap
PER_JOB_SHAPING = 1.0  # Scheduler-v3's default weight of the ``shaping`` reward component
CANDIDATE_NAMES: tuple[str, ...] = ACTION_NAMES[1:]
_C = NUM_CANDIDATES


class SchedulerEnv(ClusterEnv):
    """Run the whole queue: at each decision instant, start jobs one at a time (which waiting
    job, on which candidate placement), optionally preempt or move running jobs, then stop.

    ## Description

    A discrete-event simulation of a hierarchical GPU cluster (GPU -> machine -> rack ->
    spine) runs a scenario. At every instant where something happened (an arrival, a finish,
    a wake-up, the stall retry) and where some decision is possible, the episode pauses and
    the agent takes decisions one step at a time; each step sees the state left by the
    previous ones (the GPUs it took). Action ``0`` ("no more starts now") hands the
    instant's decisions to the engine, which runs to the next decision instant. Instants
    where only ``0`` is valid are skipped (they cost no step). There is no base policy: the
    order, placement, preemption and migration are all the agent's.

    ## Action Space

    ``Discrete(1 + K*6)``, or ``Discrete(1 + K*6 + R*7)`` with ``preemption=True``:

    * ``0``: no more decisions at this instant.
    * ``1 + k*6 + c``: start the job in waiting slot ``k`` on candidate ``c`` (the six
      candidates of ``sim.offers``: machine, rack, network, fewest-machines, packed,
      first-fit, computed on the GPUs still free at this step).
    * ``1 + K*6 + r``: preempt the job in running slot ``r`` (checkpointed; it pays
      checkpoint + restore when it starts again). Valid only while some job waits, or, with
      ``requeue=True``, while some job waits or some GPU is free.
    * ``1 + K*6 + R + r*6 + c``: move the job in running slot ``r`` to candidate ``c`` (on the
      free GPUs, its own excluded): an engine migration (``move_as="migrate"``) or Dally
      4.3.1's relocation, a preemption immediately restarted there (``move_as="restart"``).

    A job touched at this instant (started, preempted, moved) cannot be acted on again at the same
    instant, so an instant always ends. One exception, ``requeue=True`` (Dally 4.3's preemption:
    "upon preemption, the job is reintroduced into the wait queue and remains there until it accepts
    another resource offer"): a job preempted at this instant goes back to the waiting slots at once
    (starvation 0, its GPUs free) and may be started again at this instant, on any free GPUs, its
    own included; it can be preempted only once and started only once per instant, so instants still
    end. ``action_masks()`` gives the valid actions (MaskablePPO convention). A masked action is
    treated as ``0`` with the ``invalid`` reward component of ``-invalid_penalty``, or is an error
    with ``invalid_action="raise"``.

    ## Observation Space

    Fixed size on any cluster. Slots: the ``K = max_waiting`` waiting jobs that could start
    now (demand <= free GPUs) with the highest priority under ``order``, then padding;
    the ``R = max_running`` running jobs first under ``running_order``: ``attained``
    (default: the most attained GPU-service first, the first a least-attained-service
    scheduler would preempt; ties: the latest started), ``recent`` (the latest started
    first), ``wide`` (jobs placed wider than the best tier they could have first, the widest tier
    first, then the earliest started: the ones a consolidating move helps). Default
    ``order="las"``: least attained GPU-service first, then the longest waiting, then job
    id (Tiresias's non-clairvoyant 2D-LAS priority, without queue discretization). Other
    orders: ``arrival``, ``nw_sens`` (Dally 4.3.1), ``demand`` (fewest GPUs first), ``srw``
    (shortest remaining work, only with ``known_durations=True``).

    * ``observation="flat"`` (default): ``Box(0, 1, (K*NW + R*NR + NG,), float32)`` with the
      waiting slots (``WAITING_FEATURES``), the running slots (``RUNNING_FEATURES``) and
      ``GLOBAL_FEATURES`` (cluster features and the waiting jobs left out of the slots).
    * ``observation="dict"``: a ``Dict`` of ``waiting`` (K, NW), ``running`` (R, NR),
      ``globals`` (NG,), and the cluster as nodes, ``machines`` (``max_machines``, 4: valid,
      free share, size, rack position) and ``racks`` (``max_racks``, 4), for set and graph
      policies (a machine's rack feature is its edge to the rack node).
    * ``observation="graph"``: the dict entries plus edges, with the network links as edge
      features (``envs.queue_obs``): ``running_machines`` (R, ``max_machines``: share of each
      machine's GPUs a running slot's job holds), ``machine_rack`` (``max_machines``, int,
      -1 = padding), ``machine_links`` (``max_machines``, ``MACHINE_LINK_FEATURES``: the
      machine's NICs, its edge to the ToR), ``rack_links`` (``max_racks``,
      ``RACK_LINK_FEATURES``: the rack's uplinks, its edge to the spine) and ``spine``
      (``SPINE_FEATURES``). Loads are the engine's now (0 with sharing off).

    No future information by default (v2): every feature is observed (the jobs' submission,
    what they attained, time waited and held, placements, the cluster and its links); job
    durations, progress and remaining work are hidden (``remaining_*`` are 0) and
    ``done_jobs`` is finished / arrived jobs. Oracle features: ``known_durations=True``
    fills ``remaining_work``/``remaining_time`` with the true values, and
    ``done_jobs_of="workload"`` (v0, v1) divides ``done_jobs`` by the episode's job count;
    either makes the env clairvoyant (``clairvoyant``), and an agent trained with it too.

    ## Rewards

    Named components in ``info["rewards"]`` weighted by ``reward_weights``: ``jct`` =
    -(jobs in the system) x elapsed time / ``reward_scale_s`` (summed over a finished episode:
    minus the total JCT), ``makespan``, ``comm`` as in Placement-v0, ``invalid`` = -penalty
    per masked action, and ``unfinished``, charged once when the episode ends with jobs left
    unfinished (a stall, or the ``max_sim_time_s`` horizon):

    * ``unfinished_penalty="serial"`` (v1, default): each unfinished job is charged ``D`` /
      scale, where ``D`` is the summed isolated remaining run time of ALL unfinished jobs
      (remaining iterations x the job's per-iteration time alone on the most consolidated
      placement of the empty cluster, as the ``ideal`` bound, plus any checkpoint/restore it
      still owes; true durations: the reward may use what the agent cannot see). So the
      episode costs each unfinished job its time in the system so far (the ``jct``
      component) plus ``D``: at least what a trivially serial schedule from the end would
      cost it (one job at a time, each alone on its best placement, which the agent can
      always play: the job finishing last in any order waits exactly ``D``). Why: a stall
      can then never pay off. At a stalling instant the agent could instead start that serial
      schedule, which costs each job at most ``D``; stalling costs the 24 idle retries
      (``jct``) plus ``D`` per job, strictly more. A fixed charge per job cannot promise
      this: v0's 168 h is less than the average JCT of heavy batch workloads (on
      ``dally-batch-2rack``, never starting anything scored -96,000, better than ``dally``,
      ``random`` and ``fcfs``). Tested: always-stop scores below ``fcfs`` and ``random`` on
      the heavy batch presets and a Poisson preset. At the ``max_sim_time_s`` horizon the
      same charge applies (a cut run must not score better than a finished one).
    * ``unfinished_penalty="fixed"`` (v0): ``unfinished_penalty_s`` (default 7 days) / scale
      per unfinished job.

    ## Starting State

    ``reset(seed)`` builds the workload of the scenario (or of one drawn from
    ``scenarios``) with that seed and runs to the first decision.

    ## Episode End

    Terminated when every job has finished. Episodes cannot stall: when the decisions leave
    waiting jobs, nothing running and nothing scheduled, the agent is asked again after
    ``wait_retry_s`` (3600 s), at most 24 times in a row; then the episode ends with the
    unfinished jobs charged as above. That stall ending is a real end of the episode under
    the env's rules, so v1 flags it ``terminated`` (``stall_end="terminated"``): a learner
    must not bootstrap a value on top of the charge. v0 (``stall_end="truncated"``) flagged it
    ``truncated``. Truncated (both versions) only when the scenario's ``max_sim_time_s``
    horizon stops the run (100 years by default). The final ``info["results"]`` is the
    results summary.

    ## Arguments

    ``scenario``, ``scenario_overrides``, ``scenarios`` (a list sampled per reset, see
    ``envs.sampling``), ``default_scenario`` (the preset used when neither of those is given:
    ``dally-poisson-4rack``; ``dally-groups-4rack-load12`` in v4), ``max_waiting`` (K, 16),
    ``max_running`` (R, 16), ``preemption`` (False; True in v4), ``requeue`` (False; see Action
    Space; no effect without preemption), ``move_as`` (``migrate``), ``running_order``
    (``attained``), ``order`` (``las``), ``known_durations`` (False), ``observation``
    (``flat``/``dict``/``graph``), ``max_machines`` (256) and ``max_racks`` (32) for the dict
    and graph observations, ``history_features`` (False; True in v4: see Version History),
    ``reward_weights``, ``reward_scale_s`` (3600), ``invalid_action`` (``stop``/``raise``),
    ``invalid_penalty`` (1), ``wait_retry_s`` (3600), ``unfinished_penalty`` (``serial``; v0
    ``fixed``), ``unfinished_penalty_s`` (only with ``fixed``; 604800), ``stall_end``
    (``terminated``; v0 ``truncated``), ``skip_trivial`` (True; False makes every engine instant
    a decision point, even when only ``0`` is valid: the native heuristics acting in the env use
    it, because they keep timers and wake-ups at every instant), ``done_jobs_of`` (``arrived``;
    ``workload`` in v0, v1), ``render_mode``, ``traces_dir``. Boolean arguments must be
    ``True``/``False``; ``scenario`` and ``scenarios`` exclude each other, as do
    ``scenario_overrides`` and ``scenarios``. ``reset(options=...)`` takes no options (``None``
    or ``{}``; anything else is an error).

    ## Version History

    * v4: Scheduler-v3 (``actions="per-job"``) with ``preemption=True`` and
      ``history_features=True``: every waiting and running slot gains ``HISTORY_FEATURES``
      (``envs.queue_obs``): the job's keyed history estimate of its remaining GPU-service and
      of its length (``sim.estimators``, method ``keyed``: the latest finished jobs of the same
      user and job name, else VC and GPU count, else VC, else all), how specific and how well
      supported that estimate is, and its virtual cluster's running and waiting GPU shares.
      Estimates read finished jobs only. Its default scenario (``default_scenario``, used when
      neither ``scenario`` nor ``scenarios`` is given) is ``dally-groups-4rack-load12``, whose
      jobs carry virtual clusters and recurring job groups with lengths that the history
      predicts in part, so that order matters and can be learnt; the other versions default to
      ``dally-poisson-4rack``. Preemption is on because plain MaskablePPO on v3's defaults
      (no preemption) learns to wait for consolidated placements, which is Dally's delay
      scheduling (``experiments/agents/ppo_defaults.py`` gives the measured runs).
    * v3: one job at a time (``actions="per-job"``, ``envs.per_job``), auto-start on a free
      best placement, the per-job preemption cap, a step limit and the ``shaping`` reward.
    * v2: ``done_jobs`` = finished / arrived jobs (``done_jobs_of="arrived"``); v0 and v1
      divide by the episode's job count (``done_jobs_of="workload"``) and warn when made.
    * v1: the ``unfinished`` charge is the serial bound (``unfinished_penalty="serial"``)
      instead of 7 days per job, and a stall ending is ``terminated``
      (``stall_end="terminated"``). Dynamics, observations and masks are those of v0 (an agent
      trained on v0 acts identically in v1); only the final reward and the end flag differ.
    * v0: initial version (``unfinished_penalty="fixed"``, ``stall_end="truncated"``; kept
      registered to reproduce earlier results, e.g. the shipped ``scheduler.zip``'s
      training). ``requeue`` (default False, so the default dynamics are unchanged) was added
      later for Dally's paper preemption.
    """

    env_name = "Scheduler-v2"
    lazy_moves = True
    """Fill the move actions' part of the mask only when something reads it (the mask, the
    observation, a move action; off: at every step; the decisions are the same, tested)."""
    cache_running_order = True
    """Order the running jobs once per decision instant and drop the decided ones from that
    order at each step (off: order them at every step; the same order, tested)."""

    def __init__(
        self,
        scenario: str | Path | Mapping[str, Any] | ScenarioConfig | None = None,
        *,
        max_waiting: int = 16,
        max_running: int = 16,
        preemption: bool = False,
        requeue: bool = False,
        move_as: str = "migrate",
        order: str = "las",
        running_order: str = "attained",
        known_durations: bool = False,
        observation: str = "flat",
        invalid_action: str = "stop",
        invalid_penalty: float = 1.0,
        wait_retry_s: float = 3600.0,
        unfinished_penalty_s: float | None = None,
        max_machines: int = 256,
        max_racks: int = 32,
        skip_trivial: bool = True,
        unfinished_penalty: str = "serial",
        stall_end: str = "terminated",
        actions: str = "slots",
        max_steps: int | None = None,
        max_preemptions_per_h: int | None = None,
        auto_start: bool | None = None,
        history_features: bool = False,
        **kwargs: Any,
    ) -> None:
        version_kw = {"unfinished_penalty": unfinished_penalty, "stall_end": stall_end,
                      "done_jobs_of": kwargs.get("done_jobs_of", "arrived"),
                      "actions": actions, "history_features": history_features}  # fmt: skip
        self.env_name = version_name("Scheduler", version_kw)
        check_kwargs(self.env_name, kwargs, SCHEDULER_KWARGS)
        name = self.env_name
        _choice(name, "unfinished_penalty", unfinished_penalty, UNFINISHED_PENALTIES)
        _choice(name, "stall_end", stall_end, STALL_ENDS)
        if unfinished_penalty_s is not None and unfinished_penalty != "fixed":
            raise ConfigError(
                f"{name}: unfinished_penalty_s applies only with unfinished_penalty='fixed' "
                f"(got {unfinished_penalty!r}: the charge is the serial bound)"
            )
        flags = {
            k: check_flag(name, k, v)
            for k, v in (("preemption", preemption), ("requeue", requeue),
                         ("known_durations", known_durations), ("skip_trivial", skip_trivial),
                         ("history_features", history_features))
        }  # fmt: skip
        super().__init__(scenario, **kwargs)
        for key, v in (("max_waiting", max_waiting), ("max_running", max_running),
                       ("max_machines", max_machines), ("max_racks", max_racks)):  # fmt: skip
            if not isinstance(v, int | np.integer) or isinstance(v, bool) or not 1 <= v <= 4096:
                raise ConfigError(f"{name}: {key} must be an integer in 1..4096, got {v!r}")
        _choice(name, "move_as", move_as, MOVE_MODES)
        _choice(name, "order", order, ORDERS)
        _choice(name, "running_order", running_order, RUNNING_ORDERS)
        _choice(name, "observation", observation, OBSERVATIONS)
        _choice(name, "invalid_action", invalid_action, ("stop", "raise"))
        _choice(name, "actions", actions, ACTION_DESIGNS)
        raw = {
            "max_steps": max_steps,
            "max_preemptions_per_h": max_preemptions_per_h,
            "auto_start": auto_start,
        }  # as given (None: the action design's default)
        per_job = actions == "per-job"
        if per_job and (flags["requeue"] or not flags["skip_trivial"]):
            raise ConfigError(
                f"{name}: actions='per-job' decides one job at a time; it takes requeue=False "
                "and skip_trivial=True (a preempted job waits until the next instant)"
            )
        if max_steps is None:
            max_steps = PER_JOB_MAX_STEPS if per_job else None
        if max_preemptions_per_h is None:
            max_preemptions_per_h = PER_JOB_MAX_PREEMPTIONS_PER_H if per_job else None
        for key, v in (("max_steps", max_steps), ("max_preemptions_per_h", max_preemptions_per_h)):
            if v is not None and (
                isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1
            ):
                raise ConfigError(f"{name}: {key} must be an integer >= 1 or None, got {v!r}")
        if auto_start is None:
            auto_start = per_job
        auto_start = check_flag(name, "auto_start", auto_start)
        if auto_start and not per_job:
            raise ConfigError(f"{name}: auto_start applies to actions='per-job' (Scheduler-v3)")
        if max_preemptions_per_h is not None and not per_job:
            raise ConfigError(
                f"{name}: max_preemptions_per_h applies to actions='per-job' (Scheduler-v3)"
            )
        if order == "srw" and not known_durations:
            raise ConfigError(f"{name}: order 'srw' needs known_durations=True (it uses them)")
        warn_leaks("Scheduler", name, version_kw)
        fixed_s = V0_FIXED_PENALTY_S if unfinished_penalty_s is None else unfinished_penalty_s
        for key, v in (("invalid_penalty", invalid_penalty), ("wait_retry_s", wait_retry_s),
                       ("unfinished_penalty_s", fixed_s)):  # fmt: skip
            if not (finite_number(v) and v >= 0):
                raise ConfigError(f"{name}: {key} must be a finite number >= 0, got {v!r}")
        if wait_retry_s <= 0:
            raise ConfigError(f"{name}: wait_retry_s must be > 0, got {wait_retry_s}")
        self.K, self.R = int(max_waiting), int(max_running)
        self.preemption = flags["preemption"]
        self.requeue = flags["requeue"] and self.preemption  # no effect without preemption
        self.move_as = move_as
        self.order = order
        self.running_order = running_order
        self.known_durations = flags["known_durations"]
        self.history_features = flags["history_features"]
        self.observation_kind = observation
        self.invalid_action = invalid_action
        self.invalid_penalty = float(invalid_penalty)
        self.wait_retry_s = float(wait_retry_s)
        self.unfinished_penalty = unfinished_penalty
        self.unfinished_penalty_s = float(fixed_s)
        self.stall_end = stall_end
        self.max_machines, self.max_racks = int(max_machines), int(max_racks)
        self.skip_trivial = flags["skip_trivial"]
        self.actions = actions
        self.per_job = per_job
        self.auto_start = auto_start
        if per_job and "shaping" not in (kwargs.get("reward_weights") or {}):
            self.reward_weights["shaping"] = PER_JOB_SHAPING  # v3's default
        self.max_steps = None if max_steps is None else int(max_steps)
        self.max_preemptions_per_h = (
            None if max_preemptions_per_h is None else int(max_preemptions_per_h)
        )
        self._init_kwargs.update(
            max_waiting=max_waiting, max_running=max_running, preemption=preemption,
            requeue=requeue,
            move_as=move_as, order=order, running_order=running_order,
            known_durations=known_durations,
            observation=observation, invalid_action=invalid_action,
            invalid_penalty=invalid_penalty, wait_retry_s=wait_retry_s,
            unfinished_penalty_s=unfinished_penalty_s, max_machines=max_machines,
            max_racks=max_racks, skip_trivial=skip_trivial,
            unfinished_penalty=unfinished_penalty, stall_end=stall_end, actions=actions,
            history_features=history_features, **raw,
        )  # fmt: skip
        if observation != "flat":
            self._check_node_limits()
        self.n_start = self.K * _C
        self.n_preempt = self.R if self.preemption else 0
        self.n_move = self.R * _C if self.preemption else 0
        if per_job:
            self.num_actions = 2 + _C  # the mask: the yes/no head, then the placement head
            self.action_space = gym.spaces.MultiDiscrete([2, _C])
        else:
            self.num_actions = 1 + self.n_start + self.n_preempt + self.n_move
            self.action_space = gym.spaces.Discrete(self.num_actions)
        ng = NG + (len(PHASE_FEATURES) if per_job else 0)
        nw, nr = (NW + NH, NR + NH) if self.history_features else (NW, NR)
        flat = self.K * nw + self.R * nr + ng
        self._graph_boxes = self._graph_spaces()
        if observation == "flat":
            self.observation_space = gym.spaces.Box(0.0, 1.0, (flat,), np.float32)
        else:
            box = gym.spaces.Box
            self.observation_space = gym.spaces.Dict(
                {
                    "waiting": box(0.0, 1.0, (self.K, nw), np.float32),
                    "running": box(0.0, 1.0, (self.R, nr), np.float32),
                    "globals": box(0.0, 1.0, (ng,), np.float32),
                    "machines": box(0.0, 1.0, (self.max_machines, len(MACHINE_FEATURES)),
                                    np.float32),
                    "racks": box(0.0, 1.0, (self.max_racks, len(RACK_FEATURES)), np.float32),
                    **(self._graph_boxes if observation == "graph" else {}),
                }
            )  # fmt: skip
        self._wbuf = np.zeros((self.K, nw), dtype=np.float32)
        self._rbuf = np.zeros((self.R, nr), dtype=np.float32)
        self._gbuf = np.zeros(ng, dtype=np.float32)
        self._point = False  # at a decision point
        self._stalled = False  # the episode ended by a stall (set at its end)
        self.instant_index = -1  # engine instants seen this episode
        self._mask = np.zeros(self.num_actions, dtype=bool)
        self._moves_due = False  # the move actions' part of the mask is still to be filled
        self._running_order: np.ndarray | None = None
        self.policy_stops_at_moves = False
        """Set by a native run whose policy answers STOP, and changes nothing, wherever only
        STOP and move actions are valid (``envs.native``): such a point is not offered."""
        self._pj: PerJob | None = None
        self._no_decision = False

    @property
    def clairvoyant(self) -> bool:
        """Whether the env reads ground truth: true remaining work in the observation
        (``known_durations``; the ``srw`` slot order needs it), or the episode's job count
        (``done_jobs_of="workload"``). An agent trained on it is clairvoyant too."""
        return self.known_durations or self.order == "srw" or self.done_jobs_of == "workload"

    def _check_node_limits(self) -> None:
        """The dict and graph observations hold ``max_machines``/``max_racks`` nodes: every
        cluster the env can draw must fit (checked here, not at the reset that draws it)."""
        if self._sampler is not None:
            sizes = self._sampler.largest()
        else:
            c = self.cluster
            sizes = [(f"scenario {self.scenario.name!r}", c.num_machines, c.num_racks)]
        for where, machines, racks in sizes:
            if machines > self.max_machines or racks > self.max_racks:
                raise ConfigError(
                    f"{self.env_name}: {where} has up to {machines} machines and {racks} racks; "
                    f"the {self.observation_kind} observation holds max_machines="
                    f"{self.max_machines}, max_racks={self.max_racks} (raise them)"
                )

    def _graph_spaces(self) -> dict[str, gym.spaces.Box]:
        """The entries ``observation="graph"`` adds to the dict observation."""
        m, r, box = self.max_machines, self.max_racks, gym.spaces.Box
        return {
            "running_machines": box(0.0, 1.0, (self.R, m), np.float32),
            "machine_rack": box(-1, r - 1, (m,), np.int64),
            "machine_links": box(0.0, 1.0, (m, len(MACHINE_LINK_FEATURES)), np.float32),
            "rack_links": box(0.0, 1.0, (r, len(RACK_LINK_FEATURES)), np.float32),
            "spine": box(0.0, 1.0, (len(SPINE_FEATURES),), np.float32),
        }

    # ------------------------------------------------------------------ episode
    def _make_base(self) -> Any:
        return _NoPolicy()

    def _first_instant(self, view: ClusterView) -> None:
        self.instant_index = -1
        self._touched: set[int] = set()
        self._requeued: list[int] = []  # preempted at this instant, not started again
        self._tmask = np.zeros(len(view.jobs), dtype=bool)  # jobs touched at this instant
        self._pj = PerJob(self) if self.per_job else None
        c = view.cluster
        if self.observation_kind != "flat" and (
            c.num_machines > self.max_machines or c.num_racks > self.max_racks
        ):
            raise ConfigError(
                f"{self.env_name}: cluster {c.name} has {c.num_machines} machines and "
                f"{c.num_racks} racks; the dict observation holds max_machines="
                f"{self.max_machines}, max_racks={self.max_racks} (raise them)"
            )
        self.obs_state = QueueObserver(
            view, self.known_durations, self.done_jobs_of, self.history_features
        )

    def attach(self, view: ClusterView) -> None:
        """Decide inside a native run (``envs.native.QueuePolicyScheduler``): the env reads
        that run's engine; its ``_decide`` then builds the same decision points."""
        self.engine, self.view = view._e, view
        self._first_instant(view)
        self._at = self

    def _decide(self, view: ClusterView) -> Generator[Any, int, Any]:
        self._plan: Plan = view.plan()
        self.instant_index += 1
        self.obs_state.new_instant()
        if self._touched:
            self._tmask[list(self._touched)] = False
        self._touched = set()
        self._requeued = []
        self._n_started = 0  # running-job count change at this instant
        self._decisions = 0
        self._running_order = None  # this instant's, made when first needed
        if self._pj is not None:
            return (yield from self._decide_per_job())
        if self.policy_stops_at_moves and not self.engine.waiting:
            return self._plan.actions  # no job waits: only STOP and moves could be valid
        while True:
            if (
                not self._refresh()
                and (self.skip_trivial or self._decisions)
                and (self.policy_stops_at_moves or not self._any_move())
            ):
                break
            a = yield self
            if a == STOP:
                break
            self._apply(a)
            self._decisions += 1
        self._point = False
        return self._plan.actions

    def _decide_per_job(self) -> Generator[Any, Any, Any]:
        """One instant of per-job decisions (``envs.per_job``)."""
        pj = self._pj
        assert pj is not None
        pj.new_instant()
        while pj.refresh():
            a = yield self
            pj.apply(a)
            self._decisions += 1
        self._point = False
        return self._plan.actions

    def wake_up(self, at_s: float) -> None:
        """Ask for a decision instant at simulated time ``at_s`` (sent with this instant's
        decisions; heuristics with timers use it)."""
        if not self._point:
            raise gym.error.ResetNeeded("wake_up() is only valid at a decision point")
        self._plan.wake_up(float(at_s))

    # ------------------------------------------------------------------ slots and mask
    def _priority(self, ids: np.ndarray) -> np.ndarray:
        """``ids`` sorted by ``order`` (documented in the class docstring)."""
        e = self.engine
        since = e.wait_since[ids]
        attained = e.attained[ids]
        rq = self._requeued_mask(ids)
        if rq is not None:  # back in the wait queue from now, counters brought up to now
            since = since.copy()
            since[rq] = e.now
            attained = attained.copy()
            attained[rq] = self.view.live(ids[rq])[2]
        if self.order == "las":
            keys: tuple = (ids, since, attained)
        elif self.order == "arrival":
            keys = (ids, self.obs_state.arrival[ids])
        elif self.order == "demand":
            keys = (ids, since, self.obs_state.demand[ids])
        elif self.order == "nw_sens":
            done, run = e.done_iters[ids], e.run_s[ids]
            if rq is not None:
                done, run = done.copy(), run.copy()
                done[rq], run[rq], _ = self.view.live(ids[rq])
            nws = np.ones(ids.size)
            ran = run > 0
            nws[ran] = done[ran] * self.obs_state.compute[ids[ran]] / run[ran]
            keys = (ids, since, nws)
        else:  # srw
            o = self.obs_state
            left = np.maximum(o.iters[ids] - e.done_iters[ids], 0.0) * o.compute[ids]
            keys = (ids, since, left * o.demand[ids])
        return ids[np.lexsort(keys)]

    def _requeued_mask(self, ids: np.ndarray) -> np.ndarray | None:
        """Which of ``ids`` were preempted at this instant (``requeue``); None if none."""
        if not self._requeued:
            return None
        rq = np.isin(ids, self._requeued)
        return rq if rq.any() else None

    def _running_priority(self, ids: np.ndarray) -> np.ndarray:
        """Running jobs in ``running_order`` (documented in the class docstring)."""
        e = self.engine
        recent = -e.last_start[ids]
        if self.running_order == "recent":
            return ids[np.lexsort((ids, recent))]
        if self.running_order == "attained":
            att = e.attained[ids] + (e.now - e.last_update[ids]) * e.alloc_n[ids]  # live
            return ids[np.lexsort((ids, recent, -att))]
        o = self.obs_state
        tier = o.tier[ids]
        wide = tier > o.best[ids]
        return ids[np.lexsort((ids, -recent, -tier, ~wide))]

    def _refresh(self) -> bool:
        """Slots, candidate masks and the action mask for the current plan (the move actions'
        part left to ``_fill_moves``); False when no start or preemption is valid."""
        e, plan = self.engine, self._plan
        assert e is not None
        nf = plan.num_free
        touched = self._touched
        demand = self.obs_state.demand
        waiting = np.fromiter(e.waiting, dtype=np.int64, count=len(e.waiting))
        tmask = self._tmask
        if touched and waiting.size:
            waiting = waiting[~tmask[waiting]]
        if self._requeued:
            waiting = np.concatenate((waiting, np.asarray(self._requeued, dtype=np.int64)))
        wd = demand[waiting]
        ok = wd <= nf
        if self.skip_trivial and not self.preemption and not ok.any():
            return False  # nothing can start: skip the slots and masks
        fits, hidden = waiting[ok], waiting[~ok]
        if fits.size > self.K:
            ordered = self._priority(fits)
            slots, hidden = ordered[: self.K], np.concatenate((hidden, ordered[self.K :]))
        else:
            slots = self._priority(fits) if fits.size > 1 else fits
        self._offers: dict[int, Offer] = {}
        cand = self._candidate_masks(demand[slots], nf)
        running = self._running_order if self.cache_running_order else None
        if running is None:  # the engine's running jobs and their keys hold for the instant
            running = np.fromiter(e.running, dtype=np.int64, count=len(e.running))
            if running.size > 1:
                running = self._running_priority(running)
            self._running_order = running
        if touched and running.size:  # ids break ties: the order of a subset is a subset
            running = running[~tmask[running]]
        running = running[: self.R]
        self._slots_w, self._slots_r, self._hidden = slots, running, hidden
        self._cand = cand
        self._move = np.zeros((running.size, _C), dtype=bool)
        m = self._mask
        m[:] = False
        m[STOP] = True
        m[1 : 1 + slots.size * _C] = cand.reshape(-1)
        if self.preemption and running.size:
            b = 1 + self.n_start
            m[b : b + running.size] = bool(waiting.size) or (self.requeue and nf > 0)
        self._point = True
        self._moves_due = bool(self.preemption and nf and running.size)
        if not self.lazy_moves:
            self._fill_moves()
        return bool(m[1:].any())

    @property
    def _move_base(self) -> int:
        """The index of the first move action."""
        return 1 + self.n_start + self.n_preempt

    def _any_move(self) -> bool:
        """Whether a move action is valid now."""
        self._fill_moves()
        return bool(self._mask[self._move_base :].any())

    def _fill_moves(self) -> None:
        """The move actions' candidates (``_move``) and their part of the mask, left out by
        ``_refresh`` until something reads them (one placement search per distinct demand of
        the running slots, which policies that never move jobs do not need)."""
        if not self._moves_due:
            return
        self._moves_due = False
        running = self._slots_r
        rd = self.obs_state.demand[running]
        move = self._move
        for d in np.unique(rd).tolist():
            move[rd == d] = self._offer(d).mask[1:]
        b = self._move_base
        self._mask[b : b + running.size * _C] = move.reshape(-1)

    def allowed(self, action: int) -> bool:
        """Whether ``action`` (an index in the action space) is valid now: ``action_masks()
        [action]`` without building the whole mask."""
        if self._at is None or self._pj is not None:
            return bool(self.action_masks()[action])
        if action >= self._move_base:
            self._fill_moves()
        return bool(self._mask[action])

    def _candidate_masks(self, sd: np.ndarray, nf: int) -> np.ndarray:
        """``Offer(plan, demand).mask[1:]`` for every waiting slot's demand ``sd`` (all <=
        the free GPUs ``nf``), vectorized from the free-GPU counts; only ``fewest-machines``
        for jobs larger than a machine needs a placement search (one per distinct demand)."""
        cand = np.zeros((sd.size, _C), dtype=bool)
        if sd.size == 0:
            return cand
        plan = self._plan
        on_machine = sd <= int(plan.free_per_machine.max())
        cand[:, MACHINE - 1] = on_machine
        cand[:, RACK - 1] = sd <= int(plan.free_per_rack.max())
        cand[:, NETWORK - 1] = cand[:, PACKED - 1] = cand[:, FIRST_FIT - 1] = True
        cand[:, FEWEST_MACHINES - 1] = on_machine
        big = sd > self.engine.cluster.max_gpus_per_machine
        if big.any():
            for d in set(sd[big].tolist()):
                cand[sd == d, FEWEST_MACHINES - 1] = self._offer(d).mask[FEWEST_MACHINES]
        return cand

    def _offer(self, demand: int) -> Offer:
        """The candidates for ``demand`` GPUs on the plan now (cached per step)."""
        o = self._offers.get(demand)
        if o is None:
            o = self._offers[demand] = Offer(self._plan, -1, demand, 0.0, (0.0, 0.0))
        return o

    def decode(self, action: Any) -> tuple[str, int, int]:
        """``(kind, job, candidate)`` of an action at this decision point: kind is
        ``stop``, ``start``, ``preempt`` or ``move`` (per-job actions: ``start``, ``defer``,
        ``preempt``, ``keep``); candidate is 1..6 (``sim.offers``) or 0."""
        if self._pj is not None:
            return self._pj.decode(action)
        if action == STOP:
            return "stop", -1, 0
        a = action - 1
        if a < self.n_start:
            k, c = divmod(a, _C)
            job = int(self._slots_w[k]) if k < self._slots_w.size else -1
            return "start", job, c + 1
        a -= self.n_start
        if a < self.n_preempt:
            return "preempt", int(self._slots_r[a]) if a < self._slots_r.size else -1, 0
        a -= self.n_preempt
        r, c = divmod(a, _C)
        return "move", int(self._slots_r[r]) if r < self._slots_r.size else -1, c + 1

    def encode(self, kind: str, job: int, candidate: int = 0) -> int | None:
        """The action index of ``(kind, job, candidate)`` now, None if the job is in no
        slot (inverse of ``decode``)."""
        if kind == "stop":
            return STOP
        if kind == "start":
            k = np.flatnonzero(self._slots_w == job)
            return None if k.size == 0 else 1 + int(k[0]) * _C + candidate - 1
        r = np.flatnonzero(self._slots_r == job)
        if r.size == 0 or not self.preemption:
            return None
        if kind == "preempt":
            return 1 + self.n_start + int(r[0])
        return 1 + self.n_start + self.R + int(r[0]) * _C + candidate - 1

    def candidate_gpus(self, demand: int, candidate: int) -> np.ndarray | None:
        """GPUs of ``candidate`` (1..6) for ``demand`` GPUs at this decision point."""
        return self._offer(demand).placement(candidate)

    def _apply(self, action: int) -> None:
        kind, job, c = self.decode(action)
        plan = self._plan
        n = int(self.obs_state.demand[job])
        if kind == "preempt":
            plan.preempt(job)
            self._n_started -= 1
            if self.requeue:
                self._requeued.append(job)
        else:
            if kind == "start" and self._requeued and job in self._requeued:
                self._requeued.remove(job)
            self._n_started += kind == "start"
            gpus = self._offer(n).placement(c)
            assert gpus is not None
            if kind == "start":
                plan.start(job, gpus)
            elif self.move_as == "migrate":
                plan.migrate(job, gpus)
            else:
                plan.preempt(job)
                plan.start(job, gpus)
            self.obs_state.note_placement(job, gpus)
        self._touched.add(job)
        self._tmask[job] = True

    # ------------------------------------------------------------------ gym API
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        check_reset_options(self.env_name, options, seed)
        super().reset(seed=seed)
        self._point = False
        self._at = self._start(self._episode_seed_for(seed))
        # a run that needs no decision at all (Scheduler-v3's auto-start can start every job):
        # reset returns its end and the next step, any valid action, ends the episode with
        # the whole run's reward, so that an episode always has at least one step
        self._no_decision = self._at is None
        return self._observe(), self._info({})

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self._gen is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if self._at is None and self._no_decision:  # the run needed no decision: one step ends it
            self._no_decision = False
            self._per_job_action(action) if self._pj is not None else self._check_action(action)
            reward, comps = self._take_rewards()
            return self._observe(), reward, True, False, self._info({"rewards": comps})
        if self._at is None:
            raise gym.error.ResetNeeded("the episode is over; call reset()")
        a = self._per_job_action(action) if self._pj is not None else self._check_action(action)
        if self._pj is None and not self.allowed(a):
            if self.invalid_action == "raise":
                kind, job, c = self.decode(a)
                raise InvalidActionError(
                    f"{self.env_name}: action {a} ({kind} job {job}"
                    f"{' on ' + CANDIDATE_NAMES[c - 1] if c else ''}) is masked; valid: "
                    f"{np.flatnonzero(self.action_masks()).tolist()}"
                )
            self._pending["invalid"] -= self.invalid_penalty
            a = STOP
        self._actions.append(a)
        self._at = self._advance(a)
        self._steps += 1
        if self._at is not None and self.max_steps is not None and self._steps >= self.max_steps:
            self._at = self._cut()  # the step limit: truncated, unfinished jobs charged
        obs = self._observe()
        reward, comps = self._take_rewards()
        terminated = truncated = False
        if self.results is not None:
            truncated = self.results.summary.get("jobs_unfinished", 0) > 0
            if truncated and self.stall_end == "terminated" and self._stalled:
                truncated = False  # v1: the stall ending is the episode's real end
            terminated = not truncated
        return obs, reward, terminated, truncated, self._info({"rewards": comps})

    def _per_job_action(self, action: Any) -> np.ndarray:
        """A checked ``MultiDiscrete([2, 6])`` action; a masked one becomes "defer"/"keep"
        with the ``invalid`` penalty, or is an error with ``invalid_action="raise"``."""
        arr = np.asarray(action)
        if arr.size != 2 or arr.dtype.kind not in "iuf":
            raise InvalidActionError(f"{self.env_name}: expected an action (act, candidate) "
                                     f"with act in 0..1 and candidate in 0..{_C - 1}, got "
                                     f"{action!r}")  # fmt: skip
        flat = arr.reshape(-1)
        if arr.dtype.kind == "f" and not (np.isfinite(flat).all() and (flat == flat.round()).all()):
            raise InvalidActionError(f"{self.env_name}: action {action!r} is not two integers")
        a = flat.astype(np.int64)
        if not (0 <= a[0] <= 1 and 0 <= a[1] < _C):
            raise InvalidActionError(f"{self.env_name}: action {a.tolist()} is out of range; "
                                     f"act is 0..1, candidate 0..{_C - 1}")  # fmt: skip
        assert self._pj is not None
        if not self._pj.valid(a):
            if self.invalid_action == "raise":
                kind, job, c = self._pj.decode(a)
                raise InvalidActionError(
                    f"{self.env_name}: action {a.tolist()} ({kind} job {job}"
                    f"{' on ' + CANDIDATE_NAMES[c - 1] if c else ''}) is masked; valid "
                    f"candidates now: {np.flatnonzero(self._mask[2:]).tolist()}"
                )
            self._pending["invalid"] -= self.invalid_penalty
            a = self._pj.default()
        return a

    def _check_action(self, action: Any) -> int:
        arr = np.asarray(action)
        n = self.num_actions
        if arr.size != 1:
            raise InvalidActionError(f"{self.env_name}: expected one action in 0..{n - 1}, "
                                     f"got {action!r}")  # fmt: skip
        v = arr.reshape(()).item()
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise InvalidActionError(f"{self.env_name}: action {v!r} is not an integer in "
                                     f"0..{n - 1}")  # fmt: skip
        if isinstance(v, float) and (not math.isfinite(v) or v != int(v)):
            raise InvalidActionError(f"{self.env_name}: action {v!r} is not an integer in "
                                     f"0..{n - 1}")  # fmt: skip
        if not 0 <= int(v) < n:
            raise InvalidActionError(f"{self.env_name}: action {int(v)} is out of range; "
                                     f"actions are 0..{n - 1}")  # fmt: skip
        return int(v)

    def action_masks(self) -> np.ndarray:
        """Valid actions now (MaskablePPO convention); only STOP at the end."""
        if self._at is None:
            m = np.zeros(self.num_actions, dtype=bool)
            m[STOP] = True
            if self._pj is not None:
                m[2] = True  # one valid value per head
            return m
        self._fill_moves()
        return self._mask.copy()

    def valid_or_default(self, action: Any) -> Any:
        """``action`` if it is valid now, else the "no" answer (stop, defer or keep; a start
        on the most consolidated candidate where defer is masked): how a native run treats a
        masked choice."""
        if self._pj is not None:
            a = np.asarray(action).reshape(-1).astype(np.int64)
            if a.size == 2 and 0 <= a[0] <= 1 and 0 <= a[1] < _C and self._pj.valid(a):
                return a
            return self._pj.default()
        a = int(np.asarray(action))
        return a if 0 <= a < self._mask.size and self.allowed(a) else STOP

    def _restore(self, seed: int, actions: list[Any]) -> None:
        self._at = self._start(seed)
        self._no_decision = self._at is None and not actions
        for a in actions:
            self._actions.append(a)
            self._at = self._advance(a)
            self._steps += 1
        if self._at is not None and self.max_steps is not None and self._steps >= self.max_steps:
            self._at = self._cut()
        if actions:  # the last step took its rewards; with none, reset's accrual stays
            self._pending = dict.fromkeys(self._pending, 0.0)

    def _episode_end_rewards(self) -> None:
        """The ``unfinished`` charge (class docstring, Rewards) and whether the run stalled."""
        assert self.engine is not None
        self._stalled = stalled(self.engine)
        left = self.results.summary.get("jobs_unfinished", 0) if self.results else 0
        if not left:
            return
        if self.unfinished_penalty == "fixed":
            charge_s = left * self.unfinished_penalty_s
        else:
            rem = serial_remaining_s(self.engine, self._iter_s)
            charge_s = rem.size * float(rem.sum())
        self._pending["unfinished"] -= charge_s / self.reward_scale_s

    # ------------------------------------------------------------------ observation
    def _observe(self) -> Any:
        if self._at is None:
            self._wbuf[:] = 0.0
            self._rbuf[:] = 0.0
            self._gbuf[:] = 0.0
        else:
            o = self.obs_state
            now = self.engine.now
            self._fill_moves()
            o.waiting_block(self._slots_w, self._cand, self._wbuf, now,
                            self._requeued_mask(self._slots_w))  # fmt: skip
            o.running_block(self._slots_r, self._move, self._rbuf, now)
            n_run = len(self.engine.running) + self._n_started
            o.global_block(self._gbuf, self._plan, self._slots_w, self._hidden, n_run, now,
                           self._decisions)  # fmt: skip
            if self._pj is not None:
                self._gbuf[NG:] = self._pj.phase_features()
        if self.observation_kind == "flat":
            return np.concatenate((self._wbuf.reshape(-1), self._rbuf.reshape(-1), self._gbuf))
        machines = np.zeros((self.max_machines, len(MACHINE_FEATURES)), dtype=np.float32)
        racks = np.zeros((self.max_racks, len(RACK_FEATURES)), dtype=np.float32)
        if self._at is not None:
            self.obs_state.machines_block(machines, racks, self._plan)
        obs = {
            "waiting": self._wbuf.copy(),
            "running": self._rbuf.copy(),
            "globals": self._gbuf.copy(),
            "machines": machines,
            "racks": racks,
        }
        if self.observation_kind == "graph":
            graph = {k: np.zeros(b.shape, dtype=b.dtype) for k, b in self._graph_boxes.items()}
            if self._at is not None:
                self.obs_state.graph_block(self._slots_r, graph)
            obs.update(graph)
        return obs

    def _info(self, info: dict[str, Any]) -> dict[str, Any]:
        if self._at is not None:
            info["waiting_slots"] = self._slots_w.tolist()
            info["running_slots"] = self._slots_r.tolist()
            self._fill_moves()
            info["action_mask"] = self._mask.copy()
            if self._pj is not None:
                info["focus"] = self._pj.focus_info()
        info["time_s"] = self.engine.now if self.engine is not None else 0.0
        return self._final_info(info)


class _NoPolicy:
    """The engine's policy slot in Scheduler-v0 (the agent decides everything)."""

    name = "none (the agent takes every decision)"

    def reset(self, view: ClusterView, rng: np.random.Generator) -> None:
        """Nothing to set up."""

    def schedule(self, view: ClusterView) -> list[Any]:  # pragma: no cover - env drives
        raise RuntimeError("Scheduler-v0 decides through the env, not schedule()")


def _choice(env: str, key: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ConfigError(f"{env}: {key} must be one of {', '.join(allowed)}; got {value!r}")
