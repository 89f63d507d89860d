"""experiments/agents/env_baselines.py runs every policy it lists in an env version that
accepts it."""

from __future__ import annotations

import pytest
from conftest import experiment_script, small_scenario


def _scenario():
    return small_scenario(
        racks=2, machines=2, gpus=4, workload={"kind": "synthetic", "num_jobs": 12}
    )


@pytest.mark.parametrize(
    ("kind", "policy", "env"),
    [
        ("Scheduler", "dally", "Scheduler-v2"),
        ("Scheduler", "las-slots", "Scheduler-v2"),
        ("Scheduler", "las@v3", "Scheduler-v3"),
        ("Scheduler", "random@v3", "Scheduler-v3"),
        ("Placement", "dally", "Placement-v3"),
        ("DelayTimer", "dally-manual", "DelayTimer-v1"),
    ],
)
def test_each_listed_policy_runs_in_its_env(kind: str, policy: str, env: str) -> None:
    mod = experiment_script("env_baselines")
    assert policy in mod.POLICIES[kind]
    row = mod.run(kind, _scenario(), policy, seed=1)
    assert row["env"] == env
    assert row["policy"] == policy.removesuffix("@v3")
    assert row["unfinished"] == 0 and row["avg_jct_h"] > 0 and row["steps"] > 0


def test_v3_policies_get_preemption() -> None:
    mod = experiment_script("env_baselines")
    assert mod.env_kwargs("Scheduler", "las@v3") == {"actions": "per-job", "preemption": True}
