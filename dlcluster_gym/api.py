"""``simulate``: the Python entry point, same result as ``dlcluster simulate``."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import MAX_SEED, ScenarioConfig, load_scenario
from dlcluster_gym.errors import ConfigError, TraceError, UnknownNameError
from dlcluster_gym.scheduler import (
    check_policy_params,
    instantiate,
    is_clairvoyant,
    make_policy,
    resolve_policy,
)
from dlcluster_gym.sim.engine import Engine
from dlcluster_gym.sim.limits import check_time_limit, time_limit
from dlcluster_gym.sim.results import Results


def rngs(seed: int) -> tuple[np.random.Generator, np.random.Generator]:
    """Independent (workload, policy) generators derived from one seed."""
    wl, pol = np.random.SeedSequence(seed).spawn(2)
    return np.random.default_rng(wl), np.random.default_rng(pol)


def prepare(
    scenario: str | Path | dict | ScenarioConfig,
    seed: int | None = None,
    traces_dir: str | Path | None = None,
) -> tuple[ScenarioConfig, Cluster, list, np.random.Generator]:
    """Load the scenario, build cluster and jobs; returns the policy's generator too."""
    from dlcluster_gym.scenario.build import build_workload

    cfg = load_scenario(scenario, seed=seed)
    cluster = Cluster(cfg.cluster)
    wl_rng, pol_rng = rngs(cfg.seed)
    try:
        jobs = build_workload(cfg, cluster, wl_rng, traces_dir=traces_dir)
    except TraceError:
        raise  # names the trace file, line and column
    except (ConfigError, UnknownNameError) as exc:  # a workload value only checked here
        source = str(scenario) if isinstance(scenario, str | Path) else f"scenario {cfg.name}"
        raise ConfigError(f"{source}: workload: {exc}") from None
    return cfg, cluster, jobs, pol_rng


def simulate(
    scenario: str | Path | dict | ScenarioConfig,
    policy: str | Any = "fcfs",
    seed: int | None = None,
    *,
    policy_params: dict[str, Any] | None = None,
    traces_dir: str | Path | None = None,
    record_events: bool = False,
    progress: Any = None,
    time_limit_s: float | None = None,
    time_limit_of: str = "the run",
) -> Results:
    """Run ``policy`` on ``scenario`` (a preset name, YAML path, mapping or config).

    ``policy`` is a registered name, an import path ``pkg.module:Class``, a policy class
    (built with ``policy_params``) or a policy object (``policy_params`` must then be empty).
    ``seed`` overrides the scenario's seed. Same inputs -> identical results (except wall_s).
    The results record the policy's kind (``Results.kind``: deployable, clairvoyant or bound).
    ``time_limit_s``: a wall-clock limit on the whole run, loading included; past it, a
    :class:`~dlcluster_gym.errors.TimeLimitError` (naming the policy, the simulated time and
    the trigger when it strikes inside ``schedule()``; ``time_limit_of`` names the run in
    the message). See ``dlcluster_gym.sim.limits`` for how it interrupts a policy.
    """
    _check_arguments(seed, policy_params, traces_dir)
    check_time_limit(time_limit_s)
    with time_limit(time_limit_s, time_limit_of):
        return _simulate(scenario, policy, seed, policy_params, traces_dir, record_events, progress)


def _check_arguments(seed: Any, policy_params: Any, traces_dir: Any) -> None:
    """:class:`ConfigError` naming the argument of :func:`simulate` that has the wrong type or
    value (before the scenario loads, so that it is not blamed)."""
    if seed is not None and (
        isinstance(seed, bool)
        or not isinstance(seed, int | np.integer)
        or not 0 <= seed <= MAX_SEED
    ):
        raise ConfigError(
            f"simulate: seed must be None or an integer in [0, 2**63 - 1], got {seed!r:.60}"
        )
    if policy_params is not None and (
        not isinstance(policy_params, dict) or not all(isinstance(k, str) for k in policy_params)
    ):
        raise ConfigError(
            "simulate: policy_params must be None or a dict of parameter names (str) to values, "
            f"got {policy_params!r:.60}"
        )
    if traces_dir is not None and not isinstance(traces_dir, str | Path):
        raise ConfigError(
            f"simulate: traces_dir must be None or a folder path (str or Path), got "
            f"{traces_dir!r:.60}"
        )


def _simulate(
    scenario: str | Path | dict | ScenarioConfig,
    policy: str | Any,
    seed: int | None,
    policy_params: dict[str, Any] | None,
    traces_dir: str | Path | None,
    record_events: bool,
    progress: Any,
) -> Results:
    t0 = time.perf_counter()
    cfg, cluster, jobs, pol_rng = prepare(scenario, seed, traces_dir)
    if isinstance(policy, str):
        _, spec = resolve_policy(policy)
        obj = make_policy(policy, **(policy_params or {}))
        if spec.bound:
            res = obj.bound(cfg, cluster, jobs)
            res.kind = "bound"
            res.summary["wall_s"] = time.perf_counter() - t0
            return res
    elif isinstance(policy, type):
        name = getattr(policy, "name", None) or policy.__name__
        params = check_policy_params(name, policy_params or {}, policy)
        obj = instantiate(policy, name, params)
    else:
        if policy_params:
            raise ConfigError(
                f"policy_params {policy_params} given with a policy object "
                f"({type(policy).__name__}), which is already built: pass the parameters to "
                "its constructor, or pass the class or a registered name"
            )
        if not callable(getattr(policy, "schedule", None)):
            raise ConfigError(
                f"policy {policy!r} has no schedule(view) method; pass a registered name, "
                "an import path 'package.module:Class', a policy class or a policy object"
            )
        obj = policy
    engine = Engine(
        cfg, cluster, jobs, obj, pol_rng, record_events=record_events, progress=progress
    )
    res = engine.run()
    res.kind = "clairvoyant" if is_clairvoyant(obj) else "deployable"
    res.summary["wall_s"] = time.perf_counter() - t0
    return res
