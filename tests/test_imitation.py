"""Behaviour cloning building blocks (``agents/imitation.py``) and the newcomer script
``examples/train_scheduler.py`` (issue #17, item 8)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3")
pytest.importorskip("sb3_contrib")

from sb3_contrib import MaskablePPO

import dlcluster_gym  # noqa: F401
from dlcluster_gym.agents.imitation import (
    Demonstrations,
    agreement,
    average_jct_h,
    clone,
    record,
    returns_to_go,
)
from dlcluster_gym.envs.policies import make_env_policy, rollout
from dlcluster_gym.errors import ConfigError, UnknownNameError

ROOT = Path(__file__).resolve().parent.parent
TINY = {"workload": {"num_jobs": 30}}
LAS_KW = {"preemption": True, "order": "las", "running_order": "attained"}


def tiny_env(kind: str = "Scheduler", **kw) -> gym.Env:
    return gym.make(
        f"DLCluster/{kind}-v0", scenario="dally-poisson-2rack", scenario_overrides=TINY, **kw
    )


def test_record_keeps_every_teacher_step_with_its_mask_and_is_deterministic() -> None:
    env = tiny_env(**LAS_KW)
    demos = record(env, "las-slots", [3, 4])
    again = record(tiny_env(**LAS_KW), "las-slots", [3, 4])
    for key in ("obs", "act", "mask", "rew", "end"):
        np.testing.assert_array_equal(getattr(demos, key), getattr(again, key))
    n = len(demos)
    assert demos.obs.shape == (n, *env.observation_space.shape)
    assert demos.mask.shape == (n, env.action_space.n) and demos.end.sum() == 2
    assert demos.mask[np.arange(n), demos.act].all()  # the teacher's action stays learnable
    # the recorded actions are the teacher's own episode, step for step
    _, total, steps = rollout(env, make_env_policy("las-slots", env.unwrapped), seed=3)
    first = int(np.flatnonzero(demos.end)[0]) + 1
    assert steps == first and total == pytest.approx(demos.rew[:first].sum())


def test_box_actions_are_recorded_without_masks() -> None:
    demos = record(tiny_env("DelayTimer"), "dally", [1])
    assert demos.mask is None and demos.act.ndim == 2 and demos.end[-1]


def test_bad_arguments_are_clear_errors() -> None:
    env = tiny_env()
    with pytest.raises(UnknownNameError, match=r"unknown Scheduler env policy 'lass-slots'.*"):
        record(env, "lass-slots", [1])
    with pytest.raises(ConfigError, match=r"record\('las-slots'\): seeds is empty"):
        record(env, "las-slots", [])
    with pytest.raises(ConfigError, match=r"average_jct_h: seeds is empty"):
        average_jct_h(env, "random", ())
    with pytest.raises(ConfigError, match="seeds must be integers"):
        average_jct_h(env, "random", ["1"])
    with pytest.raises(UnknownNameError, match="unknown Scheduler env policy 'randm'"):
        average_jct_h(env, "randm", (1,))
    empty = Demonstrations(
        np.zeros((0, 3), np.float32), np.zeros(0, np.int64), None, np.zeros(0), np.zeros(0, bool)
    )
    with pytest.raises(ConfigError, match="demonstrations are empty"):
        clone(object(), empty)


def test_returns_to_go_restart_at_each_episode_end() -> None:
    rew = np.array([1.0, 2.0, 3.0, 4.0])
    end = np.array([False, True, False, True])
    np.testing.assert_allclose(returns_to_go(rew, end, 0.5, 2.0), [1.0, 1.0, 2.5, 2.0])


def test_average_jct_h_matches_rollout_and_is_inf_for_unfinished_jobs() -> None:
    env = tiny_env()
    got = average_jct_h(env, "dally", (5, 6))
    want = [rollout(env, make_env_policy("dally", env.unwrapped), seed=s)[0] for s in (5, 6)]
    assert got == pytest.approx(np.mean([i["results"]["avg_jct_s"] / 3600 for i in want]))

    class Idle:  # never starts anything: the episode ends with every job unfinished
        def predict(self, obs, state=None, episode_start=None, deterministic=True):
            return np.asarray(0), state

    assert average_jct_h(tiny_env(), Idle(), (5,)) == float("inf")


def test_clone_learns_the_teacher_and_is_deterministic() -> None:
    import torch

    torch.set_num_threads(1)  # as training does: several threads crawl on a busy machine
    env = tiny_env(**LAS_KW)
    demos = record(env, "las-slots", [1, 2])

    def fitted() -> MaskablePPO:
        model = MaskablePPO("MlpPolicy", env, seed=0, device="cpu")
        clone(model, demos, epochs=20, batch_size=64, seed=1)
        return model

    a, b = fitted(), fitted()
    for pa, pb in zip(a.policy.parameters(), b.policy.parameters(), strict=True):
        assert np.array_equal(pa.detach().numpy(), pb.detach().numpy())
    untrained = MaskablePPO("MlpPolicy", env, seed=0, device="cpu")
    assert agreement(a, demos) > 0.8 > agreement(untrained, demos)


@pytest.mark.slow
def test_readme_script_clones_the_teacher_and_beats_random() -> None:
    """The README's script, with fewer episodes, epochs and PPO steps (its path, not its
    numbers: those are in the README)."""
    spec = importlib.util.spec_from_file_location(
        "train_scheduler", ROOT / "examples" / "train_scheduler.py"
    )
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    jct = example.main(episodes=6, epochs=60, ppo_steps=1, held_out=(101,))
    assert jct["agreement"] > 0.8
    assert jct["cloned"] < jct["random"] and jct["after PPO"] < jct["random"]


def test_the_docs_show_the_example_script_in_full() -> None:
    """What a newcomer copies from the docs is the script that is tested, and it is 30 lines;
    the README links to it."""
    script = (ROOT / "examples" / "train_scheduler.py").read_text()
    assert "examples/train_scheduler.py" in (ROOT / "README.md").read_text()
    text = (ROOT / "docs" / "agents.md").read_text()
    section = text[text.index("A first training script") :]
    block = section[section.index("```python\n") + len("```python\n") :]
    assert block[: block.index("```")] == script
    assert len(script.splitlines()) <= 30


def test_multidiscrete_teachers_are_recorded_with_per_head_masks_and_cloned() -> None:
    """Scheduler-v3's (act, placement) actions: one mask per head, the teacher's value set in
    each; cloning its ``las`` teacher reaches high agreement."""
    env = gym.make("DLCluster/Scheduler-v3", scenario="dally-batch-2rack",
                   scenario_overrides={"workload": {"num_jobs": 40}}, preemption=True)  # fmt: skip
    demos = record(env, "las", seeds=[1, 2])
    assert demos.act.shape[1] == 2 and demos.mask.shape == (len(demos), 8)
    rows = np.arange(len(demos))
    assert demos.mask[rows, demos.act[:, 0]].all() and demos.mask[rows, 2 + demos.act[:, 1]].all()
    model = MaskablePPO("MlpPolicy", env, seed=0)
    clone(model, demos, epochs=30)
    assert agreement(model, demos) > 0.85
