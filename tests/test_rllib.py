"""The RLlib wrapper (agents/rllib_env.py) and a very short RLlib PPO run
(agents/rllib_example.py; skipped where ``ray.rllib`` does not import: the ``rllib`` extra)."""

from __future__ import annotations

import importlib.util
import math

import gymnasium as gym
import numpy as np
import pytest

from dlcluster_gym.agents.rllib_env import MASK_KEY, OBS_KEY, ActionMaskObservation
from dlcluster_gym.errors import ConfigError, InvalidActionError

TINY = {"scenario": "dally-poisson-2rack", "scenario_overrides": {"workload": {"num_jobs": 20}}}


def _rllib_missing() -> str | None:
    if importlib.util.find_spec("ray") is None:
        return "ray is not installed (pip install -e '.[rllib]')"
    try:
        import ray.rllib  # noqa: F401
    except Exception as e:  # ImportError, or a version clash raised while importing
        return f"ray.rllib does not import here ({type(e).__name__}: {e}); see the rllib extra"
    return None


def _masked(env_id: str = "DLCluster/Scheduler-v2") -> ActionMaskObservation:
    return ActionMaskObservation(gym.make(env_id, **TINY))


def test_the_observation_carries_the_envs_mask():
    env = _masked()
    obs, _ = env.reset(seed=3)
    assert env.observation_space.contains(obs)
    inner = env.unwrapped
    assert np.array_equal(obs[MASK_KEY], inner.action_masks().astype(np.float32))
    assert obs[OBS_KEY].shape == inner.observation_space.shape
    steps = 0
    while True:
        allowed = np.flatnonzero(obs[MASK_KEY])
        obs, _, term, trunc, info = env.step(int(allowed[-1]))
        steps += 1
        assert np.array_equal(obs[MASK_KEY], inner.action_masks().astype(np.float32))
        if term or trunc:
            break
    assert env.actions_checked == steps
    assert info["results"]["avg_jct_s"] > 0


def test_a_masked_action_is_refused_before_the_env_sees_it():
    env = _masked()
    obs, _ = env.reset(seed=3)
    masked = np.flatnonzero(obs[MASK_KEY] == 0)
    assert masked.size, "the first decision should mask some actions"
    engine = env.unwrapped.engine
    before = (engine.now, env.unwrapped.action_masks().tolist())
    with pytest.raises(InvalidActionError, match="masked action"):
        env.step(int(masked[0]))
    assert env.actions_checked == 0
    assert (engine.now, env.unwrapped.action_masks().tolist()) == before  # env untouched
    with pytest.raises(InvalidActionError, match="outside the action space"):
        env.step(env.action_space.n)


def test_the_wrapper_needs_a_masked_discrete_env():
    with pytest.raises(ConfigError, match="Discrete"):
        ActionMaskObservation(gym.make("DLCluster/DelayTimer-v1", scenario="dally-poisson-2rack"))


def test_a_multidiscrete_env_gets_its_heads_masks_concatenated():
    env_id = "DLCluster/Scheduler-v3"
    if env_id not in gym.registry:
        pytest.skip(f"{env_id} is not registered")
    env = _masked(env_id)
    if not isinstance(env.action_space, gym.spaces.MultiDiscrete):
        pytest.skip(f"{env_id} has a {env.action_space} action space")
    obs, _ = env.reset(seed=3)
    assert obs[MASK_KEY].size == int(env.action_space.nvec.sum())
    assert env.heads == tuple(int(n) for n in env.action_space.nvec)
    assert env.observation_space.contains(obs)
    offsets = np.concatenate(([0], np.cumsum(env.heads)[:-1]))
    while True:  # the first allowed choice of each head
        parts = zip(offsets, env.heads, strict=True)
        choice = [int(np.flatnonzero(obs[MASK_KEY][o : o + n])[0]) for o, n in parts]
        obs, _, term, trunc, _ = env.step(np.array(choice))
        if term or trunc:
            break
    assert env.actions_checked > 0


_MISSING = _rllib_missing()
needs_rllib = pytest.mark.skipif(_MISSING is not None, reason=str(_MISSING))


@pytest.fixture(scope="module")
def ray_local():
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.mark.slow  # .ci/run runs it on every build, after the default run
@needs_rllib
def test_one_rllib_ppo_iteration_is_finite_and_never_takes_a_masked_action(ray_local):
    """One PPO iteration with one env-runner process of two envs; the wrapper raises on a
    masked action, and a failing env runner stops training (no quiet restart: the next
    test), so finishing the iteration means none was taken."""
    from dlcluster_gym.agents.rllib_example import greedy_action, held_out_jct_h, train

    run = train(
        "DLCluster/Scheduler-v2",
        TINY,
        iterations=1,
        env_runners=1,
        envs_per_runner=2,
        train_batch=256,
        minibatch=64,
        epochs=2,
    )
    try:
        assert len(run.history) == 1
        m = run.last
        assert m["timesteps"] >= 256
        for key in ("policy_loss", "vf_loss", "total_loss"):
            assert math.isfinite(m[key]), (key, m)
        module = run.algo.get_module()
        env = _masked()
        obs, _ = env.reset(seed=101)
        a = greedy_action(module, obs, env.heads)
        assert obs[MASK_KEY][a] == 1.0
        jct = held_out_jct_h(module, "DLCluster/Scheduler-v2", TINY, seeds=(101,))
        assert jct > 0 and math.isfinite(jct)
    finally:
        run.algo.stop()


@needs_rllib
def test_a_refused_action_stops_rllib_training(ray_local, monkeypatch):
    """The wrapper's refusal is not swallowed by RLlib (sampling in this process here; the
    example's remote env runners are not restarted either: restart_failed_env_runners=False,
    checked by hand)."""
    from dlcluster_gym.agents import rllib_example

    def refuse(self, action):
        raise InvalidActionError("masked action (refused on purpose)")

    monkeypatch.setattr(ActionMaskObservation, "step", refuse)
    algo = rllib_example.build_config(
        "DLCluster/Scheduler-v2", TINY, env_runners=0, envs_per_runner=1, train_batch=64,
        minibatch=32, epochs=1,
    ).build_algo()  # fmt: skip
    try:
        with pytest.raises(Exception) as err:
            algo.train()
        chain, e = [], err.value
        while e is not None:
            chain.append(e)
            e = e.__cause__ or e.__context__
        assert any(isinstance(x, InvalidActionError) for x in chain), chain
    finally:
        algo.stop()
