"""experiments/reproductions/reproduce_crius.py: the runs it plans follow --seeds, --philly
included."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

SCRIPT = (
    Path(__file__).resolve().parents[1] / "experiments" / "reproductions" / "reproduce_crius.py"
)


def load():
    spec = importlib.util.spec_from_file_location("reproduce_crius", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(SCRIPT.parent))  # the script imports experiments/reproductions/claims.py
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    return mod


def test_philly_runs_the_given_seeds(monkeypatch):
    mod = load()
    calls = []

    def fake_run(scenario, policy, seed, sigma, noise_seed):
        calls.append((scenario, policy, seed, sigma, noise_seed))
        return {"scenario": scenario, "policy": policy, "seed": seed, "avg_jct_s": 1.0,
                "wall_s": 0.0}  # fmt: skip

    monkeypatch.setattr(mod, "run", fake_run)
    args = mod.parse_args(
        ["--seeds", "4", "7", "--policies", "fcfs", "--philly", "--philly-policies", "crius",
         "gavel", "--estimate-noise", "0.05", "--noise-seed", "3"]
    )  # fmt: skip
    runs = mod.run_all(args)
    testbed, philly = "crius-testbed-64gpu", "crius-philly-1280gpu"
    assert calls == [
        (testbed, "fcfs", 4, 0.05, 3),
        (testbed, "fcfs", 7, 0.05, 3),
        (philly, "crius", 4, 0.05, 3),
        (philly, "gavel", 4, 0.05, 3),
        (philly, "crius", 7, 0.05, 3),
        (philly, "gavel", 7, 0.05, 3),
    ]
    assert sorted(r["seed"] for r in runs if r["scenario"] == philly) == [4, 4, 7, 7]
    assert "--seeds 4 7" in mod.command_line(args)
    assert "--philly --philly-policies crius gavel" in mod.command_line(args)


def test_without_philly_only_the_testbed_runs():
    mod = load()
    plan = mod.planned_runs(mod.parse_args(["--seeds", "2", "--policies", "crius"]))
    assert plan == [("crius-testbed-64gpu", "crius", 2)]
    assert (
        mod.command_line(mod.parse_args([]))
        == "python experiments/reproductions/reproduce_crius.py"
    )
