"""The README's from-scratch recipe (examples/train_from_scratch.py) runs end to end on a
tiny budget, prints progress lines while it trains, saves an agent that runs natively, and
reports the three held-out averages."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

pytest.importorskip("sb3_contrib")

from dlcluster_gym.api import simulate
from dlcluster_gym.config import load_scenario
from dlcluster_gym.envs.base import deep_merge

RECIPE = Path(__file__).resolve().parents[1] / "examples" / "train_from_scratch.py"


def _recipe():
    spec = importlib.util.spec_from_file_location("train_from_scratch", RECIPE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_recipe_is_at_most_30_lines() -> None:
    assert len(RECIPE.read_text().splitlines()) <= 30


@pytest.mark.extended  # CI runs it after the default run (docs/testing.md)
def test_the_recipe_trains_saves_and_evaluates(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("DLCLUSTER_PROGRESS_S", "0")  # a line at every step, not every 30 s
    mod = _recipe()
    small = {"workload": {"num_jobs": 20}}
    mod.TRAIN_KW = {
        **mod.TRAIN_KW,
        "scenarios": [{"scenario": "dally-batch-2rack", "overrides": small}],
    }
    out = tmp_path / "agent.zip"
    got = mod.main(steps=256, out=str(out), held_out=[201])
    assert set(got) == {"random", "las", f"agent:{out}"}
    assert all(math.isfinite(v) and v > 0 for v in got.values())
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("progress: ")]
    assert len(lines) > 100 and lines[-1].startswith("progress: 2,048 steps (")
    assert " episodes, mean return " in lines[-1] and "validation every 50,000 steps" in lines[-1]
    cfg = deep_merge(load_scenario("dally-batch-2rack").model_dump(), small)
    res = simulate(cfg, f"agent:{out}", 201)
    assert res.kind == "deployable" and res.summary["jobs_unfinished"] == 0
