"""experiments/reproduce_gavel.py: a tiny run end to end (runs, plot, report with the claims
table), the report rebuilt from its CSV alone, and the gain it reports computed by hand."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import experiment_script


def test_a_tiny_run_writes_the_report_and_report_only_rebuilds_it(tmp_path, monkeypatch):
    mod = experiment_script("reproduce_gavel")
    full = mod.scenario

    def short(rate, jobs):  # jobs of 3-10 minutes: a run of seconds
        sc = full(rate, jobs)
        wl = sc.workload.model_copy(update={"log10_duration_min": ((0.5, 1.0, 1.0),)})
        return sc.model_copy(update={"workload": wl})

    monkeypatch.setattr(mod, "scenario", short)
    claims = experiment_script("claims")
    argv = ["--rates", "30", "--seeds", "1", "--jobs", "40", "--window", "10", "30",
            "--policies", "gavel-las", "gavel-las-agnostic", "--workers", "1",
            "--out", str(tmp_path)]  # fmt: skip
    mod.main(argv)
    df = pd.read_csv(tmp_path / "runs.csv")
    assert sorted(df["policy"]) == ["gavel-las", "gavel-las-agnostic"]
    assert (df["jobs_completed"] == 40).all()
    assert (tmp_path / "jct_vs_rate.png").stat().st_size > 0
    text = (tmp_path / "report.md").read_text()
    rows = claims.parse_table(text, "Claims (section 7): paper vs ours")
    assert len(rows) == 1
    jct = df.set_index("policy")["window_avg_jct_h"]
    gain = (jct["gavel-las-agnostic"] / jct["gavel-las"] - 1.0) * 100.0
    assert rows[0]["ours"] == f"{gain:+.1f} %"  # one case
    assert "--rates 30 --seeds 1" in text
    mod.main([*argv, "--report-only"])
    rebuilt = (tmp_path / "report.md").read_text()
    assert rebuilt.split("Scenario", 1)[1] == text.split("Scenario", 1)[1]


def test_the_window_must_lie_inside_the_jobs():
    mod = experiment_script("reproduce_gavel")
    with pytest.raises(SystemExit):
        mod.parse_args(["--jobs", "10", "--window", "5", "20"])
