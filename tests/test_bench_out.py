"""The benchmark scripts' ``--out`` pages: what the docs include is what a run printed."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

from conftest import experiment_script

ROOT = Path(__file__).resolve().parents[1]


def _bench_out():
    spec = importlib.util.spec_from_file_location(
        "bench_out", ROOT / "experiments" / "benchmarks" / "bench_out.py"
    )
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def test_render_keeps_tables_turns_comments_into_text_and_the_rest_into_code():
    lines = ["# Best of 3.", "| a | b |", "|---|---|", "| 1 | 2 |", "decision mean 1.9 ms", "x"]
    assert _bench_out().render(lines) == [
        "", "Best of 3.", "", "| a | b |", "|---|---|", "| 1 | 2 |",
        "", "```text", "decision mean 1.9 ms", "x", "```", "",
    ]  # fmt: skip


def test_a_benchmark_run_writes_its_page_with_command_machine_and_load(tmp_path):
    out = tmp_path / "engine.md"
    script = ROOT / "experiments" / "benchmarks" / "bench_engine.py"
    cmd = [sys.executable, str(script), "--repeat", "1",
           "--cells", "dally-batch-2rack:fcfs", "--oversubscription", "0",
           "--out", str(out)]  # fmt: skip
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    page = out.read_text()
    assert page.startswith(
        "**Engine speed.** Written by `python experiments/benchmarks/bench_engine.py"
    )
    assert "load average" in page and "cores" in page
    speed = float(page.split("machine speed ", 1)[1].split(" CPU s", 1)[0])
    assert 0.0 < speed < 60.0  # the reference loop's CPU seconds on this machine
    rows = [ln for ln in page.splitlines() if ln.startswith("| dally-batch-2rack:fcfs")]
    assert len(rows) == 2  # sharing off and on
    assert rows[0] in run.stdout  # the page holds what the run printed


def test_every_page_the_performance_docs_include_exists():
    doc = (ROOT / "docs" / "performance.md").read_text()
    pages = [ln.split('"')[1] for ln in doc.splitlines() if ln.startswith("--8<--")]
    assert len(pages) >= 6
    for page in pages:
        assert (ROOT / page).is_file(), f"docs/performance.md includes {page}: not written yet"


def test_the_sweep_target_column_says_by_how_much_a_policy_misses():
    mod = experiment_script("bench_engine")
    assert mod.sweep_target(10.0, 1.0) == "yes"  # 10x fcfs, 10 s
    assert mod.sweep_target(18.0, 1.0) == "no: 1.2x the 15x-fcfs budget"
    assert mod.sweep_target(45.0, 4.0) == "no: 1.5x the 30 s"
    assert mod.sweep_target(60.0, 2.0) == "no: 2.0x the 15x-fcfs budget, 2.0x the 30 s"
    row = mod._sweep_row({"cell": "s:p", "timeout_s": 200.0}, 2.0)
    assert row.endswith("| no: 6.7x+ the 15x-fcfs budget, 6.7x+ the 30 s |")


def test_the_env_benchmark_says_by_how_much_an_env_misses_its_target():
    mod = experiment_script("bench_envs")
    assert mod.target_line("Scheduler-v4", 5200.0, 5000.0) == (
        "Scheduler-v4: 5,200 steps/CPU-s, target 5,000: met."
    )
    assert mod.target_line("Placement-v3", 2500.0, 10000.0) == (
        "Placement-v3: 2,500 steps/CPU-s, target 10,000: missed by 7,500 (4.00x faster needed)."
    )
    assert set(mod.TARGETS) <= set(mod.DEFAULT_ROWS)  # the targets are rows the page runs


def test_the_ppo_benchmark_judges_the_newest_scheduler_env_with_two_envs():
    mod = experiment_script("bench_ppo")
    from dlcluster_gym.envs import latest

    newest = f"Scheduler-v{latest('Scheduler')}"
    rows = [
        {"env": newest, "n_envs": 2, "vec_env": "DummyVecEnv", "steps_per_s": 480.0},
        {"env": newest, "n_envs": 2, "vec_env": "SubprocVecEnv", "steps_per_s": 400.0},
        {"env": newest, "n_envs": 4, "vec_env": "DummyVecEnv", "steps_per_s": 900.0},
        {"env": "Scheduler-v3", "n_envs": 2, "vec_env": "DummyVecEnv", "steps_per_s": 700.0},
    ]
    line = mod.target_line(rows)
    assert f"{newest} with 2 envs: 480 steps/s (DummyVecEnv), target 600: missed by 120" in line
    rows[0]["steps_per_s"] = 650.0
    assert mod.target_line(rows).rstrip().endswith("target 600: met.")
    assert mod.target_line(rows[3:]) == ""  # no row of the newest env with 2 envs


def _fake_run(tmp_path: Path, walls: list[float], finish: list[float], codes: list[str]) -> Path:
    """A leaderboard run directory: results.csv and one cell file per row, each file's time
    set to the cell's finish."""
    import os

    import pandas as pd

    run = tmp_path / "run"
    (run / "cells").mkdir(parents=True)
    ids = [f"sc{i % 2}.pol{i}.s1" for i in range(len(walls))]
    pd.DataFrame({
        "id": ids, "scenario": [f"sc{i % 2}" for i in range(len(walls))],
        "entrant": [f"pol{i}" for i in range(len(walls))], "code": codes,
        "wall_s": walls, "cpu_s": [0.9 * w for w in walls],
    }).to_csv(run / "results.csv", index=False)  # fmt: skip
    for cid, t in zip(ids, finish, strict=True):
        f = run / "cells" / f"{cid}.json"
        f.write_text("{}")
        os.utime(f, (1e9 + t, 1e9 + t))
    return run


def test_leaderboard_run_time_spans_first_start_to_last_finish(tmp_path):
    script = ROOT / "experiments" / "benchmarks" / "bench_leaderboard.py"
    # two workers: cells of 100, 300 and 50 s, finishing at 100, 300 and 150 s: 5 min of wall
    run = _fake_run(tmp_path, [100.0, 300.0, 50.0], [100.0, 300.0, 150.0], ["a"] * 3)
    out = tmp_path / "time.md"
    cmd = [sys.executable, str(script), "--run", str(run), "--target-min", "4", "--out", str(out)]
    got = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert got.returncode == 0, got.stderr
    text = out.read_text()
    assert "3 cells; their wall times sum to 450 s (405 CPU s)" in text
    assert "5.0 min (300 s); target 4 min: missed by 1.0 min (1.25x)" in text
    assert "| `sc1` | 1 | 300 | 66.7 % | 270 | 300 |" in text
    # a fresh checkout (every file at one time) and a page of several code versions: no wall
    flat = _fake_run(tmp_path / "f", [100.0, 300.0], [500.0, 500.0], ["a", "a"])
    mixed = _fake_run(tmp_path / "m", [100.0, 300.0], [100.0, 300.0], ["a", "b"])
    for run, why in ((flat, "do not span the run"), (mixed, "2 versions of the code")):
        got = subprocess.run([sys.executable, str(script), "--run", str(run)],
                             capture_output=True, text=True, timeout=120)  # fmt: skip
        assert got.returncode == 0 and why in got.stdout and "Run wall time" not in got.stdout
