"""The training progress callback (agents/progress.py): a line every ``every_s`` seconds with
steps, episodes, the mean return and the latest validation; the interval from the
environment; validation off the held-out seeds and without changing the training run."""

from __future__ import annotations

import re

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("sb3_contrib")

from sb3_contrib import MaskablePPO
from stable_baselines3.common.env_util import make_vec_env

from dlcluster_gym.agents.progress import INTERVAL_ENV, Progress, progress_interval_s
from dlcluster_gym.errors import ConfigError

ENV = "DLCluster/Scheduler-v3"
KW = {
    "scenario": "dally-batch-2rack",
    "scenario_overrides": {"workload": {"num_jobs": 12}},
    "preemption": True,
}
LINE = re.compile(
    r"^progress: (?P<steps>[\d,]+) steps \([\d,]+/s, \d+:\d\d:\d\d\), (?P<episodes>[\d,]+) "
    r"episodes, mean return (?P<ret>-?[\d,.]+) \(last \d+\)"
)


def _learn(steps: int, callback=None) -> MaskablePPO:
    venv = make_vec_env(ENV, n_envs=2, seed=0, env_kwargs=KW)
    model = MaskablePPO("MlpPolicy", venv, n_steps=64, batch_size=64, n_epochs=1, seed=0,
                        device="cpu")  # fmt: skip
    return model.learn(steps, callback=callback)


def test_lines_show_steps_episodes_return_and_validation(capsys) -> None:
    progress = Progress(gym.make(ENV, **KW), validation_seed=501, validate_every=128, every_s=0)
    _learn(256, progress)
    printed = capsys.readouterr().out.splitlines()
    lines = [line for line in printed if line.startswith("progress: ")]
    assert lines and lines == progress.lines
    matches = [LINE.match(line) for line in lines]
    assert all(matches), lines[:3]
    steps = [int(m["steps"].replace(",", "")) for m in matches]
    assert steps == sorted(steps) and steps[-1] == 256
    assert int(matches[-1]["episodes"].replace(",", "")) == progress.episodes > 0
    assert [s for s, _ in progress.validations] == [128, 256]
    assert all(np.isfinite(j) and j > 0 for _, j in progress.validations)
    assert lines[-1].endswith(
        f"validation avg JCT {progress.validations[-1][1]:.2f} h (seed 501 at 256 steps)"
    )


def test_the_interval_comes_from_the_environment(monkeypatch, capsys) -> None:
    monkeypatch.delenv(INTERVAL_ENV, raising=False)
    assert progress_interval_s() == 30.0 and Progress().every_s == 30.0
    monkeypatch.setenv(INTERVAL_ENV, "inf")  # quiet: no line, not even at the end
    _learn(128, Progress())
    assert "progress:" not in capsys.readouterr().out
    monkeypatch.setenv(INTERVAL_ENV, "0")
    progress = Progress()
    _learn(128, progress)
    assert len(progress.lines) >= 64 and "validation" not in progress.lines[-1]
    assert progress.every_s == 0 and Progress(every_s=5).every_s == 5  # the argument wins
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv(INTERVAL_ENV, bad)
        with pytest.raises(ConfigError, match=INTERVAL_ENV):
            Progress()


def test_held_out_seeds_are_refused_and_arguments_checked() -> None:
    for seed in (101, 110, 201, 210):
        with pytest.raises(ConfigError, match="held-out"):
            Progress(validation_seed=seed)
    with pytest.raises(ConfigError, match="validate_every"):
        Progress(validate_every=0)
    with pytest.raises(ConfigError, match="every_s"):
        Progress(every_s=-1)


def test_validation_does_not_change_the_training_run() -> None:
    plain = _learn(128)
    watched = _learn(128, Progress(gym.make(ENV, **KW), validate_every=64, every_s=float("inf")))
    for a, b in zip(plain.policy.parameters(), watched.policy.parameters(), strict=True):
        assert np.array_equal(a.detach().numpy(), b.detach().numpy())
