"""Training reward with a reference run subtracted (``train.reward_reference``)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import yaml

import dlcluster_gym
from dlcluster_gym import simulate
from dlcluster_gym.agents.config import ScenarioSpec, load_agent_config
from dlcluster_gym.agents.envs import ScenarioMixEnv, scenario_mapping
from dlcluster_gym.agents.reference_reward import ReferenceRun
from dlcluster_gym.envs.delay_timer import NUM_CLASSES
from dlcluster_gym.errors import ConfigError

SMALL = ScenarioSpec(
    scenario="dally-timers-2rack-load11", overrides={"workload": {"num_jobs": 150}}
)


def test_job_seconds_counts_each_jobs_overlap_with_the_window() -> None:
    run = ReferenceRun(np.array([0.0, 10.0, 20.0]), np.array([30.0, 15.0, np.nan]), 90.0)
    assert run.job_seconds(0.0, 100.0) == 30.0 + 5.0 + 70.0  # unfinished: until the end
    assert run.job_seconds(12.0, 25.0) == 13.0 + 3.0 + 5.0
    assert run.job_seconds(40.0, math.inf) == 50.0
    assert run.job_seconds(5.0, 5.0) == 0.0
    assert ReferenceRun(np.array([]), np.array([]), 0.0).job_seconds(0.0, math.inf) == 0.0


def test_dropped_jobs_are_not_in_the_reference() -> None:
    """A job larger than the cluster is dropped on arrival: never in the system, in the
    reference run as in the env's own reward."""
    small = ScenarioSpec(
        scenario="dally-poisson-2rack",
        overrides={"workload": {"num_jobs": 40}, "cluster": {"groups": [{"name": "default",
                   "racks": 2, "machines_per_rack": 2, "gpus_per_machine": 2,
                   "gpu_type": "A100", "cpus_per_machine": 32, "memory_gb_per_machine": 256}]}},
    )  # fmt: skip
    env = ScenarioMixEnv(
        "DelayTimer", [scenario_mapping(small)], [1.0], (1000, 2000),
        {"done_jobs_of": "arrived"}, None, "none", "dally",
    )  # fmt: skip
    _, info = env.reset(seed=1)
    ref = simulate(env.env.episode_scenario, "dally", seed=info["seed"])
    assert ref.summary["jobs_dropped"] > 0
    total, done = 0.0, False
    while not done:
        _, r, terminated, truncated, _ = env.step(np.zeros(2 * NUM_CLASSES, np.float32))
        assert math.isfinite(r)
        total += r
        done = terminated or truncated
    assert math.isfinite(total)


def _episode_return(reference: str | None, action: float) -> tuple[float, int, object]:
    env = ScenarioMixEnv(
        "DelayTimer", [scenario_mapping(SMALL)], [1.0], (1000, 2000),
        {"done_jobs_of": "arrived"}, None, "none", reference,
    )  # fmt: skip
    env.reset(seed=7)
    total, done = 0.0, False
    while not done:
        _, r, terminated, truncated, info = env.step(np.full(2 * NUM_CLASSES, action, np.float32))
        total += r
        done = terminated or truncated
    return total, info["seed"], env.env.episode_scenario


@pytest.mark.parametrize("reference", ["dally", "dally-manual"])
def test_reference_adds_its_total_jct_and_nothing_else(reference: str) -> None:
    plain, seed, scenario = _episode_return(None, -0.8)
    paired, seed2, _ = _episode_return(reference, -0.8)
    assert seed == seed2
    ref = simulate(scenario, reference, seed=seed)
    added = float(ref.jobs["jct_s"].sum()) / 3600.0  # the env's jct reward: job-hours
    assert added > 0
    assert paired - plain == pytest.approx(added, rel=1e-9)


def test_reference_reward_keeps_the_ranking_of_two_policies() -> None:
    """The added term is the same for every policy on a seed, so returns keep their order
    and their differences."""
    short = [_episode_return(ref, -1.0)[0] for ref in (None, "dally")]
    long_ = [_episode_return(ref, 1.0)[0] for ref in (None, "dally")]
    assert short[0] - long_[0] == pytest.approx(short[1] - long_[1], rel=1e-9, abs=1e-9)
    assert short[0] != long_[0]  # the timers change this episode


@pytest.mark.parametrize(
    ("value", "message"),
    [("ideal", "'ideal' is a bound"), ("no-such-policy", "unknown policy 'no-such-policy'")],
)
def test_bad_reward_reference_names_the_field(value: str, message: str) -> None:
    with open(dlcluster_gym.agents.config.CONFIG_DIR / "delay_timer.yaml") as f:
        cfg = yaml.safe_load(f)
    cfg["train"]["reward_reference"] = value
    with pytest.raises(ConfigError, match=r"train\.reward_reference") as err:
        load_agent_config(cfg)
    assert message in str(err.value)
