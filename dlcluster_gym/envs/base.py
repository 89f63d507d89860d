"""What both environments share: scenario and kwargs handling, seeding, the episode driver,
named reward components, rendering and pickling by replay."""

from __future__ import annotations

import copy
import math
import warnings
from collections.abc import Generator, Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from dlcluster_gym.api import prepare
from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import MAX_SEED, ScenarioConfig, load_scenario, merge_overrides
from dlcluster_gym.envs.features import DONE_OF
from dlcluster_gym.envs.render import HUMAN_RENDERING, HumanWindow, render_ansi, render_rgb
from dlcluster_gym.envs.sampling import ScenarioSampler, one_line_error
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.perf import potential_kernel
from dlcluster_gym.sim.actions import Start, WakeUp
from dlcluster_gym.sim.bounds import isolated_run
from dlcluster_gym.sim.engine import Engine
from dlcluster_gym.sim.results import Results
from dlcluster_gym.sim.state import DONE, DROPPED
from dlcluster_gym.sim.view import ClusterView

DEFAULT_SCENARIO = "dally-poisson-4rack"
REWARD_COMPONENTS: tuple[str, ...] = (
    "jct", "makespan", "comm", "invalid", "unfinished", "shaping")  # fmt: skip
DEFAULT_WEIGHTS: dict[str, float] = {
    "jct": 1.0,
    "makespan": 0.0,
    "comm": 0.0,
    "invalid": 1.0,
    "unfinished": 1.0,
    "shaping": 0.0,
}
COMMON_KWARGS: tuple[str, ...] = (
    "scenario",
    "scenario_overrides",
    "scenarios",
    "reward_weights",
    "reward_scale_s",
    "render_mode",
    "traces_dir",
    "done_jobs_of",
    "default_scenario",
    "episode_seeds",
)


# ``scenario_overrides`` merge as every scenario override does (the name is kept for importers)
deep_merge = merge_overrides


def finite_number(value: Any) -> bool:
    """Whether ``value`` is a finite int or float (``True`` is not a number here)."""
    return (
        isinstance(value, int | float | np.integer | np.floating)
        and not isinstance(value, bool | np.bool_)
        and math.isfinite(value)
    )


def check_flag(env: str, key: str, value: Any) -> bool:
    """A boolean argument: True/False only (``"no"`` must not become True)."""
    if not isinstance(value, bool | np.bool_):
        raise ConfigError(f"{env}: {key} must be True or False, got {value!r}")
    return bool(value)


def check_reset_options(env: str, options: Mapping[str, Any] | None, seed: Any = None) -> None:
    """``reset(options=...)``: the envs take no options (``None`` or ``{}``); the scenario is
    chosen at construction (``scenario=`` / ``scenarios=``). ``seed``: see
    :func:`check_reset_seed`."""
    check_reset_seed(env, seed)
    if options is None:
        return
    if not isinstance(options, Mapping):
        raise ConfigError(f"{env}: reset options must be a mapping or None, got {options!r}")
    if options:
        raise ConfigError(
            f"{env}: reset() takes no options, got {', '.join(map(repr, sorted(options)))}; "
            "choose scenarios at construction (scenario=, scenario_overrides=, scenarios=)"
        )


def check_reset_seed(env: str, seed: Any) -> None:
    """``reset(seed=...)``: None or an integer in ``[0, 2**63 - 1]`` (what numpy's generators
    and the results' int64 columns hold); a ``ConfigError`` (a ``ValueError``) naming seed."""
    if seed is None:
        return
    if isinstance(seed, bool | np.bool_) or not isinstance(seed, int | np.integer):
        raise ConfigError(
            f"{env}: reset(seed=...) must be an integer in [0, {MAX_SEED}] or None, got "
            f"{seed!r} ({type(seed).__name__})"
        )
    if not 0 <= int(seed) <= MAX_SEED:
        raise ConfigError(
            f"{env}: reset(seed={seed}) is out of range; seed must be an integer in "
            f"[0, {MAX_SEED}] (2**63 - 1) or None"
        )


def stalled(engine: Engine) -> bool:
    """Whether a finished run ended because nothing could change any more (jobs waiting,
    nothing running, no arrival, finish or wake-up queued): the stall ending, as opposed to
    every job finishing or the ``max_sim_time_s`` horizon."""
    return bool(engine.waiting) and not engine.running and not engine._future_events()


_FINISHED = np.array([DONE, DROPPED], dtype=np.int8)
"""The statuses of jobs that are done with (``perf.potential_kernel``)."""


def isolated_iter_s(engine: Engine) -> np.ndarray:
    """Per job of ``engine``: its per-iteration time alone on the most consolidated placement
    of an empty cluster (``sim.bounds.isolated_run``; the ``ideal`` bound takes the fastest
    placement, which may be more spread)."""
    scen, cluster = engine.scenario, engine.cluster
    per_iter: dict[tuple[str, int, float], float] = {}
    out = np.zeros(len(engine.jobs))
    for j, job in enumerate(engine.jobs):
        key = (job.model, job.num_gpus, float(job.compute_s))
        t = per_iter.get(key)
        if t is None:
            run_s = isolated_run(cluster, job, scen.profile, scen.network)[0]
            t = per_iter[key] = run_s / max(float(job.iterations), 1e-12)
        out[j] = t
    return out


def serial_remaining_s(engine: Engine, iter_s: np.ndarray | None = None) -> np.ndarray:
    """Isolated remaining run time (seconds) of every unfinished job of ``engine``: its
    remaining iterations at its isolated per-iteration time (``isolated_iter_s``, or
    ``iter_s`` when given; true durations), plus any checkpoint/restore overhead it still
    owes."""
    status = engine.status
    left = np.flatnonzero((status != DONE) & (status != DROPPED))
    t = isolated_iter_s(engine) if iter_s is None else iter_s
    remaining = np.maximum(engine.iterations[left] - engine.done_iters[left], 0.0)
    return remaining * t[left] + engine.pending_overhead[left]


def check_mapping(env: str, key: str, value: Any) -> None:
    """A keyword argument that must be a mapping (or None)."""
    if value is not None and not isinstance(value, Mapping):
        raise ConfigError(f"{env}: {key} must be a mapping of names to values, got {value!r}")


def check_kwargs(env: str, given: Mapping[str, Any], valid: tuple[str, ...]) -> None:
    """Unknown keyword arguments are an error that lists the valid ones."""
    unknown = sorted(set(given) - set(valid))
    if unknown:
        raise ConfigError(
            f"{env}: unknown argument(s) {', '.join(map(repr, unknown))}; valid arguments: "
            f"{', '.join(valid)}"
        )


class StallGuard:
    """If the decisions leave waiting jobs with nothing running and nothing scheduled to
    happen, ask to be called again after ``retry_s``, at most ``max_retries`` times in a row
    (a declining agent must not end the run at once, nor stall it for ever: after that many
    idle retries the run ends with the waiting jobs unfinished). Heuristics never stall, so
    their runs are unchanged."""

    def __init__(self, retry_s: float = 3600.0, max_retries: int = 24) -> None:
        self.retry_s = float(retry_s)
        self.max_retries = int(max_retries)
        self.stalls = 0

    def __call__(self, view: ClusterView, actions: Any) -> list[Any]:
        actions = list(actions)
        e = view._e
        if any(isinstance(a, Start) for a in actions):
            self.stalls = 0
        if not e.waiting or e.running or any(isinstance(a, Start | WakeUp) for a in actions):
            return actions
        if not e._future_events() and self.stalls < self.max_retries:
            self.stalls += 1
            actions.append(WakeUp(view.now + self.retry_s))
        return actions


def _seed_range(env: str, seeds: Sequence[int] | None) -> tuple[int, int]:
    """``episode_seeds``: the ``[lo, hi)`` range that ``reset()`` without a seed draws episode
    seeds from (default ``[0, 2**31 - 1)``); training envs use it to keep held-out seeds out."""
    if seeds is None:
        return 0, 2**31 - 1
    ok = (
        isinstance(seeds, Sequence) and not isinstance(seeds, str) and len(seeds) == 2
        and all(isinstance(v, int | np.integer) and not isinstance(v, bool) for v in seeds)
    )  # fmt: skip
    if not ok or not 0 <= seeds[0] < seeds[1] <= 2**63 - 1:
        raise ConfigError(
            f"{env}: episode_seeds must be [lo, hi) with integers 0 <= lo < hi, got {seeds!r}"
        )
    return int(seeds[0]), int(seeds[1])


def _label(scenario: Any) -> str:
    if isinstance(scenario, str | Path):
        return repr(str(scenario))
    return f"<{type(scenario).__name__}>"


class ClusterEnv(gym.Env):
    """Base class of the DLCluster environments (not registered itself)."""

    compiled_potential = True
    """Compute the ``shaping`` potential's terms with ``perf.potential_kernel`` where numba is
    present (off: the numpy form; the rewards are the same, tested)."""

    # The class declares "human", so that gym.make hands that mode to the env instead of wrapping
    # rgb_array in gymnasium's pygame window, which would fail only at the first render: without
    # pygame, making the env in that mode is a one-line ConfigError (HumanWindow). An instance
    # declares "human" only where pygame is installed, since gymnasium's contract is that every
    # mode an env declares works (check_env renders each).
    metadata: ClassVar[dict[str, Any]] = {
        "render_modes": ["ansi", "rgb_array", "human"],
        "render_fps": 4,
    }
    env_name = "DLCluster"

    def __init__(
        self,
        scenario: str | Path | Mapping[str, Any] | ScenarioConfig | None = None,
        *,
        scenario_overrides: Mapping[str, Any] | None = None,
        scenarios: Sequence[Any] | None = None,
        reward_weights: Mapping[str, float] | None = None,
        reward_scale_s: float = 3600.0,
        render_mode: str | None = None,
        traces_dir: str | Path | None = None,
        done_jobs_of: str = "arrived",
        episode_seeds: Sequence[int] | None = None,
        default_scenario: str = DEFAULT_SCENARIO,
    ) -> None:
        super().__init__()
        self.episode_seeds = _seed_range(self.env_name, episode_seeds)
        if done_jobs_of not in DONE_OF:
            raise ConfigError(
                f"{self.env_name}: done_jobs_of must be one of {', '.join(DONE_OF)}, got "
                f"{done_jobs_of!r}"
            )
        self.done_jobs_of = done_jobs_of
        self._sampler: ScenarioSampler | None = None
        if scenarios is not None:  # drawn per reset; replaces `scenario`
            if scenario is not None:
                raise ConfigError(
                    f"{self.env_name}: give scenario={_label(scenario)} or scenarios=[...], not "
                    f"both (a DLCluster/<Env>-<scenario> id sets scenario; use the plain id)"
                )
            if scenario_overrides:
                raise ConfigError(
                    f"{self.env_name}: scenario_overrides applies to scenario= only; with "
                    "scenarios=[...] give each entry its own 'overrides'"
                )
            self._sampler = ScenarioSampler(scenarios, self.env_name)
            cfg = self._sampler.first
        else:
            try:
                cfg = load_scenario(default_scenario if scenario is None else scenario)
            except ConfigError as err:  # pydantic's lines as one
                raise one_line_error(f"{self.env_name}: scenario", err) from None
            if scenario_overrides is not None and not isinstance(scenario_overrides, Mapping):
                raise ConfigError(
                    f"{self.env_name}: scenario_overrides must be a mapping (nested keys of the "
                    f"scenario), got {scenario_overrides!r}"
                )
            if scenario_overrides:
                try:
                    cfg = load_scenario(deep_merge(cfg.model_dump(), scenario_overrides))
                except ConfigError as err:
                    raise one_line_error(f"{self.env_name}: scenario_overrides", err) from None
        self.scenario: ScenarioConfig = cfg
        self.cluster = Cluster(cfg.cluster)
        weights = dict(DEFAULT_WEIGHTS)
        if reward_weights is not None and not isinstance(reward_weights, Mapping):
            raise ConfigError(
                f"{self.env_name}: reward_weights must be a mapping of component to weight "
                f"({', '.join(REWARD_COMPONENTS)}), got {reward_weights!r}"
            )
        for k, w in (reward_weights or {}).items():
            if k not in DEFAULT_WEIGHTS:
                raise ConfigError(
                    f"{self.env_name}: unknown reward component {k!r}; components: "
                    f"{', '.join(REWARD_COMPONENTS)}"
                )
            if not finite_number(w):
                raise ConfigError(f"{self.env_name}: reward weight {k}={w!r} must be finite")
            weights[k] = float(w)
        self.reward_weights = weights
        if not (finite_number(reward_scale_s) and reward_scale_s > 0):
            raise ConfigError(
                f"{self.env_name}: reward_scale_s must be a finite number > 0 (seconds), got "
                f"{reward_scale_s!r}"
            )
        self.reward_scale_s = float(reward_scale_s)
        if render_mode == "human":
            HumanWindow.require_pygame(self.env_name)
        if not HUMAN_RENDERING:
            self.metadata = {**self.metadata, "render_modes": ["ansi", "rgb_array"]}
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ConfigError(
                f"{self.env_name}: render_mode {render_mode!r} is not one of "
                f"{self.metadata['render_modes']}"
            )
        self.render_mode = render_mode
        self._human = (
            HumanWindow(self.env_name, self.metadata["render_fps"])
            if render_mode == "human"
            else None
        )
        if traces_dir is not None and not isinstance(traces_dir, str | Path):
            raise ConfigError(
                f"{self.env_name}: traces_dir must be a folder path (str or Path), got "
                f"{traces_dir!r}"
            )
        self.traces_dir = traces_dir
        self._init_kwargs: dict[str, Any] = {
            "scenario": scenario,
            "scenario_overrides": scenario_overrides,
            "scenarios": scenarios,
            "reward_weights": reward_weights,
            "reward_scale_s": reward_scale_s,
            "render_mode": render_mode,
            "traces_dir": traces_dir,
            "done_jobs_of": done_jobs_of,
            "episode_seeds": episode_seeds,
            "default_scenario": default_scenario,
        }
        self.engine: Engine | None = None
        self.view: ClusterView | None = None
        self.results: Results | None = None
        self._gen: Generator[Any, Any, Results] | None = None
        self._episode_seed: int | None = None
        self._actions: list[Any] = []  # this episode's actions (pickling replays them)

    # ------------------------------------------------------------------ episode
    def _make_base(self) -> Any:
        """The base policy of an episode (subclasses)."""
        raise NotImplementedError

    def _first_instant(self, view: ClusterView) -> None:
        """Per-episode setup once the engine has a view (subclasses)."""

    def _decide(self, view: ClusterView) -> Generator[Any, Any, Any]:
        """One scheduling instant: yield decision points to the agent, return the actions."""
        raise NotImplementedError

    def _episode(self) -> Generator[Any, Any, Results]:
        """The episode as a generator of decision points; returns the results."""
        assert self.engine is not None
        steps = self.engine.instants()
        try:
            view = next(steps)
        except StopIteration as stop:
            return stop.value
        self.view = view
        self._first_instant(view)
        while True:
            self._account(view.now)
            actions = yield from self._decide(view)
            try:
                view = steps.send(self._guard(view, actions))
            except StopIteration as stop:
                return stop.value

    def _start(self, seed: int) -> Any:
        """Build the engine for ``seed`` and run to the first decision point."""
        scen = self._sampler.draw(seed) if self._sampler is not None else self.scenario
        self.episode_scenario: ScenarioConfig = scen
        cfg, cluster, jobs, pol_rng = prepare(scen, seed, self.traces_dir)
        self.cluster = cluster
        self.base = self._make_base()
        self.engine = Engine(cfg, cluster, jobs, self.base, pol_rng)
        self.results = None
        self._episode_seed = seed
        self._actions = []
        self._last_t = 0.0
        self._account_until = math.inf  # rewards accrue up to this simulated time
        self._in_system = 0
        self._comm_rate = 0.0
        self._pending = dict.fromkeys(REWARD_COMPONENTS, 0.0)
        self._stall_guard = StallGuard(self.wait_retry_s)
        self._steps = 0  # agent steps this episode (for a step limit)
        self._iter_s: np.ndarray | None = None
        self._phi = self._potential() if self.reward_weights["shaping"] else 0.0
        self._gen = self._episode()
        return self._advance(None)

    def _cut(self) -> Any:
        """End the episode now (a step limit): the run's results with the jobs not finished
        reported unfinished, and the end-of-episode charges; returns None (no decision
        point left)."""
        assert self._gen is not None and self.engine is not None
        self._gen.close()
        self.results = self.engine.cut()
        self._account(self.engine.now)
        self._episode_end_rewards()
        self._stalled = False  # cut by the limit, whatever the engine's state
        return None

    def _advance(self, decision: Any) -> Any:
        """Send ``decision`` (None: start) and run to the next decision point; None at the end."""
        assert self._gen is not None
        try:
            if decision is None:
                return next(self._gen)
            return self._gen.send(decision)
        except StopIteration as stop:
            self.results = stop.value
            self._account(self.engine.now)  # type: ignore[union-attr]
            self._episode_end_rewards()
            return None

    def _episode_seed_for(self, seed: int | None) -> int:
        if seed is not None:
            return int(seed)
        lo, hi = self.episode_seeds
        return int(self.np_random.integers(lo, hi))

    @property
    def done(self) -> bool:
        return self.results is not None

    @property
    def reward_time_s(self) -> float:
        """Simulated time up to which the episode's rewards have accrued (0 before a
        reset): the ``jct`` rewards paid so far sum to minus the job-seconds in the system
        over ``[0, reward_time_s]``, / ``reward_scale_s``."""
        return float(getattr(self, "_last_t", 0.0))

    # ------------------------------------------------------------------ rewards
    def _account(self, now: float) -> None:
        """Integrate the reward components from the last decision instant to ``now``."""
        now = min(now, self._account_until)
        dt = now - self._last_t
        if dt > 0:
            s = self.reward_scale_s
            self._pending["jct"] -= self._in_system * dt / s
            self._pending["makespan"] -= dt / s
            self._pending["comm"] -= self._comm_rate * dt / s
            self._last_t = now
        e = self.engine
        assert e is not None
        if self.reward_weights["shaping"]:
            phi = self._potential()
            self._pending["shaping"] += phi - self._phi
            self._phi = phi
        self._in_system = len(e.waiting) + len(e.running)
        if self.reward_weights["comm"] and e.running:
            r = np.fromiter(e.running, dtype=np.int64, count=len(e.running))
            self._comm_rate = float((e.comm_per_iter[r] / e.iter_time[r]).sum())
        else:
            self._comm_rate = 0.0

    def _potential(self) -> float:
        """The ``shaping`` component's potential: minus the isolated remaining run time of
        every job not finished yet (arrived or not; running jobs' progress as of now, owed
        checkpoint/restore included; true durations, as the ``unfinished`` charge) /
        ``reward_scale_s``. The component is its change between decision instants
        (potential-based shaping with no discount: a finished episode's shaping sums to a
        constant, minus the first potential, so it changes no policy's ranking; it pays each
        instant for the work done in it)."""
        e = self.engine
        assert e is not None
        if self._iter_s is None:
            self._iter_s = isolated_iter_s(e)
        if self.compiled_potential and potential_kernel.remaining_terms is not None:
            r = np.fromiter(e.running, dtype=np.int64, count=len(e.running))
            terms = np.empty(e.iterations.size)
            potential_kernel.remaining_terms(
                e.iterations, e.done_iters, e.status, _FINISHED, self._iter_s, r,
                e.live(r)[0] if r.size else np.zeros(0), terms,
            )  # fmt: skip
            return -float(terms.sum() + e.pending_overhead.sum()) / self.reward_scale_s
        left = np.maximum(e.iterations - e.done_iters, 0.0)
        if e.running:
            r = np.fromiter(e.running, dtype=np.int64, count=len(e.running))
            left[r] = np.maximum(e.iterations[r] - e.live(r)[0], 0.0)
        left[(e.status == DONE) | (e.status == DROPPED)] = 0.0
        return -float((left * self._iter_s).sum() + e.pending_overhead.sum()) / self.reward_scale_s

    def _episode_end_rewards(self) -> None:
        """Rewards charged once when the run ends (subclasses: unfinished jobs)."""

    def _take_rewards(self) -> tuple[float, dict[str, float]]:
        comps = self._pending
        self._pending = dict.fromkeys(REWARD_COMPONENTS, 0.0)
        w = self.reward_weights
        return float(sum(w[k] * v for k, v in comps.items())), comps

    def _guard(self, view: ClusterView, actions: Any) -> list[Any]:
        return self._stall_guard(view, actions)

    wait_retry_s = 3600.0

    # ------------------------------------------------------------------ info
    def _final_info(self, info: dict[str, Any]) -> dict[str, Any]:
        """Every step's info: the episode's ``scenario`` (name), ``seed`` and ``policy`` (the
        env's base policy: who takes the decisions the agent does not), then, at the end,
        the ``results`` summary (without ``wall_s``, the wall-clock time: the same seed and
        actions give the same info)."""
        if self.engine is not None:
            info["scenario"] = self.episode_scenario.name
            info["seed"] = self._episode_seed
            info["policy"] = getattr(self.base, "name", type(self.base).__name__)
        if self.results is not None:
            info["results"] = {k: v for k, v in self.results.summary.items() if k != "wall_s"}
        return info

    # ------------------------------------------------------------------ render
    def render(self) -> str | np.ndarray | None:
        if self.render_mode is None:
            gym.logger.warn("render() called without a render_mode; pass render_mode=...")
            return None
        owner = (
            self.engine.gpu_owner
            if self.engine is not None
            else np.full(self.cluster.num_gpus, -1, dtype=np.int64)
        )
        if self.render_mode == "ansi":
            now = self.engine.now if self.engine is not None else 0.0
            return render_ansi(self.cluster, owner, now)
        if self._human is not None:
            self._human.show(render_rgb(self.cluster, owner))
            return None
        return render_rgb(self.cluster, owner)

    def close(self) -> None:
        if getattr(self, "_human", None) is not None:
            self._human.close()
        super().close()

    # ------------------------------------------------------------------ pickling
    def __getstate__(self) -> dict[str, Any]:
        """Constructor arguments, the episode's seed and actions (replayed on unpickling:
        the engine is deterministic, so the copy is in exactly the same state)."""
        return {
            "kwargs": copy.deepcopy(self._init_kwargs),
            "episode_seed": self._episode_seed,
            "actions": list(self._actions),
            "np_random": self._np_random,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        with warnings.catch_warnings():  # a copy: the original warned when it was made
            warnings.simplefilter("ignore", DeprecationWarning)
            self.__init__(**state["kwargs"])  # type: ignore[misc]
        self._np_random = state["np_random"]
        if state["episode_seed"] is not None:
            self._restore(state["episode_seed"], state["actions"])

    def _restore(self, seed: int, actions: list[Any]) -> None:
        """Replay an episode up to its last action (subclasses)."""
        raise NotImplementedError
