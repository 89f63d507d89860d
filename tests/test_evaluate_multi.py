"""``dlcluster evaluate`` with several agents, per-scenario seeds, confidence intervals and
"no decision" scenarios (``agents/evaluate.py``)."""

from __future__ import annotations

import json
import math
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy import stats as sps

pytest.importorskip("stable_baselines3")
pytest.importorskip("sb3_contrib")

from click.testing import CliRunner

from dlcluster_gym.agents import evaluate as ev
from dlcluster_gym.cli import main
from dlcluster_gym.cli.common import _seed_list
from dlcluster_gym.config import load_scenario
from dlcluster_gym.envs.agent_meta import META_NAME, write_agent_meta
from dlcluster_gym.envs.base import deep_merge

SHIPPED = Path(__file__).resolve().parent.parent / "agents" / "checkpoints"


def _scenario_file(tmp: Path, name: str, workload: dict) -> Path:
    data = deep_merge(load_scenario("dally-poisson-2rack").model_dump(mode="json"),
                      {"workload": workload})  # fmt: skip
    data["name"] = name
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _shipped(name: str) -> Path:
    path = SHIPPED / f"{name}.zip"
    if not path.is_file():
        pytest.skip(f"{path} not shipped")
    return path


# ---------------------------------------------------------------------------- the numbers
def test_confidence_intervals_are_students_t_as_scipy_computes_them() -> None:
    x = [10.0, 12.5, 9.0, 11.0, 13.5, 10.5, 12.0, 9.5, 11.5, 10.0]
    mean, half = ev.mean_ci(x)
    lo, hi = sps.t.interval(0.95, len(x) - 1, loc=np.mean(x), scale=sps.sem(x))
    assert mean == pytest.approx(np.mean(x)) and half == pytest.approx((hi - lo) / 2)
    assert half == pytest.approx(2.2621571627 * np.std(x, ddof=1) / math.sqrt(10))
    assert ev.mean_ci([3.0])[0] == 3.0 and math.isnan(ev.mean_ci([3.0])[1])
    assert ev.mean_ci([1.0, math.inf]) == (math.inf, pytest.approx(math.nan, nan_ok=True))
    assert all(math.isnan(v) for v in ev.mean_ci([1.0, math.nan]))
    assert ev.geometric_mean([0.5, 2.0, 1.5]) == pytest.approx(sps.gmean([0.5, 2.0, 1.5]))
    assert ev.geometric_mean([1.0, math.inf]) == math.inf and math.isnan(ev.geometric_mean([]))


def _row(scenario: str, seed: int, policy: str, kind: str, jct: float) -> dict:
    return {
        "scenario": scenario, "seed": seed, "policy": policy, "kind": kind, "avg_jct_s": jct,
        "p99_jct_s": 2 * jct, "makespan_s": 10 * jct, "jobs_unfinished": 0,
    }  # fmt: skip


def _rows() -> list[dict]:
    """Scenario ``hard``: the agent 5-15 % better than dally on each of 3 seeds; scenario
    ``idle``: every policy but the bound ties on every seed (within 5e-4)."""
    kinds = {"agent": "deployable", "dally": "deployable", "srw": "clairvoyant", "ideal": "bound"}
    hard = {"dally": 1.0, "srw": 0.8, "ideal": 0.5}
    idle = {"agent": 50.0, "dally": 50.0 * (1 + 5e-4), "srw": 50.0, "ideal": 20.0}
    rows = []
    for seed, agent in ((1, 0.85), (2, 0.9), (3, 0.95)):
        for p, kind in kinds.items():
            rows.append(_row("hard", seed, p, kind, 100.0 * seed * hard.get(p, agent)))
            rows.append(_row("idle", seed, p, kind, idle[p]))
    return rows


def test_per_seed_ratios_ci_and_no_decision_left_out_of_the_aggregate() -> None:
    rows = _rows()
    assert ev.no_decision(rows) == ["idle"]  # the bound differs, and does not count
    assert ev.no_decision(rows, rtol=1e-4) == []  # 5e-4 apart is a decision at 1e-4
    stats = {(r["scenario"], r["policy"]): r for r in ev.scenario_stats(rows, "dally")}
    hard = stats[("hard", "agent")]
    ratios = [0.85, 0.9, 0.95]
    lo, hi = sps.t.interval(0.95, 2, loc=np.mean(ratios), scale=sps.sem(ratios))
    assert hard["ratio"] == pytest.approx(0.9) and hard["ratio_ci"] == pytest.approx((hi - lo) / 2)
    assert hard["avg_jct_h"] == pytest.approx(np.mean([85, 180, 285]) / 3600)
    assert hard["decision"] and not stats[("idle", "agent")]["decision"]
    agg = {a["policy"]: a for a in ev.aggregate(list(stats.values()))}
    # only `hard` counts: the agent's aggregate is its ratio there, not pulled to 1 by `idle`
    assert agg["agent"]["ratio_geomean"] == pytest.approx(0.9) and agg["agent"]["scenarios"] == 1
    assert agg["srw"]["ratio_geomean"] == pytest.approx(0.8)
    md = ev.ci_table(list(stats.values()), list(agg.values()), "dally")
    assert "| idle (no decision) |" in md and "| geometric mean, 1 decisive scenario |" in md
    assert "| agent | dally | srw (clairvoyant) | ideal (bound) |" in md.splitlines()[0]
    assert "geometric mean, over the decisive scenarios" in md and "Student-t" in md
    assert "no decision: every policy that schedules" in md  # explains the marked row
    # a table where every scenario decides says nothing of ties
    hard = [r for r in stats.values() if r["scenario"] == "hard"]
    md_hard = ev.ci_table(hard, ev.aggregate(hard), "dally")
    assert "no decision" not in md_hard and "| hard |" in md_hard
    best = ev.best_rows(rows, ["agent"], "dally", exclude=["idle"], aggregate="geomean")
    every = {r["scenario"]: r for r in best}
    assert every["ALL"]["vs_best_deployable"] == pytest.approx(0.9)  # vs dally, `hard` only
    assert every["ALL"]["best_clairvoyant"] == "srw" and not every["idle"]["decision"]


def test_seed_ranges_and_lists() -> None:
    assert _seed_list("101-103,105, 101") == [101, 102, 103, 105]
    assert _seed_list("7") == [7] and len(_seed_list("101-110")) == 10
    res = CliRunner().invoke(main, ["evaluate", "--agent", str(_shipped("placement")),
                                    "--seeds", "5-3"])  # fmt: skip
    assert res.exit_code == 2 and "range '5-3' runs backwards" in res.output


# ---------------------------------------------------------------------------- the command
def test_several_agents_in_one_call_write_json_markdown_and_plot(tmp_path: Path) -> None:
    tiny = _scenario_file(tmp_path, "tiny", {"num_jobs": 30})
    idle = _scenario_file(tmp_path, "idle", {"num_jobs": 4, "load": 0.1})
    out = tmp_path / "eval"
    args = ["evaluate", "--agent", str(_shipped("placement")),
            "--agent", f"sched={_shipped('scheduler')}", "--scenario", str(tiny),
            "--scenario", str(idle), "--seeds", "1-2", "--baselines", "dally,las-slots,ideal",
            "--out", str(out)]  # fmt: skip
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    assert "fewer than 10 seeds" in res.output  # two seeds: the CIs are not worth much
    data = json.loads((out / "eval.json").read_text())
    policies = {"placement", "sched", "dally", "las-slots", "ideal"}
    assert {(r["scenario"], r["seed"], r["policy"]) for r in data["rows"]} == {
        (str(s), seed, p) for s in (tiny, idle) for seed in (1, 2) for p in policies
    }
    kinds = {r["policy"]: r["kind"] for r in data["rows"]}
    assert kinds["ideal"] == "bound" and kinds["sched"] == kinds["las-slots"] == "deployable"
    assert data["no_decision"] == [str(idle)]  # an idle cluster: every policy ties
    agg = {a["policy"]: a for a in data["aggregate"]}
    tiny_stats = {r["policy"]: r for r in data["stats"] if r["scenario"] == str(tiny)}
    assert agg["sched"]["scenarios"] == 1
    assert agg["sched"]["ratio_geomean"] == pytest.approx(tiny_stats["sched"]["ratio"])
    md = (out / "eval.md").read_text()
    assert f"| {idle} (no decision) |" in md and "± " in md and "ideal (bound)" in md
    # the command that repeats it, canonical (progress and format options left out)
    want = (f"dlcluster evaluate --agent={_shipped('placement')} "
            f"--agent=sched={_shipped('scheduler')} --scenario={tiny} --scenario={idle} "
            f"--seeds=1-2 --baselines=dally,las-slots,ideal --out={out}")  # fmt: skip
    assert data["command"] == want and f"- command: `{want}` (" in md
    assert data["wall_s"] > 0 and data["cores"] >= 1
    png = (out / "eval.png").read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 10_000
    assert "no decision (left out of the aggregate)" in res.output


def test_per_scenario_seeds_from_the_recorded_config(tmp_path: Path) -> None:
    """A scenario entry's own ``seeds`` replace the set's; the set's default when a config
    names none is ten seeds."""
    tiny = _scenario_file(tmp_path, "tiny", {"num_jobs": 20})
    path = tmp_path / "agent.zip"
    shutil.copy(_shipped("placement"), path)
    with zipfile.ZipFile(path) as z:
        meta = json.loads(z.read(META_NAME))
    meta["config"]["evaluation"] = {
        "seeds": [1, 2],
        "scenarios": [{"scenario": str(tiny), "label": "own", "seeds": [3]},
                      {"scenario": str(tiny), "label": "set"}],
    }  # fmt: skip
    write_agent_meta(path, {k: v for k, v in meta.items() if k != "format"})
    res = CliRunner().invoke(main, ["evaluate", "--agent", str(path), "--baselines", "dally",
                                    "--format", "json", "--quiet"])  # fmt: skip
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["seeds"] == {"own": [3], "set": [1, 2]}
    from dlcluster_gym.agents.config import DEFAULT_EVAL_SEEDS, EvalSetSpec

    assert len(EvalSetSpec(scenarios=[{"scenario": "dally-poisson-2rack"}]).seeds) == 10
    assert tuple(range(101, 111)) == DEFAULT_EVAL_SEEDS


# ---------------------------------------------------------------------------- las-slots
def test_las_slots_native_equals_its_env_rollout() -> None:
    import gymnasium as gym

    from dlcluster_gym import simulate
    from dlcluster_gym.baselines.queue_policies import LASSlots
    from dlcluster_gym.envs.policies import make_env_policy, rollout

    over = {"workload": {"num_jobs": 40}}
    env = gym.make("DLCluster/Scheduler-v2", scenario="dally-batch-2rack",
                   scenario_overrides=over, **LASSlots.env_kwargs)  # fmt: skip
    info, _, _ = rollout(env, make_env_policy("las-slots", env), seed=3)
    cfg = load_scenario(deep_merge(load_scenario("dally-batch-2rack").model_dump(), over))
    native = simulate(cfg, "las-slots", seed=3)
    assert native.summary["avg_jct_s"] == info["results"]["avg_jct_s"]
    assert native.summary["preemptions"] == info["results"]["preemptions"] > 0  # it preempts
    assert native.kind == "deployable" and native.policy == "las-slots"
    margin = simulate(cfg, "las-slots", seed=3, policy_params={"margin": 0.25}).summary
    assert margin["avg_jct_s"] != native.summary["avg_jct_s"]  # its parameters reach it


def test_las_slots_is_a_listed_deployable_policy_with_checked_parameters() -> None:
    from dlcluster_gym.errors import ConfigError
    from dlcluster_gym.scheduler import make_policy

    res = CliRunner().invoke(main, ["list", "policies"])
    line = next(ln for ln in res.output.splitlines() if ln.startswith("las-slots "))
    assert line.split()[1] == "deployable"
    with pytest.raises(ConfigError, match="policy 'las-slots' has no parameter 'margn'; "
                       r"parameters: margin \(float, default 4.0\)"):  # fmt: skip
        make_policy("las-slots", margn=1.0)
    import inspect

    from dlcluster_gym.baselines.queue_policies import IndexSlots, LASSlots
    from dlcluster_gym.envs.native import LASSlotsScheduler
    from dlcluster_gym.envs.policies import ENV_POLICIES

    assert LASSlotsScheduler.target == ENV_POLICIES["Scheduler"]["las-slots"][0]
    # the native declaration is the env policy's: IndexSlots's parameters, LASSlots's defaults
    declared = dict(inspect.signature(LASSlotsScheduler).parameters)
    env_side = {**inspect.signature(IndexSlots).parameters,
                **inspect.signature(LASSlots).parameters}  # fmt: skip
    for key in ("env", "rule", "guards"):
        env_side.pop(key)
    assert {k: p.default for k, p in declared.items()} == {
        k: p.default for k, p in env_side.items()
    }
    assert "las-slots" in ev.HEURISTICS["scheduler"]
    assert "las-slots" in ev.default_baselines(["scheduler"])


def test_rerun_replaces_only_the_named_columns_and_says_so(tmp_path: Path) -> None:
    """``--rerun``: the named columns run again, every other run is kept from eval.json (a
    doctored row stays as written, the rerun column's doctored row is replaced), the page
    names the rerun, and a different command, a label not evaluated or no earlier run fail
    clearly."""
    tiny = _scenario_file(tmp_path, "tiny", {"num_jobs": 30})
    out = tmp_path / "eval"
    args = ["evaluate", "--agent", f"sched={_shipped('scheduler')}", "--scenario", str(tiny),
            "--seeds", "1-2", "--baselines", "dally,fcfs", "--out", str(out),
            "--quiet"]  # fmt: skip
    res = CliRunner().invoke(main, [*args, "--rerun", "fcfs"])
    assert res.exit_code != 0 and "does not exist; run the evaluation once" in res.output
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    first = json.loads((out / "eval.json").read_text())
    doctored = json.loads(json.dumps(first))
    for r in doctored["rows"]:
        if r["policy"] in ("dally", "fcfs") and r["seed"] == 1:
            r["avg_jct_s"] += 1000.0  # dally's stays: not rerun; fcfs's is replaced
    (out / "eval.json").write_text(json.dumps(doctored))
    res = CliRunner().invoke(main, [*args, "--rerun", "fcfs"])
    assert res.exit_code == 0, res.output
    again = json.loads((out / "eval.json").read_text())
    (rerun,) = again["reruns"]
    assert rerun["policies"] == ["fcfs"] and rerun["wall_s"] > 0
    assert rerun["command"] == f"{first['command']} --rerun=fcfs"
    assert again["wall_s"] == first["wall_s"] and again["command"] == first["command"]
    by = {(r["policy"], r["seed"]): r["avg_jct_s"] for r in again["rows"]}
    was = {(r["policy"], r["seed"]): r["avg_jct_s"] for r in first["rows"]}
    assert by[("fcfs", 1)] == was[("fcfs", 1)]  # run again: the simulation's value
    assert by[("dally", 1)] == was[("dally", 1)] + 1000.0  # kept as the file had it
    assert [(r["policy"], r["seed"]) for r in again["rows"]] == list(was)
    assert "- rerun: the `fcfs` runs, again on later code by `" in (out / "eval.md").read_text()
    res = CliRunner().invoke(main, [*args, "--rerun", "tiresias"])
    assert res.exit_code != 0 and "--rerun 'tiresias': not among the evaluated" in res.output
    fewer = [a if a != "dally,fcfs" else "fcfs" for a in args]
    res = CliRunner().invoke(main, [*fewer, "--rerun", "fcfs"])
    assert res.exit_code != 0 and "has the columns sched, dally, fcfs" in res.output
    other = [a if a != "1-2" else "1-3" for a in args]
    res = CliRunner().invoke(main, [*other, "--rerun", "fcfs"])
    assert res.exit_code != 0 and "the same scenarios and seeds must run" in res.output
