"""experiments/agents/train_scheduler_v3.py: the warm start and PPO run on the recipe's envs."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import experiment_script

pytest.importorskip("sb3_contrib")


def test_a_tiny_warm_started_run_saves_a_v3_agent(tmp_path: Path) -> None:
    from dlcluster_gym.envs.agent_loader import read_agent_meta

    mod = experiment_script("train_scheduler_v3")
    out = tmp_path / "v3.zip"
    wall = mod.train(steps=256, out=out, episodes=1)
    meta = read_agent_meta(out)
    assert wall > 0 and meta["env_id"] == "DLCluster/Scheduler-v3"
    assert meta["warm_start"] == {"teacher": "las", "episodes": 1, "epochs": 20}
