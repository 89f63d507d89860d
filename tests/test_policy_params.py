"""Policy parameters: every policy's declaration (its typed constructor) is checked when the
policy is made, by name, import path or class; unknown or ill-typed ones list the valid ones."""

from __future__ import annotations

import pytest

from dlcluster_gym import simulate
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.scheduler import (
    check_policy_params,
    make_policy,
    policies,
    policy_parameters,
    resolve_policy,
)
from tests.conftest import small_scenario
from tests.fixtures.my_policy import SmallestFirst


@pytest.mark.parametrize("name", ["fcfs", "fcfs-consolidated", "random", "elasticflow-ls"])
def test_policies_without_parameters_reject_any(name):
    with pytest.raises(ConfigError, match=f"policy '{name}' has no parameter 'round_s'; "
                       r"parameters: \(none\)"):  # fmt: skip
        make_policy(name, round_s=60)


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("gandiva", {"migration": "maybe"}, "'migration': Input should be a valid boolean"),
        ("tiresias", {"preemption": 1}, "'preemption': Input should be a valid boolean"),
        ("gandiva", {"migration": "no way"}, "'migration': Input should be a valid boolean"),
        ("cassini", {"max_candidates": 2.5}, "'max_candidates': Input should be a valid integer"),
        ("cassini", {"max_candidates": True}, "'max_candidates': Input should be a valid integer"),
        ("themis", {"lease_s": "soon"}, "'lease_s': Input should be a valid number"),
        ("gavel", {"round_s": "soon"}, "'round_s': Input should be a valid number"),
        ("dally", {"machine_timer_s": 5}, "has no parameter 'machine_timer_s'; parameters: "),
    ],
)
def test_ill_typed_or_unknown_parameters_are_clear_errors(name, params, message):
    with pytest.raises(ConfigError, match=message) as err:
        make_policy(name, **params)
    assert "parameters: " in str(err.value) and "\n" not in str(err.value)


def test_every_registered_policy_declares_its_parameters():
    for name in policies():
        factory, _ = resolve_policy(name)
        model = policy_parameters(factory)
        assert model is not None, f"{name} accepts any keyword"
        for field in model.model_fields.values():
            assert not field.is_required(), f"{name}: every parameter has a default"


def test_valid_parameters_are_typed():
    assert check_policy_params("dally", {"preemption": False}) == {"preemption": False}
    assert check_policy_params("themis", {"lease_s": 60}) == {"lease_s": 60.0}
    assert make_policy("gandiva", migration=False).migration is False


def test_simulate_with_a_class_or_an_object():
    sc = small_scenario(workload={"kind": "synthetic", "num_jobs": 4})
    by_class = simulate(sc, SmallestFirst, policy_params={"max_starts": 2})
    by_name = simulate(
        sc, "tests.fixtures.my_policy:SmallestFirst", policy_params={"max_starts": 2}
    )
    assert by_class.summary["avg_jct_s"] == by_name.summary["avg_jct_s"]
    with pytest.raises(ConfigError, match="has no parameter 'nope'; parameters: max_starts"):
        simulate(sc, SmallestFirst, policy_params={"nope": 1})
    with pytest.raises(ConfigError, match=r"given with a policy object \(SmallestFirst\)"):
        simulate(sc, SmallestFirst(), policy_params={"max_starts": 2})
    with pytest.raises(ConfigError, match=r"has no schedule\(view\) method"):
        simulate(sc, object())


@pytest.mark.parametrize(
    ("env_id", "name", "params", "message"),
    [
        ("DLCluster/Placement-v2", "random", {"sed": 1}, "env policy random' has no parameter"),
        ("DLCluster/DelayTimer-v1", "dally-manual", {"machine_h": "a"},
         "'machine_h': Input should be a valid number"),
        ("DLCluster/Scheduler-v2", "dally", {"machine_timer_s": 5},
         "policy 'dally' has no parameter 'machine_timer_s'"),
        ("DLCluster/Scheduler-v2", "gittins-slots", {"margin": "x"},
         "'margin': Input should be a valid number"),
    ],
)  # fmt: skip
def test_env_policy_parameters_are_checked_when_made(env_id, name, params, message):
    """``make_env_policy`` checks parameters as ``make_policy`` does (a native scheduler acting
    through Scheduler-v2 fails at construction, not at its first step)."""
    import gymnasium as gym

    import dlcluster_gym  # noqa: F401  (registers the envs)
    from dlcluster_gym.envs.policies import make_env_policy

    env = gym.make(env_id, **({"preemption": True} if name == "gittins-slots" else {}))
    with pytest.raises(ConfigError, match=message) as err:
        make_env_policy(name, env, **params)
    assert "\n" not in str(err.value)
    assert make_env_policy(name, env) is not None  # the defaults are valid
