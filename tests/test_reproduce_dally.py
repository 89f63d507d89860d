"""Smoke test of experiments/reproductions/reproduce_dally.py: runs, resumes, writes report and
figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

SCRIPT = (
    Path(__file__).resolve().parents[1] / "experiments" / "reproductions" / "reproduce_dally.py"
)


def run(args: list[str]) -> None:
    subprocess.run([sys.executable, str(SCRIPT), *args], check=True, capture_output=True)


@pytest.mark.extended  # CI runs it after the default run (docs/testing.md)
def test_reproduction_runs_resumes_and_reports(tmp_path):
    args = [
        "--racks",
        "2",
        "--seeds",
        "1",
        "--arrivals",
        "poisson",
        "batch",
        "--policies",
        "dally",
        "gandiva",
        "dally-relocate",
        "--timer-scenarios",
        "dally-timers-2rack-load11",
        "--workers",
        "1",
        "--out",
        str(tmp_path),
    ]
    run(args)
    runs = pd.read_csv(tmp_path / "runs.csv")
    assert len(runs) == 6 and set(runs.policy) == {"dally", "gandiva", "dally-relocate"}
    assert (runs.jobs_unfinished == 0).all()
    assert (runs.t99_s <= runs.makespan_s).all() and (runs.t99_s > 0).all()
    timers = pd.read_csv(tmp_path / "timers.csv")
    assert set(timers.timers) == {"auto-tuned", "manual 12h/24h", "zero", "infinite"}
    for name in ("fig6_batch.png", "fig6_poisson.png", "fig7_jct_cdf.png", "fig11_avg_jct.png"):
        assert (tmp_path / name).stat().st_size > 10_000
    report = (tmp_path / "report.md").read_text()
    assert "## Section 5 claims: paper vs ours" in report
    assert (
        "| 5.2.5, Fig. 11(a): average JCT 23 to 51 % lower than Gandiva (batch; 39 % higher on "
        "2 racks) |" in report
    )
    assert "## Delay timers where they bind" in report
    cells = sorted((tmp_path / "cells").glob("*.json"))
    assert len(cells) == 10
    stamps = [c.stat().st_mtime_ns for c in cells]
    run([*args, "--resume"])  # nothing to rerun: finished cells are reused
    assert [c.stat().st_mtime_ns for c in cells] == stamps
    assert pd.read_csv(tmp_path / "runs.csv").equals(runs)
    run(["--report-only", "--out", str(tmp_path)])  # the same report from the CSVs
    assert [c.stat().st_mtime_ns for c in cells] == stamps
    rebuilt = (tmp_path / "report.md").read_text()
    assert "with --report-only, without re-running them" in rebuilt.splitlines()[2]
    assert rebuilt.splitlines()[3:] == report.splitlines()[3:]


def test_comm_concentration_hand_computed():
    import importlib.util

    import numpy as np

    spec = importlib.util.spec_from_file_location("reproduce_dally", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(SCRIPT.parent))  # the script imports experiments/reproductions/claims.py
    try:
        spec.loader.exec_module(mod)
    finally:
        sys.path.remove(str(SCRIPT.parent))
    # six jobs: overheads 10, 5, 1, 0.5, 0.25, 0.25 (comm / compute with compute 1, 1, 2, ...)
    compute = np.array([1.0, 1.0, 2.0, 2.0, 4.0, 4.0])
    comm = np.array([10.0, 5.0, 2.0, 1.0, 1.0, 1.0])
    got = mod.comm_concentration(comm / compute, comm, compute)
    assert got["comm_top3_share"] == 16.0 / 17.0  # (10 + 5 + 1) / 17
    assert got["comm_overhead_trim5"] == 0.25  # the sixth job only
    assert got["comm_overhead_weighted"] == 20.0 / 14.0


@pytest.mark.extended  # CI runs it after the default run (docs/testing.md)
def test_report_with_any_policy_subset(tmp_path):
    """The paper's four schedulers only (no relocate variants), then single policies reused
    from the same cells: the report is written, and tables whose policy is missing say so."""
    args = [
        "--racks",
        "8",
        "--seeds",
        "1",
        "--arrivals",
        "batch",
        "--timer-scenarios",
        "--workers",
        "1",
        "--out",
        str(tmp_path),
    ]
    run([*args, "--policies", "gandiva", "tiresias", "dally-manual", "dally"])
    report = (tmp_path / "report.md").read_text()
    assert "Dally below Tiresias: average on " in report
    assert "Dally (relocate) below Tiresias: skipped (no run of Dally (relocate))." in report
    assert set(pd.read_csv(tmp_path / "runs.csv").policy) == {
        "gandiva",
        "tiresias",
        "dally-manual",
        "dally",
    }
    for subset in (["dally"], ["tiresias"], ["gandiva", "dally-manual"]):
        run([*args, "--resume", "--policies", *subset])
        assert set(pd.read_csv(tmp_path / "runs.csv").policy) == set(subset)
    report = (tmp_path / "report.md").read_text()
    assert "Dally below Tiresias: skipped (no run of Dally, Tiresias)." in report
