"""Every registered scenario x every registered policy, and every env id with its default
policy, on a short prefix of the run, with the engine's invariants checked at every decision
instant (``engine_checks``). A new scenario, policy or env id is covered without a new test.

The prefix: the scenario's first ``JOBS`` jobs and at most ``HORIZON_S`` of simulated time
(jobs still running then are reported unfinished). A policy that does not apply to a scenario
must say so with ``NotApplicableError`` before the first decision; every scenario has a policy
that applies, and every policy a scenario.
"""

from __future__ import annotations

import functools
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from conftest import NO_TRACES, TRACES, traces_available
from engine_checks import Tracker, check_end, check_state, checked_run, results_equal

from dlcluster_gym.api import rngs
from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import list_presets, load_scenario
from dlcluster_gym.envs import env_ids
from dlcluster_gym.envs.agent_meta import env_kind
from dlcluster_gym.envs.policies import _table, make_env_policy
from dlcluster_gym.errors import NotApplicableError
from dlcluster_gym.scenario.build import build_workload
from dlcluster_gym.scheduler import make_policy, policies
from dlcluster_gym.sim.bounds import ideal_results
from dlcluster_gym.sim.engine import Engine

pytestmark = pytest.mark.filterwarnings("ignore:.*out of date", "ignore:.*were dropped")

JOBS = 16
HORIZON_S = 6 * 3600.0
SCENARIOS = sorted(list_presets("scenarios"))
POLICIES = sorted(name for name, spec in policies().items() if not spec.bound)
BOUNDS = sorted(name for name, spec in policies().items() if spec.bound)


def _uses_traces(name: str) -> bool:
    wl = load_scenario(name).workload
    return getattr(wl, "path", None) is not None


@functools.cache
def prefix(name: str) -> tuple[Any, Cluster, list]:
    """The scenario cut to its first JOBS jobs and HORIZON_S, its cluster and jobs."""
    if not traces_available and _uses_traces(name):
        pytest.skip(f"{name} reads a trace: {NO_TRACES}")
    data = load_scenario(name).model_dump()
    data["workload"]["max_jobs"] = JOBS
    data["max_sim_time_s"] = HORIZON_S
    cfg = load_scenario(data)
    cluster = Cluster(cfg.cluster)
    wl_rng, _ = rngs(cfg.seed)
    return cfg, cluster, build_workload(cfg, cluster, wl_rng, traces_dir=TRACES)


def run_checked(name: str, policy: str) -> tuple[Engine, Any, Tracker] | None:
    """The policy's prefix run with every instant checked; None when it does not apply."""
    cfg, cluster, jobs = prefix(name)
    _, pol_rng = rngs(cfg.seed)
    engine = Engine(cfg, cluster, jobs, make_policy(policy), pol_rng, record_events=True)
    tr = Tracker(engine)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="stopped at the simulated-time horizon")
        try:
            res, tr = checked_run(engine)
        except NotApplicableError:
            assert engine.sim_events == 0, "NotApplicableError after the run began"
            return None
    return engine, res, tr


@functools.cache
def applies(name: str, policy: str) -> bool:
    return run_checked(name, policy) is not None


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("name", SCENARIOS)
def test_scenario_policy_invariants(name: str, policy: str) -> None:
    out = run_checked(name, policy)
    if out is None:
        pytest.skip(f"{policy} does not apply to {name} (NotApplicableError)")
    engine, res, tr = out
    cfg, cluster, jobs = prefix(name)
    assert tr.instants > 0
    ps = any(j.is_ps for j in jobs)
    check_end(engine, res, tr, None if ps else ideal_results(cfg, cluster, jobs))
    again = run_checked(name, policy)
    assert again is not None
    assert again[1].events == res.events, "same inputs and seed gave different events"
    assert results_equal(again[1], res), "same inputs and seed gave different results"


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_scenario_has_a_policy_and_its_bounds_hold(name: str) -> None:
    cfg, cluster, jobs = prefix(name)
    assert any(applies(name, p) for p in ("fcfs", "nearchus", "crius")), name
    for bound in BOUNDS:
        try:
            res = make_policy(bound).bound(cfg, cluster, jobs)
        except NotApplicableError:
            continue
        jct = np.asarray(res.jobs["jct_s"], dtype=float)
        assert len(jct) + res.summary["jobs_dropped"] == len(jobs)
        assert (jct > 0).all() and np.isfinite(jct).all()


# Policies whose jobs come only in trace scenarios: they schedule the adaptive-parallelism
# models of Crius's Table 2, which only the Crius scenarios (jobs from the Philly trace) have.
TRACE_ONLY = {"crius", "elasticflow-ls"}


@pytest.mark.parametrize("policy", POLICIES)
def test_every_policy_applies_somewhere(policy: str) -> None:
    names = [n for n in SCENARIOS if traces_available or not _uses_traces(n)]
    found = any(applies(n, policy) for n in names)
    if not found and not traces_available and policy in TRACE_ONLY:
        pytest.skip(f"{policy} applies only to trace scenarios: {NO_TRACES}")
    where = "registered scenario" if traces_available else "scenario without a trace"
    assert found, f"{policy} applies to no {where}"


# --------------------------------------------------------------------------- environments

ENV_JOBS = 8


def _env_scenario(env_id: str) -> str | None:
    spec = gym.spec(env_id)
    return spec.kwargs.get("scenario")


@pytest.mark.parametrize("env_id", env_ids())
def test_env_with_its_default_policy(env_id: str) -> None:
    sc = _env_scenario(env_id)
    if sc is not None and not traces_available and _uses_traces(sc):
        pytest.skip(f"{sc} reads a trace: {NO_TRACES}")
    overrides = {"workload": {"max_jobs": ENV_JOBS}}

    def episode() -> tuple[dict, int]:
        env = gym.make(env_id, scenario_overrides=overrides, traces_dir=TRACES)
        kind = env_kind(env)
        name = next(iter(_table(kind, env)))
        policy = make_env_policy(name, env)
        obs, info = env.reset(seed=3)
        tr = Tracker(env.unwrapped.engine)
        masks = getattr(env.unwrapped, "action_masks", None)
        steps = 0
        while True:
            if masks is not None and getattr(policy, "uses_masks", False):
                action, _ = policy.predict(obs, action_masks=masks())
            else:
                action, _ = policy.predict(obs)
            obs, _, terminated, truncated, info = env.step(action)
            steps += 1
            check_state(env.unwrapped.engine, tr)
            if terminated or truncated:
                env.close()
                return info, steps

    info, steps = episode()
    s = info["results"]
    assert s["jobs_completed"] + s["jobs_unfinished"] + s["jobs_dropped"] == ENV_JOBS
    again, steps2 = episode()
    assert steps2 == steps
    assert {k: v for k, v in again["results"].items()} == {k: v for k, v in s.items()} or all(
        (x == y) or (x != x and y != y)
        for x, y in zip(again["results"].values(), s.values(), strict=True)
    )
