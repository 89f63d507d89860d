"""``DLCluster/Placement-v3`` (and ``-v2``, ``-v1``, ``-v0``): the agent answers resource
offers (wait, or a candidate).

Version history (details in ``PlacementEnv``'s docstring): v3 replaces the two features that
read job lengths (``job.progress``, ``job.remaining_work``) by estimates from observable facts
(``known_durations=False``); v2 is v3 with the true values (``known_durations=True``); v1 is
v2 with ``done_jobs`` over all jobs of the workload; v0 is v1 without the wait limit.
"""

from __future__ import annotations

import math
from collections.abc import Generator, Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from dlcluster_gym.cluster.topology import Cluster, Tier
from dlcluster_gym.config import ScenarioConfig
from dlcluster_gym.envs.base import (
    COMMON_KWARGS,
    ClusterEnv,
    check_flag,
    check_kwargs,
    check_mapping,
    check_reset_options,
    finite_number,
)
from dlcluster_gym.envs.features import CLUSTER_FEATURES, ClusterFeatures, time_feature
from dlcluster_gym.envs.versions import version_name, warn_leaks
from dlcluster_gym.errors import ConfigError, InvalidActionError
from dlcluster_gym.perf.network import comm_overhead, net_params
from dlcluster_gym.scheduler import is_clairvoyant, make_policy
from dlcluster_gym.sim.estimators import remaining_iterations_of
from dlcluster_gym.sim.offers import ACTION_NAMES, NUM_ACTIONS, NUM_CANDIDATES, WAIT, Offer
from dlcluster_gym.sim.view import ClusterView
from dlcluster_gym.workload.models import ModelProfile

# Where each feature comes from: "observed" (what a real scheduler sees: the job's submission,
# what it has attained, the base policy's state), "estimate" (sim.estimators from observable
# facts), "oracle" (ground truth, only with known_durations=True).
JOB_FEATURES: tuple[str, ...] = (
    "demand",  # observed: log2(GPUs) / 8
    "fits_machine",  # observed: 1 if the job fits on one machine of this cluster
    "fits_rack",  # observed: 1 if it fits in one rack
    "sens_machine",  # observed: exposed comm / compute of its model at each tier, f / (1 + f)
    "sens_rack",  # (network_sensitivity: its machine groups' network; 0 under ideal)
    "sens_network",
    "starvation",  # observed: time since it entered the wait queue (log scale, 1 = a week)
    "past_machine_timer",  # observed: 1 if starvation >= the base policy's machine timer
    "past_rack_timer",  # observed: 1 if starvation >= the rack timer
    "machine_timer",  # observed: the timers (log scale)
    "rack_timer",
    # estimate: iterations done / (done + estimated remaining), the remaining iterations from
    # the finished jobs' lengths (sim.estimators.remaining_iterations, method "history": as
    # many again as done where no finished job is longer; 0 for a job that has not run);
    # oracle: done / total
    "progress",
    "nw_sens",  # observed: ideal compute time of the work done / time held (1: new)
    "preemptions",  # observed: min(preemptions / 10, 1)
    "high_skew",  # observed: 1 if Tiresias calls its model high-skew
    # estimate: log1p(estimated remaining ideal GPU-hours) / log1p(10^4), the same estimate
    # as progress (0 for a job that has not run while no job has finished); oracle: the true
    # remaining GPU-hours
    "remaining_work",
    "victims",  # observed: jobs the base policy preempted for this offer, min(n / 8, 1)
)
CANDIDATE_FEATURES: tuple[str, ...] = (  # all observed (the cluster and network model)
    "valid",
    "tier_machine",  # one-hot tier of the placement
    "tier_rack",
    "tier_network",
    "comm",  # predicted exposed comm / compute, f / (1 + f)
    "link_load",  # max over crossed links of (peak demand incl. this job) / capacity, / 2
)
_NJ, _NC, _NK = len(JOB_FEATURES), len(CANDIDATE_FEATURES), len(CLUSTER_FEATURES)
OBS_SIZE = _NJ + NUM_CANDIDATES * _NC + _NK


def _obs_index() -> dict[str, int]:
    idx = {f"job.{k}": i for i, k in enumerate(JOB_FEATURES)}
    for c in range(NUM_CANDIDATES):
        for i, k in enumerate(CANDIDATE_FEATURES):
            idx[f"{ACTION_NAMES[c + 1]}.{k}"] = _NJ + c * _NC + i
    for i, k in enumerate(CLUSTER_FEATURES):
        idx[f"cluster.{k}"] = _NJ + NUM_CANDIDATES * _NC + i
    return idx


OBS_INDEX: dict[str, int] = _obs_index()
VALID_INDEX = np.array([OBS_INDEX[f"{n}.valid"] for n in ACTION_NAMES[1:]])
PLACEMENT_KWARGS = (*COMMON_KWARGS, "base_policy", "base_params", "invalid_action",
                    "invalid_penalty", "wait_retry_s", "wait_limit", "known_durations")  # fmt: skip
WAIT_LIMITS: tuple[str, ...] = ("rack_timer", "none")
_LOG_WORK = math.log1p(1e4)
_NO_CANDIDATE = [0.0] * _NC  # an absent candidate's features
_TIER_ONE_HOT = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))  # machine, rack, network


def _split(total: int, parts: int) -> tuple[int, ...]:
    q, r = divmod(total, parts)
    return tuple(q + 1 if i < r else q for i in range(parts))


def _packed(total: int, per_machine: int) -> tuple[int, ...]:
    full, rest = divmod(total, per_machine)
    return (per_machine,) * full + ((rest,) if rest else ())


@lru_cache(maxsize=4096)
def _sensitivity(
    profile: ModelProfile, d: int, gpm: int, mpr: int, racks: int, links: tuple
) -> tuple[float, float, float]:
    """Exposed comm / compute of ``d`` GPUs on one machine, spread over one rack's machines,
    and split across two racks (canonical placements); a tier the job cannot have takes the
    value of the nearest one it can."""
    if d <= 1:
        return 0.0, 0.0, 0.0
    m = comm_overhead(profile, ((d,),), links) if d <= gpm else None
    k = max(2, -(-d // gpm))
    r = comm_overhead(profile, (_split(d, k),), links) if k <= mpr else None
    halves = _split(d, 2)
    n = (
        comm_overhead(profile, tuple(_packed(h, gpm) for h in halves), links)
        if racks >= 2
        else None
    )
    if m is None and r is None and n is None:
        return 0.0, 0.0, 0.0  # no placement at all: a job larger than the cluster (dropped)
    r = r if r is not None else n if n is not None else m
    n = n if n is not None else r
    m = m if m is not None else r
    return tuple(f / (1.0 + f) for f in (m, r, n))  # type: ignore[return-value]


def _group_shape_args(cluster: Cluster, gpu_type: str | None) -> tuple[tuple[float, tuple], ...]:
    """``(weight, shape args of _sensitivity)`` per distinct network of the machine groups a
    job of ``gpu_type`` can run on (every GPU group when None), weights by GPU count.

    A group's args are its GPUs per machine, machines per rack and network parameters
    (``perf.network.net_params``: what the engine prices a placement in that group with), and
    the racks of all candidate groups (a job may span them). Cached on the cluster."""
    cache: dict = cluster.__dict__.setdefault("_sensitivity_groups", {})
    got = cache.get(gpu_type)
    if got is not None:
        return got
    groups = cluster.config.groups
    gpu = [g for g, grp in enumerate(groups) if grp.gpus_per_machine > 0]
    cand = [g for g in gpu if gpu_type is None or groups[g].gpu_type == gpu_type] or gpu
    racks = sum(groups[g].racks for g in cand)
    weight: dict[tuple, float] = {}
    for g in cand:
        grp = groups[g]
        key = (grp.gpus_per_machine, grp.machines_per_rack, racks, net_params(cluster, g))
        gpus = grp.racks * grp.machines_per_rack * grp.gpus_per_machine
        weight[key] = weight.get(key, 0.0) + gpus
    total = sum(weight.values())
    got = cache[gpu_type] = tuple((w / total, key) for key, w in weight.items())
    return got


def network_sensitivity(
    cluster: Cluster, profile: ModelProfile, d: int, gpu_type: str | None, ideal: bool
) -> tuple[float, float, float]:
    """The ``sens_*`` features of a job of ``d`` GPUs: the engine's exposed comm / compute
    of its model on canonical placements (one machine, one rack, two racks; ``f / (1 + f)``),
    priced with the network of the machine groups it can run on (``gpu_type``; the
    GPU-weighted mean where those groups' networks differ: a choice, the job may land in any
    of them); all 0 under ``network: ideal``, where the engine charges no communication."""
    if ideal:
        return 0.0, 0.0, 0.0
    args = _group_shape_args(cluster, gpu_type)
    if len(args) == 1:  # one network (every homogeneous cluster): the value itself
        return _sensitivity(profile, d, *args[0][1])
    mean = sum(w * np.asarray(_sensitivity(profile, d, *a)) for w, a in args)
    return float(mean[0]), float(mean[1]), float(mean[2])


class PlacementObserver:
    """Builds Placement observations of offers made in one engine run (used by the env, and
    by ``OfferPolicyScheduler`` to let an env policy act in a native run). ``known_durations``
    fills ``job.progress``/``job.remaining_work`` with the true values (Placement-v0..v2);
    otherwise they are estimates from the finished jobs' history (v3)."""

    cache_tiers = True
    """Remember (tier, exposed comm) per model and GPU set: offers repeat candidates."""

    def __init__(
        self, view: ClusterView, done_of: str = "arrived", known_durations: bool = False
    ) -> None:
        self.view = view
        self.engine = view._e
        self.known_durations = bool(known_durations)
        c: Cluster = view.cluster
        self.cluster = c
        # per-run constants over the engine's job list (observed facts: each job's model)
        self._profiles = [self.engine.profile(j) for j in range(len(self.engine.jobs))]
        index: dict = {}
        self._profile_ix = [index.setdefault(p, len(index)) for p in self._profiles]
        self._tier_cache: dict[tuple[int, bytes], tuple[int, float]] = {}
        self._skew = np.array([p.skew == "high" for p in self._profiles], dtype=np.float32)
        self._sens: dict[int, tuple[float, float, float]] = {}
        self._ideal = self.engine.scenario.network == "ideal"
        self._cluster = ClusterFeatures(view, done_of)
        # Cluster features read the engine's state, which no offer of one instant changes
        # (offers work on a scratch plan): computed once per instant (the engine's event
        # count tells instants apart: every instant pops at least one event).
        self._feat = np.zeros(_NK, dtype=np.float32)
        self._feat_list: list[float] = []
        self._feat_at = -1

    def _tier_comm(self, job: int, gpus: np.ndarray) -> tuple[int, float]:
        """(tier, exposed comm / compute) of ``job`` on ``gpus``: the engine's own
        ``comm_fraction`` (memoized there, so the start that follows an offer reuses it)."""
        e, c = self.engine, self.cluster
        if gpus.size <= 1:
            return int(Tier.MACHINE), 0.0
        adaptive = e.par is not None and e.par_jobs[job]
        key = (self._profile_ix[job], gpus.tobytes())
        got = self._tier_cache.get(key) if self.cache_tiers and not adaptive else None
        if got is not None:  # a pure function of the model and the GPUs: offers repeat them
            return got
        got = int(c.placement_tier(gpus)), e.comm_fraction(job, gpus)
        if adaptive:
            return got
        if len(self._tier_cache) >= 65536:
            self._tier_cache.clear()
        self._tier_cache[key] = got
        return got

    def observe(self, offer: Offer) -> np.ndarray:
        """The observation of ``offer`` (a new array)."""
        view = self.view
        c = self.cluster
        e = self.engine
        job, d = offer.job, offer.demand
        spec = view.jobs[job]
        # offers go to waiting jobs, whose counters are current (no live extrapolation)
        done_i, run_s = float(e.done_iters[job]), float(e.run_s[job])
        t_mc, t_rk = offer.timers
        starv = offer.starvation_s
        sens = self._sens.get(job)
        if sens is None:
            sens = self._sens[job] = network_sensitivity(
                c, self._profiles[job], d, spec.gpu_type, self._ideal
            )
        if self.known_durations:  # the oracle features (true length, simulator side)
            total = float(e.jobs[job].iterations)
            progress = done_i / total
            left = total - done_i
        else:  # estimates from the finished jobs' lengths (sim.estimators, "history")
            left = remaining_iterations_of(view.history, spec.compute_s, done_i)
            progress = done_i / (done_i + left) if done_i + left > 0 else 0.0
        remaining_gpu_h = left * spec.compute_s * d / 3600.0
        # features as Python numbers, converted to float32 once (the same rounding as
        # element-wise stores into a float32 array)
        o = [
            min(math.log2(d) / 8.0, 1.0),
            d <= c.max_gpus_per_machine,
            d <= c.max_gpus_per_rack,
            *sens,
            time_feature(starv),
            starv >= t_mc,
            starv >= t_rk,
            time_feature(t_mc),
            time_feature(t_rk),
            progress,
            min(done_i * spec.compute_s / run_s, 1.0) if run_s > 0 else 1.0,
            min(float(view.preemptions[job]) / 10.0, 1.0),
            self._skew[job],
            min(math.log1p(max(remaining_gpu_h, 0.0)) / _LOG_WORK, 1.0),
            min(offer.victims / 8.0, 1.0),
        ]
        seen: dict[bytes, list] = {}
        contention = e.links is not None
        mask = offer.mask.tolist()
        for a in range(1, NUM_ACTIONS):
            if not mask[a]:
                o += _NO_CANDIDATE
                continue
            gpus = offer.placement(a)
            assert gpus is not None
            key = gpus.tobytes()
            got = seen.get(key)
            if got is None:
                tier, f = self._tier_comm(job, gpus)
                load = e.predicted_link_load(job, gpus) if contention else 0.0
                got = seen[key] = [1.0, *_TIER_ONE_HOT[tier], f / (1.0 + f), min(load / 2.0, 1.0)]
            o += got
        if e.sim_events != self._feat_at:
            self._cluster.compute(self._feat)
            self._feat_at = e.sim_events
            self._feat_list = self._feat.tolist()
        o += self._feat_list
        return np.array(o, dtype=np.float32)


class PlacementEnv(ClusterEnv):
    """Answer resource offers: wait, or take one of six candidate placements.

    ## Description

    A discrete-event simulation of a hierarchical GPU cluster (GPU -> machine -> rack ->
    spine) runs a scenario (a cluster and a workload of training jobs). Whenever the base
    policy offers free GPUs to a waiting job, the episode pauses and the agent decides the
    offer. The base policy (``base_policy``, Dally by default) keeps everything else: the
    order in which jobs are offered (Dally's increasing Nw_sens, Tiresias's 2D-LAS queues,
    Gandiva's arrival order), preemption (Dally's relocation of badly placed jobs, Tiresias's
    preemption of lower queues, after which the job gets a second offer with the freed GPUs)
    and migration (Gandiva). A job that declines stays in the queue and is offered again
    when something changes (a start, an arrival, a finish, a timer of the base policy).

    ## Action Space

    ``Discrete(7)``: 0 wait, 1 one machine (best fit), 2 one rack (best-fit rack, packed),
    3 network (packed onto the fewest racks and machines), 4 the fewest machines the job could
    ever use, 5 greedy packing onto the machines with most free GPUs, 6 first fit (lowest free
    GPU ids). ``action_masks()`` gives the valid ones (wait is always valid). A masked action
    is treated as wait with the ``invalid`` reward component of ``-invalid_penalty``, or is an
    error with ``invalid_action="raise"``.

    Wait limit (v1, ``wait_limit="rack_timer"``): once the offered job has waited past both
    of the base policy's delay timers (``job.past_machine_timer`` and ``job.past_rack_timer``;
    Dally's auto-tuned or manual T_Mc, T_Rk; 12 h and 24 h for bases without timers), wait
    is masked while some placement is
    valid, so no policy can decline a job for ever; a masked action is then answered with
    the most consolidated valid candidate (machine, rack, network, ... in action order).
    Dally's and Gandiva's own answers never wait there, so they run exactly as natively;
    Tiresias's high-skew rule can, so Tiresias reproduces its native run in v0 only.
    ``wait_limit="none"`` (v0) keeps unbounded waiting.

    ## Observation Space

    ``Box(0, 1, (63,), float32)``, the same size on any cluster: 17 job features
    (``JOB_FEATURES``), 6 features per candidate (``CANDIDATE_FEATURES``) and 10 cluster
    features (``CLUSTER_FEATURES``). ``OBS_INDEX`` maps names to positions. Sources:

    * observed (what a real scheduler sees): the job's GPU demand, whether it fits on a
      machine / rack, its model's exposed communication at each tier (priced with the network
      of the machine groups the job can run on, 0 under ``network: ideal``), starvation time
      against the base policy's delay timers and the timers, Nw_sens, preemptions, Tiresias
      skew, victims of this offer; every candidate feature (valid, tier one-hot, predicted
      communication overhead, predicted link load with ``contention`` on); every cluster
      feature (free capacity per tier, fragmentation, queue, running jobs, ``done_jobs`` =
      finished / arrived jobs).
    * estimate (``known_durations=False``, v3): ``job.progress`` = done / (done + estimated
      remaining iterations) and ``job.remaining_work`` = log1p(estimated remaining ideal
      GPU-hours) / log1p(10^4), the remaining iterations from the finished jobs' lengths
      (``sim.estimators.remaining_iterations``, method ``"history"``: the mean length of the
      finished jobs longer than the work done, minus it; as much again as done where no
      finished job is longer, so a job that has not run shows progress 0, and remaining work
      0 until some job has finished).
    * oracle (``known_durations=True``, v0-v2): the same two features from the job's true
      length (done / total, true remaining GPU-hours); and, with ``done_jobs_of="workload"``
      (v0, v1), ``cluster.done_jobs`` = finished / all jobs of the episode. Such an env is
      clairvoyant (``clairvoyant``) and so is an agent trained on it.

    ## Rewards

    Named components in ``info["rewards"]``, combined with ``reward_weights`` (defaults in
    ``DEFAULT_WEIGHTS``): ``jct`` = -(jobs in the system) x elapsed time / ``reward_scale_s``
    (summed over an episode: minus the total JCT in units of ``reward_scale_s``),
    ``makespan`` = -elapsed time / scale, ``comm`` = -(running jobs' communication share of
    their iterations) x elapsed time / scale, ``invalid`` = -penalty per masked action.

    ## Starting State

    ``reset(seed)`` builds the workload of the scenario with that seed and runs to the
    first offer.

    ## Episode End

    Terminated when every job has finished; truncated only if the scenario's simulated-time
    horizon (``max_sim_time_s``) stops the run first. The final ``info`` has the results
    summary under ``"results"`` (the same metrics as ``dlcluster simulate``).

    ## Arguments

    ``scenario`` (preset name, YAML path, mapping; default ``dally-poisson-4rack``),
    ``scenario_overrides`` (nested mapping merged into it), ``scenarios`` (a list drawn per
    reset instead of ``scenario``, ``envs.sampling``), ``base_policy`` (``dally``,
    ``tiresias``, ``gandiva`` or any policy with an ``offers`` generator) and
    ``base_params``, ``reward_weights``, ``reward_scale_s`` (3600), ``invalid_action``
    (``"wait"`` or ``"raise"``), ``invalid_penalty`` (1.0), ``wait_retry_s`` (3600: when
    declined offers leave the cluster idle with nothing scheduled, the base policy is called
    again after this long, up to 24 times in a row; then the episode ends, truncated, with the
    waiting jobs unfinished), ``wait_limit`` (``rack_timer`` from v1, ``none`` in v0),
    ``known_durations`` (False from v3: estimated progress and remaining work; True: the
    true values, an oracle), ``done_jobs_of`` (``arrived`` from v2; ``workload`` in v0, v1),
    ``render_mode`` (``ansi`` or ``rgb_array``), ``traces_dir``. ``clairvoyant`` (read-only)
    says whether the env reads ground truth (``known_durations``, ``done_jobs_of="workload"``
    or a clairvoyant base policy such as Tiresias with ``thresholds="scaled"``).

    ## Version History

    * v3: ``job.progress`` and ``job.remaining_work`` are estimates from observable facts
      (``known_durations=False``, see Observation Space); same positions, names and size.
      The old versions below observe the true values (``known_durations=True``) and warn
      (``DeprecationWarning``) when made; they stay for the checkpoints trained on them.
    * v2: ``done_jobs`` = finished / arrived jobs (``done_jobs_of="arrived"``).
    * v1: a finite default wait limit (``wait_limit="rack_timer"``); the ``unfinished``
      reward component exists (weight 1, zero here: Placement never penalises it).
    * v0: initial version's rule, no wait limit (``gym.make("DLCluster/Placement-v0")``).
      Later changes to the engine (the network model) and to the base policies (as their
      papers wrote them; the information boundary: Dally's move test on estimates, Tiresias's
      online thresholds) apply under every version without a bump: an old version reproduces
      the env's rules, not the per-job results of runs made before them.

    All versions: the ``job.sens_*`` features follow the engine under ``network: ideal`` (0)
    and on clusters with several machine groups (each group's network); they are unchanged on
    one-group clusters without ``ideal`` (every Dally preset; recorded digests).
    """

    env_name = "Placement-v3"

    def __init__(
        self,
        scenario: str | Path | Mapping[str, Any] | ScenarioConfig | None = None,
        *,
        base_policy: str = "dally",
        base_params: Mapping[str, Any] | None = None,
        invalid_action: str = "wait",
        invalid_penalty: float = 1.0,
        wait_retry_s: float = 3600.0,
        wait_limit: str = "rack_timer",
        known_durations: bool = False,
        **kwargs: Any,
    ) -> None:
        version_kw = {"wait_limit": wait_limit, "known_durations": known_durations,
                      "done_jobs_of": kwargs.get("done_jobs_of", "arrived")}  # fmt: skip
        self.env_name = version_name("Placement", version_kw)
        check_kwargs(self.env_name, kwargs, PLACEMENT_KWARGS)
        self.known_durations = check_flag(self.env_name, "known_durations", known_durations)
        if wait_limit not in WAIT_LIMITS:
            raise ConfigError(
                f"{self.env_name}: wait_limit must be one of {', '.join(WAIT_LIMITS)}, "
                f"got {wait_limit!r}"
            )
        self.wait_limit = wait_limit
        super().__init__(scenario, **kwargs)
        if invalid_action not in ("wait", "raise"):
            raise ConfigError(
                f"{self.env_name}: invalid_action must be 'wait' or 'raise', got {invalid_action!r}"
            )
        if not (finite_number(invalid_penalty) and invalid_penalty >= 0):
            raise ConfigError(
                f"{self.env_name}: invalid_penalty must be a finite number >= 0 (the reward "
                f"is minus it), got {invalid_penalty!r}"
            )
        if not (finite_number(wait_retry_s) and wait_retry_s > 0):
            raise ConfigError(
                f"{self.env_name}: wait_retry_s must be a finite number > 0, got {wait_retry_s!r}"
            )
        self.base_policy = base_policy
        check_mapping(self.env_name, "base_params", base_params)
        self.base_params = dict(base_params or {})
        probe = make_policy(base_policy, **self.base_params)
        if not callable(getattr(probe, "offers", None)):
            raise ConfigError(
                f"{self.env_name}: base policy {base_policy!r} has no offers(view) generator; "
                "bases with offers: dally, dally-manual, tiresias, gandiva"
            )
        self._base_clairvoyant = is_clairvoyant(probe)
        warn_leaks("Placement", self.env_name, version_kw)
        self.invalid_action = invalid_action
        self.invalid_penalty = float(invalid_penalty)
        self.wait_retry_s = float(wait_retry_s)
        self._init_kwargs.update(
            base_policy=base_policy,
            base_params=base_params,
            invalid_action=invalid_action,
            invalid_penalty=invalid_penalty,
            wait_retry_s=wait_retry_s,
            wait_limit=wait_limit,
            known_durations=known_durations,
        )
        self.action_space = gym.spaces.Discrete(NUM_ACTIONS)
        self.observation_space = gym.spaces.Box(0.0, 1.0, (OBS_SIZE,), np.float32)
        self._offer: Offer | None = None

    @property
    def clairvoyant(self) -> bool:
        """Whether the env reads ground truth: true job lengths in the observation
        (``known_durations``), the episode's job count (``done_jobs_of="workload"``) or a
        clairvoyant base policy. An agent trained on it is clairvoyant too."""
        return self.known_durations or self.done_jobs_of == "workload" or self._base_clairvoyant

    # ------------------------------------------------------------------ episode
    def _make_base(self) -> Any:
        return make_policy(self.base_policy, **self.base_params)

    def _first_instant(self, view: ClusterView) -> None:
        self._observer = PlacementObserver(view, self.done_jobs_of, self.known_durations)

    def _decide(self, view: ClusterView) -> Generator[Offer, int, Any]:
        return (yield from self.base.offers(view))

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        check_reset_options(self.env_name, options, seed)
        super().reset(seed=seed)
        self._offer = self._start(self._episode_seed_for(seed))
        return self._observe(), self._info({})

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        if self._gen is None:
            raise gym.error.ResetNeeded("call reset() before step()")
        if self._offer is None:
            raise gym.error.ResetNeeded("the episode is over; call reset()")
        a = self._check_action(action)
        mask = self.action_masks()
        if not mask[a]:
            if self.invalid_action == "raise":
                raise InvalidActionError(
                    f"{self.env_name}: action {a} ({ACTION_NAMES[a]}) is masked for job "
                    f"{self._offer.job}; mask {mask.astype(int).tolist()} over "
                    f"{list(ACTION_NAMES)}"
                )
            self._pending["invalid"] -= self.invalid_penalty
            a = WAIT if mask[WAIT] else int(np.flatnonzero(mask)[0])
        self._actions.append(a)
        self._offer = self._advance(a)
        obs = self._observe()
        reward, comps = self._take_rewards()
        terminated = truncated = False
        info = self._info({"rewards": comps})
        if self.results is not None:
            truncated = self.results.summary.get("jobs_unfinished", 0) > 0
            terminated = not truncated
        return obs, reward, terminated, truncated, info

    def follow_base(self, action: int, horizon_s: float) -> float:
        """Answer the current offer with ``action``, then let the base policy answer every
        offer itself (its ``choose``) for ``horizon_s`` simulated seconds or to the end.
        Returns the ``jct`` reward component over exactly that window (minus job-hours in
        the system with the default scale). This consumes the episode: call it on a copy
        (``agents.rollouts`` calls it in a forked child)."""
        if self._offer is None:
            raise gym.error.ResetNeeded("the episode is over; call reset()")
        assert self.engine is not None
        self._account_until = self.engine.now + horizon_s
        self._pending = dict.fromkeys(self._pending, 0.0)
        choose = self.base.choose
        offer = self._advance(action)
        while offer is not None and self.engine.now < self._account_until:
            offer = self._advance(choose(offer))
        self._offer = offer
        return float(self._pending["jct"])

    def _check_action(self, action: Any) -> int:
        arr = np.asarray(action)
        if arr.size != 1:
            raise InvalidActionError(
                f"{self.env_name}: expected one action in 0..{NUM_ACTIONS - 1}, got {action!r}"
            )
        v = arr.reshape(()).item()
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise InvalidActionError(
                f"{self.env_name}: action {v!r} is not an integer in 0..{NUM_ACTIONS - 1}"
                f" ({', '.join(ACTION_NAMES)})"
            )
        if isinstance(v, float) and (not math.isfinite(v) or v != int(v)):
            raise InvalidActionError(
                f"{self.env_name}: action {v!r} is not an integer in 0..{NUM_ACTIONS - 1}"
            )
        a = int(v)
        if not 0 <= a < NUM_ACTIONS:
            raise InvalidActionError(
                f"{self.env_name}: action {a} is out of range; actions are 0..{NUM_ACTIONS - 1}"
                f" ({', '.join(ACTION_NAMES)})"
            )
        return a

    def action_masks(self) -> np.ndarray:
        """Valid actions of the current offer (MaskablePPO convention); all-wait at the end."""
        if self._offer is None:
            m = np.zeros(NUM_ACTIONS, dtype=bool)
            m[WAIT] = True
            return m
        m = self._offer.mask.copy()
        o = self._offer
        if self.wait_limit == "rack_timer" and o.past_rack_timer and o.past_machine_timer:
            m[WAIT] = not m[1:].any()
        return m

    def _restore(self, seed: int, actions: list[Any]) -> None:
        self._offer = self._start(seed)
        for a in actions:
            self._actions.append(a)
            self._offer = self._advance(a)
        if actions:  # the last step took its rewards; with none, reset's accrual stays
            self._pending = dict.fromkeys(self._pending, 0.0)

    # ------------------------------------------------------------------ observation
    def _observe(self) -> np.ndarray:
        if self._offer is None:
            return np.zeros(OBS_SIZE, dtype=np.float32)
        return self._observer.observe(self._offer)

    def _info(self, info: dict[str, Any]) -> dict[str, Any]:
        offer = self._offer
        if offer is not None:
            info["job"] = offer.job
            info["demand"] = offer.demand
            info["starvation_s"] = offer.starvation_s
            info["timers_s"] = offer.timers
            info["action_mask"] = self.action_masks()
        info["time_s"] = self.engine.now if self.engine is not None else 0.0
        return self._final_info(info)

    def candidates(self) -> list[dict[str, Any]]:
        """The current offer's candidates: action, name, GPUs and tier (valid ones only)."""
        offer = self._offer
        if offer is None:
            return []
        out = []
        for a in range(1, NUM_ACTIONS):
            g = offer.placement(a)
            if g is not None:
                tier = Tier(int(self.cluster.placement_tier(g)))
                out.append(
                    {"action": a, "name": ACTION_NAMES[a], "gpus": g.tolist(), "tier": tier.label}
                )
        return out
