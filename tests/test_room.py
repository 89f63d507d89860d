"""The room (``dlcluster_gym.leaderboard.room``): best clairvoyant reference against best
deployable heuristic per seed, its mean with a 95 % CI, the "no room" rule, the fraction of
it an agent closes, and one small end-to-end run (``experiments/agents/room.py``)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml
from conftest import experiment_script
from scipy import stats as sps

from dlcluster_gym import simulate
from dlcluster_gym.config import load_scenario
from dlcluster_gym.envs.base import deep_merge
from dlcluster_gym.leaderboard import room

# policy -> seed -> average JCT (s). Per seed the best deployable is dally, las-slots, dally
# and the best clairvoyant srsf, srw, srsf; by the mean over seeds, dally and srsf.
JCTS = {
    "fcfs": {1: 300.0, 2: 320.0, 3: 310.0},
    "dally": {1: 100.0, 2: 120.0, 3: 110.0},
    "las-slots": {1: 105.0, 2: 115.0, 3: 112.0},
    "srsf": {1: 80.0, 2: 100.0, 3: 90.0},
    "srw": {1: 90.0, 2: 92.0, 3: 95.0},
    "themis": {1: 1.0, 2: 1.0, 3: 1.0},  # not in the reference set: ignored
}


def test_room_per_seed_best_names_and_ci() -> None:
    r = room.scenario_room(JCTS)
    assert r["seeds"] == [1, 2, 3]
    assert r["deployable"] == ["fcfs", "dally", "las-slots"] and r["clairvoyant"] == ["srsf", "srw"]
    per = {s["seed"]: s for s in r["per_seed"]}
    assert [per[s]["deployable"] for s in (1, 2, 3)] == ["dally", "las-slots", "dally"]
    assert [per[s]["clairvoyant"] for s in (1, 2, 3)] == ["srsf", "srw", "srsf"]
    want = [1 - 80 / 100, 1 - 92 / 115, 1 - 90 / 110]
    assert [per[s]["room"] for s in (1, 2, 3)] == pytest.approx(want)
    lo, hi = sps.t.interval(0.95, 2, loc=np.mean(want), scale=sps.sem(want))
    assert r["room"] == pytest.approx(np.mean(want))
    assert r["room_ci"] == pytest.approx((hi - lo) / 2)
    assert (r["best_deployable"], r["best_clairvoyant"]) == ("dally", "srsf")
    assert r["best_deployable_avg_jct_s"] == pytest.approx(110.0)
    assert r["best_clairvoyant_avg_jct_s"] == pytest.approx(90.0)
    assert r["verdict"] == room.ROOM


def test_no_room_below_five_percent_and_left_out_of_the_mean() -> None:
    flat = {"dally": {1: 100.0, 2: 100.0}, "srsf": {1: 96.0, 2: 95.5}}  # 4.25 %
    edge = {"dally": {1: 100.0, 2: 100.0}, "srsf": {1: 95.0, 2: 95.0}}  # exactly 5 %
    level = {"dally": {1: 50.0, 2: 60.0}, "srw": {1: 50.0, 2: 60.0}}  # room 0
    table = room.room_table({"flat": flat, "edge": edge, "level": level, "main": JCTS})
    verdicts = {r["scenario"]: r["verdict"] for r in table}
    assert verdicts == {"flat": "no room", "edge": "room", "level": "no room", "main": "room"}
    assert table[2]["room"] == 0.0 and table[2]["room_ci"] == 0.0
    mean, n = room.mean_room(table)
    assert n == 2 and mean == pytest.approx((0.05 + room.scenario_room(JCTS)["room"]) / 2)
    assert room.scenario_room(flat, threshold=0.04)["verdict"] == "room"


def test_a_kind_missing_or_unfinished_runs() -> None:
    only_deployable = room.scenario_room({"dally": {1: 1.0, 2: 2.0}})
    assert only_deployable["verdict"] == room.NOT_AVAILABLE and math.isnan(only_deployable["room"])
    assert only_deployable["best_clairvoyant"] is None
    # a run that left jobs unfinished (inf) is never best, on its seed or by the mean
    jct = {"dally": {1: 100.0, 2: 100.0}, "qssf": {1: math.inf, 2: 50.0},
           "srsf": {1: 80.0, 2: 40.0}}  # fmt: skip
    r = room.scenario_room(jct)
    assert [s["deployable"] for s in r["per_seed"]] == ["dally", "qssf"]
    assert r["best_deployable"] == "dally"
    assert r["room"] == pytest.approx(0.2)
    # a seed without a clairvoyant run has no room; the others still count
    gap = room.scenario_room({"dally": {1: 100.0, 2: 100.0}, "srsf": {1: 80.0}})
    assert gap["seeds"] == [1, 2] and math.isnan(gap["per_seed"][1]["room"])
    assert gap["room"] == pytest.approx(0.2) and gap["best_clairvoyant"] is None


def test_fraction_closed_paired_per_seed() -> None:
    r = room.scenario_room(JCTS)
    d = {1: 100.0, 2: 115.0, 3: 110.0}
    c = {1: 80.0, 2: 92.0, 3: 90.0}
    halfway = {s: (d[s] + c[s]) / 2 for s in d}
    f = room.fraction_closed(halfway, r)
    assert f["fraction"] == pytest.approx(0.5) and f["fraction_ci"] == pytest.approx(0.0)
    assert f["seeds"] == 3 and f["verdict"] == "room"
    agent = {1: 90.0, 2: 115.0, 3: 80.0}  # gains 10, 0, 30 over rooms 20, 23, 20
    f = room.fraction_closed(agent, r)
    assert f["fraction"] == pytest.approx(40.0 / 63.0)  # a ratio of sums, not a mean of ratios
    assert f["fraction_lo"] < f["fraction"] < f["fraction_hi"]
    assert f["fraction_ci"] == pytest.approx((f["fraction_hi"] - f["fraction_lo"]) / 2)
    # the bootstrap's resamples: every ratio lies between the per-seed extremes (0 and 1.5)
    assert f["fraction_lo"] >= 0.0 and f["fraction_hi"] <= 1.5
    assert room.fraction_closed(agent, r) == f  # a fixed generator: the same interval
    better = room.fraction_closed({s: c[s] * 0.9 for s in c}, r)
    assert better["fraction"] > 1.0
    worse = room.fraction_closed({s: d[s] * 1.1 for s in d}, r)
    assert worse["fraction"] < 0.0
    assert room.fraction_closed({1: math.inf, 2: 100.0, 3: 100.0}, r)["fraction"] == -math.inf
    # a scenario with room 0: no fraction, and it stays out of the mean over scenarios
    level = room.scenario_room({"dally": {1: 50.0, 2: 60.0}, "srw": {1: 50.0, 2: 60.0}})
    none = room.fraction_closed({1: 40.0, 2: 50.0}, level)
    assert none["verdict"] == "no room" and math.isnan(none["fraction"]) and none["seeds"] == 0
    mean, n = room.mean_fraction([f, none, better])
    assert n == 2 and mean == pytest.approx((f["fraction"] + better["fraction"]) / 2)


def test_a_seed_with_almost_no_room_does_not_rule_the_fraction() -> None:
    """Per-seed ratios would give (100 - 99) / (100 - 99.999) = 1000 on seed 2; the ratio
    of sums stays near the other seeds' gains."""
    jcts = {"dally": {1: 100.0, 2: 100.0, 3: 100.0}, "srsf": {1: 80.0, 2: 99.999, 3: 80.0}}
    r = room.scenario_room(jcts)
    f = room.fraction_closed({1: 90.0, 2: 99.0, 3: 90.0}, r)
    assert f["fraction"] == pytest.approx(21.0 / 40.001)


def test_timer_grid_entrants() -> None:
    """The fixed-timer grid: dally-manual with rack timer twice the machine timer, every
    entrant a clairvoyant reference beside the two deployable Dally variants."""
    grid = room.timer_entrants((0.0, 12.0))
    assert grid == {
        "timers-0h": ("dally-manual", {"machine_timer_s": 0.0, "rack_timer_s": 0.0}),
        "timers-12h": ("dally-manual", {"machine_timer_s": 43200.0, "rack_timer_s": 86400.0}),
    }
    kinds = room.timer_reference((0.0, 12.0))
    assert kinds == {"dally": "deployable", "dally-manual": "deployable",
                     "timers-0h": "clairvoyant", "timers-12h": "clairvoyant"}  # fmt: skip


def _row(scenario: str, seed: int, policy: str, kind: str, jct: float) -> dict:
    return {"scenario": scenario, "seed": seed, "policy": policy, "kind": kind,
            "avg_jct_s": jct, "p99_jct_s": 2 * jct, "makespan_s": 10 * jct,
            "jobs_unfinished": 0}  # fmt: skip


def test_evaluate_reports_the_fraction_closed() -> None:
    """``dlcluster evaluate``'s report: the room over the reference policies it ran, each
    agent's fraction closed, "no room" scenarios out of the summary."""
    from dlcluster_gym.agents import evaluate as ev

    kinds = {"dally": "deployable", "gandiva": "deployable", "srsf": "clairvoyant",
             "ideal": "bound"}  # fmt: skip
    rows = []
    for seed in (1, 2, 3):
        for p, kind in kinds.items():
            hard = {"dally": 100.0, "gandiva": 90.0, "srsf": 80.0, "ideal": 10.0}[p]
            rows.append(_row("hard", seed, p, kind, hard * seed))
            rows.append(_row("flat", seed, p, kind, 50.0 if p != "ideal" else 10.0))
        rows.append(_row("hard", seed, "agent", "deployable", 90.0 * seed))
        rows.append(_row("flat", seed, "agent", "deployable", 60.0))
    report = ev.evaluation_report(rows, ["agent"])
    r = report["room"]
    assert r["reference"] == ["dally", "srsf"]  # gandiva (not gandiva-placement) does not count
    assert "qssf" in r["missing"] and "ideal" not in r["reference"]
    closed = {c["scenario"]: c for c in r["closed"]}
    assert closed["hard"]["fraction"] == pytest.approx(0.5)  # (100 - 90) / (100 - 80)
    assert closed["flat"]["verdict"] == "no room" and math.isnan(closed["flat"]["fraction"])
    assert r["summary"] == [{"agent": "agent", "fraction": pytest.approx(0.5), "scenarios": 1}]
    heading, md = ev.report_sections(report, rows)[-1]
    assert heading.startswith("each agent's fraction of the room closed")
    assert "| hard | dally (0.06 h) | srsf (0.04 h) | 20.0 ± 0.0 % | 0.50 ± 0.00 |" in md
    assert "| flat |" in md and "(no room) | no room |" in md
    assert "| mean over the 1 scenario with room | | | | 0.50 |" in md
    json.dumps(report)  # the report stays JSON
    # without a clairvoyant reference there is no room to show: the section is left out
    plain = [x for x in rows if x["policy"] != "srsf"]
    sections = ev.report_sections(ev.evaluation_report(plain, ["agent"]), plain)
    assert not any("room" in h for h, _ in sections)
    assert {"srsf", "qssf", "qssf-preemptive"} <= set(ev.default_baselines([]))


def _tiny(tmp_path: Path) -> Path:
    """20 Dally batch jobs on 4 machines: enough queueing for the policies to differ."""
    base = load_scenario("dally-batch-2rack").model_dump(mode="json")
    group = {**base["cluster"]["groups"][0], "racks": 1, "machines_per_rack": 4}
    data = deep_merge(base, {"workload": {"num_jobs": 20}, "cluster": {"groups": [group]}})
    data["name"] = "room-tiny"
    path = tmp_path / "room-tiny.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_end_to_end_on_a_small_scenario(tmp_path: Path) -> None:
    scen = _tiny(tmp_path)
    jcts, rows = room.run_room([str(scen)], [1, 2], workers=1, progress=False)
    assert {r["status"] for r in rows} == {"ok"} and len(rows) == 2 * len(room.REFERENCE)
    got = jcts[str(scen)]
    assert set(got) == set(room.REFERENCE)
    assert got["srsf"][2] == simulate(str(scen), "srsf", seed=2).summary["avg_jct_s"]
    (r,) = room.room_table(jcts)
    assert r["verdict"] in ("room", "no room") and 0.0 <= r["room"] < 1.0
    # the script: the same table, with the command and wall time on the page
    script = experiment_script("room")
    out = tmp_path / "out"
    script.main(["--scenarios", f"{scen},no-such-scenario", "--seeds", "1-2", "--out", str(out)])
    data = json.loads((out / "room.json").read_text())
    assert data["table"][0]["room"] == pytest.approx(r["room"])
    assert data["absent"] == ["no-such-scenario"] and data["wall_s"] > 0
    md = (out / "room.md").read_text()
    assert "Command: `python experiments/agents/room.py --scenarios" in md and " s wall" in md
    assert f"| `{scen}` | 2 | {r['best_deployable']} |" in md
    assert "| room, srsf alone | room, srw alone |" in md
    included = (out / "table.md").read_text()
    assert included.startswith(
        "| scenario |"
    ) and "Written by `python experiments/agents/room.py" in (included)
    (out / "room.md").unlink()
    script.main(["--render", "--out", str(out)])  # the pages again from room.json
    assert (out / "room.md").read_text() == md


def test_run_room_runs_entrants_under_their_labels() -> None:
    """A grid entrant is dally-manual with its params: at the paper's 12 h + 12 h it is
    dally-manual's run exactly, under its own label."""
    jcts, rows = room.run_room(
        ["dally-timers-2rack-load07"], [101], policies=("dally-manual",),
        entrants=room.timer_entrants((0.0, 12.0)), progress=False,
    )  # fmt: skip
    got = jcts["dally-timers-2rack-load07"]
    assert set(got) == {"dally-manual", "timers-0h", "timers-12h"}
    assert got["timers-12h"][101] == got["dally-manual"][101]
    assert got["timers-0h"][101] != got["dally-manual"][101]
    assert {r["entrant"] for r in rows} == set(got)


def test_the_timer_room_page_is_what_its_script_writes() -> None:
    """The committed delay-timer room page, rewritten from its runs and the agent's
    evaluation page with the code as it is now (``timer_room.py --render``)."""
    script = experiment_script("timer_room")
    root = Path(__file__).resolve().parents[1]
    out = root / "experiments" / "results" / "room"
    report = json.loads((out / "timers.json").read_text())
    ev = json.loads((root / report["eval"]).read_text())
    assert (out / "timers.md").read_text() == script.page(script.summarize(report, ev))


def test_the_ppo_defaults_page_is_what_its_script_writes() -> None:
    """The committed page of plain PPO on each env's defaults, rewritten from its JSON (room
    and fraction closed included) with the code as it is now."""
    script = experiment_script("ppo_defaults")
    out = Path(__file__).resolve().parents[1] / "experiments/results/agents/ppo_defaults"
    saved = json.loads((out / "ppo_defaults.json").read_text())
    text = script.page(saved["rows"], saved["command"], saved["wall_s"])
    assert (out / "ppo_defaults.md").read_text() == text
    v4 = next(r for r in saved["rows"] if r["env"].endswith("-v4"))
    rm, closed = script.room_closed(v4)
    assert rm["verdict"] == "room" and closed["seeds"] == len(v4["deterministic"])
