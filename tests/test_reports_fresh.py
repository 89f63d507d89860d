"""The committed reproduction results are what their scripts compute now.

Each report under ``experiments/results/`` is written by its script from the rows of a
committed CSV. For every reproduction, one quick cell is run again with the script's own
function and compared with its committed row: a change to the simulator that moves a
published number fails here until the script is re-run and its results committed.
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
from conftest import experiment_script, needs_traces

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "experiments" / "results"
RTOL = 1e-9
NOT_COMPARED = {"wall_s", "decision_ms_mean", "scenario"}  # machine-dependent or labels


def _row(csv: Path, **where) -> pd.Series:
    df = pd.read_csv(csv)
    for k, v in where.items():
        df = df[df[k] == v]
    assert len(df) == 1, f"{csv}: {len(df)} rows for {where}"
    return df.iloc[0]


def _same(committed: pd.Series, now: dict, where: str) -> None:
    compared = 0
    for key, want in committed.items():
        if key in NOT_COMPARED or key not in now:
            continue
        got = now[key]
        if isinstance(want, str) or isinstance(got, str):
            assert str(got) == str(want), f"{where}: {key} is {got!r}, committed {want!r}"
        elif isinstance(want, float) and math.isnan(want):
            assert got is None or (isinstance(got, float) and math.isnan(got)), (where, key)
        else:
            assert got == pytest.approx(float(want), rel=RTOL, abs=1e-12), (
                f"{where}: {key} is {got!r} now, {want!r} in the committed results; re-run "
                "the script and commit its results"
            )
        compared += 1
    assert compared >= 5, f"{where}: only {compared} columns compared"


def test_dally_reproduction_cell() -> None:
    mod = experiment_script("reproduce_dally")
    # the committed Gandiva rows are its placement and migration (as Dally 5.1.3 describes
    # it), the registered gandiva-placement; gandiva itself also time-slices
    res = mod.simulate_spec("dally-batch-2rack", ("gandiva-placement", {}), 1)
    got = {**res.summary, **mod.extra_summary(res)}
    want = _row(RESULTS / "dally" / "runs.csv", arrival="batch", racks=2, policy="gandiva", seed=1)
    _same(want, got, "dally batch 2 racks gandiva-placement seed 1")


@pytest.mark.parametrize("policy", ["ideal", "random", "themis"])
def test_cassini_reproduction_cell(policy: str) -> None:
    mod = experiment_script("reproduce_cassini")
    got = mod.run("cassini-testbed-poisson", policy, 1)
    csv = RESULTS / "cassini" / "runs.csv"
    want = _row(csv, scenario="cassini-testbed-poisson", policy=policy, seed=1)
    _same(want, got, f"cassini-testbed-poisson {policy} seed 1")


@needs_traces  # crius-testbed-64gpu draws its jobs from the Philly trace
def test_crius_reproduction_cell() -> None:
    mod = experiment_script("reproduce_crius")
    got = mod.run("crius-testbed-64gpu", "crius", 1)
    want = _row(
        RESULTS / "crius" / "runs.csv", scenario="crius-testbed-64gpu", policy="crius", seed=1
    )
    _same(want, got, "crius-testbed-64gpu crius seed 1")


def test_nearchus_reproduction_cell(monkeypatch) -> None:
    mod = experiment_script("reproduce_nearchus")
    monkeypatch.setattr(mod, "CLUSTERS", ("A",))
    got = mod.run_multi([1])
    committed = pd.read_csv(RESULTS / "nearchus" / "multi.csv")
    for _, row in got.iterrows():
        want = committed[
            (committed.cluster == row.cluster)
            & (committed.seed == row.seed)
            & (committed.policy == row.policy)
        ]
        assert len(want) == 1, (row.cluster, row.seed, row.policy)
        _same(want.iloc[0], row.to_dict(), f"nearchus multi {row.cluster} {row.policy} seed 1")


@pytest.mark.extended  # a 1,000-job run; CI runs it after the default run (docs/testing.md)
def test_gavel_reproduction_cell() -> None:
    mod = experiment_script("reproduce_gavel")
    got = mod.run("single", "gavel-las", 3.0, 2, mod.JOBS, mod.WINDOW)
    want = _row(
        RESULTS / "gavel" / "runs.csv", trace="single", policy="gavel-las", rate_per_hour=3.0,
        seed=2,
    )  # fmt: skip
    _same(want, got, "gavel-continuous-single gavel-las 3 jobs/h seed 2")


@pytest.mark.parametrize(
    "row", ["cassini-testbed-poisson.themis.s1", "cassini-testbed-poisson.cassini-demand.s2"]
)
def test_themis_workers_leaderboard_cell(row: str) -> None:
    """One published leaderboard's cells re-run with ``dlcluster leaderboard --verify``."""
    from click.testing import CliRunner

    from dlcluster_gym.cli import main

    out = RESULTS / "leaderboards" / "themis-workers"
    res = CliRunner().invoke(main, ["leaderboard", "--verify", str(out), "--row", row])
    assert res.exit_code == 0, res.output
    assert "1 of 1 row(s) reproduced exactly" in res.output


def test_agent_goals_page_matches_the_evaluation_pages() -> None:
    """goals.md is what agent_goals.py computes from the evaluation JSON it links."""
    agent_goals = experiment_script("agent_goals")
    assert (agent_goals.RESULTS / "goals.md").read_text() == agent_goals.goals_table()
    room = (agent_goals.RESULTS / "room_closed.md").read_text()
    assert room == agent_goals.room_closed_table()
    assert "| plain PPO on `Scheduler-v4`'s defaults" in room and "| delay-timer agent" in room


def test_readme_heldout_table_matches_the_evaluation_pages() -> None:
    """README.md's held-out and room tables are what agent_goals.py writes from the pages."""
    agent_goals = experiment_script("agent_goals")
    text = agent_goals.README.read_text()
    assert agent_goals.readme_with_table(text) == text
    assert "| `batch-8rack` |" in text and "| geometric mean |" in text
    assert "| scheduler agent (shipped) |" in text and "| placement agent (shipped) |" in text
