"""Learned agents (issue #8): configs, smoke training, checkpoints, ``agent:PATH``, bad input."""

from __future__ import annotations

import json
import re
import shlex
import zipfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import yaml

pytest.importorskip("stable_baselines3")
pytest.importorskip("sb3_contrib")

from click.testing import CliRunner

import dlcluster_gym  # noqa: F401
from dlcluster_gym import simulate
from dlcluster_gym.agents.config import load_agent_config
from dlcluster_gym.agents.envs import available
from dlcluster_gym.cli import main
from dlcluster_gym.envs.agent_loader import agent_env_kwargs
from dlcluster_gym.envs.agent_meta import META_NAME, read_agent_meta
from dlcluster_gym.envs.placement import OBS_SIZE
from dlcluster_gym.envs.policies import make_env_policy, rollout
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.scheduler import make_policy

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "agents" / "checkpoints"
TINY = {"workload": {"num_jobs": 30}}
TINY_SPEC = {"scenario": "dally-poisson-2rack", "label": "tiny", "overrides": TINY}


def tiny_config(agent: str) -> dict:
    warm: dict = {"episodes": 1, "epochs": 2}
    if agent == "placement":  # rollout labels, in-process (workers: 1)
        warm["rollout"] = {"horizon_h": 24.0, "workers": 1, "deviation_weight": 3.0}
    return {
        "agent": agent,
        "algorithm": "maskable_ppo" if agent == "placement" else "ppo",
        "ppo": {"n_steps": 64, "batch_size": 32, "n_epochs": 2},
        "warm_start": warm,
        "train": {"timesteps": 256, "n_envs": 2, "scenarios": [TINY_SPEC]},
        "validation": {"scenarios": [TINY_SPEC], "seeds": [5], "every_steps": 128},
        "evaluation": {"scenarios": [TINY_SPEC], "seeds": [6]},
    }


def tiny_env(kind: str, **kw) -> gym.Env:
    return gym.make(
        f"DLCluster/{kind}-v0", scenario="dally-poisson-2rack", scenario_overrides=TINY, **kw
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A few hundred steps of each agent through `dlcluster train` (a few seconds each)."""
    base = tmp_path_factory.mktemp("agents")
    out = {}
    for agent in ("placement", "delay-timer"):
        cfg = base / f"{agent}.yaml"
        cfg.write_text(yaml.safe_dump(tiny_config(agent)))
        res = CliRunner().invoke(
            main,
            ["train", "--agent", agent, "--config", str(cfg), "--out", str(base / agent), "-q"],
        )
        assert res.exit_code == 0, res.output
        out[agent] = base / agent
    return out


# ---------------------------------------------------------------------------- configs
AGENT_CONFIGS = sorted(p.stem for p in (ROOT / "configs" / "agents").glob("*.yaml"))


@pytest.mark.parametrize("name", AGENT_CONFIGS)
def test_shipped_configs_load_and_hold_out_larger_clusters_and_poisson(name: str) -> None:
    cfg = load_agent_config(name)
    train = {s.scenario for s in cfg.train.scenarios}
    held = {s.scenario for s in cfg.evaluation.scenarios}
    assert not set(cfg.evaluation.seeds) & set(range(*cfg.train.seeds))
    assert not set(cfg.evaluation.seeds) & set(cfg.validation.seeds)
    assert "dally-poisson-8rack" in held and not any("8rack" in s for s in train)
    assert any(s.requires_traces for s in cfg.evaluation.scenarios)


def test_config_with_unknown_key_is_a_clear_error(tmp_path: Path) -> None:
    data = tiny_config("placement")
    data["ppo"]["learning_rte"] = 1e-3
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=r"bad\.yaml.*\n.*ppo\.learning_rte: unknown key"):
        load_agent_config(path)
    with pytest.raises(ConfigError, match="not found"):
        load_agent_config(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"train": {"seeds": [100000, 1000]}},
         r"train\.seeds: must be \[lo, hi\) with 0 <= lo < hi .*\(got \[100000, 1000\]\)"),
        ({"train": {"seeds": [5, 5]}}, r"train\.seeds: must be \[lo, hi\)"),
        ({"train": {"seeds": [-1, 5]}}, r"train\.seeds: must be \[lo, hi\)"),
        ({"evaluation": {"seeds": [6, -2]}}, r"evaluation\.seeds\.1: Input should be greater"),
        ({"train": {"scenarios": [{**TINY_SPEC, "overrides": {"workload": {"load": -1}}}]}},
         r"^\S*bad\.yaml: train\.scenarios\.0\.overrides: workload\.dally\.load: Input should "
         r"be greater than 0 \(got -1\)$"),
        ({"validation": {"scenarios": [TINY_SPEC, {"scenario": "nope"}]}},
         r"^\S*bad\.yaml: validation\.scenarios\.1\.scenario: unknown scenario 'nope'"),
        ({"env_kwargs": {"order": "sjf"}},
         r"^\S*bad\.yaml: env_kwargs: Scheduler-v0: order must be one of las, .*got 'sjf'$"),
        ({"warm_start": {"teacher": "lass-slots"}},
         r"bad\.yaml: warm_start\.teacher: unknown Scheduler env policy 'lass-slots'"),
        ({"evaluation": {"reference": "dallly"}},
         r"bad\.yaml: evaluation\.reference: unknown policy 'dallly'"),
    ],
)  # fmt: skip
def test_bad_training_config_names_the_file_and_field(
    tmp_path: Path, change: dict, match: str
) -> None:
    """Checked when the config loads, before any env or training starts."""
    data = tiny_config("scheduler")
    for part, fields in change.items():
        data[part] = {**(data.get(part) or {}), **fields}
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match=match):
        load_agent_config(path)
    res = CliRunner().invoke(
        main, ["train", "--agent", "scheduler", "--config", str(path), "--out",
               str(tmp_path / "run"), "-q"],
    )  # fmt: skip
    assert res.exit_code != 0 and "internal error" not in res.output
    assert "bad.yaml" in res.output and not (tmp_path / "run").exists()


def test_trace_scenarios_are_skipped_without_a_trace_root(tmp_path: Path) -> None:
    cfg = load_agent_config("placement")
    keep, skipped = available(cfg.evaluation.scenarios, tmp_path / "no-traces")
    assert skipped == ["trace-itp01-l0.9"]
    assert len(keep) == len(cfg.evaluation.scenarios) - 1


def test_training_that_needs_traces_stops_without_a_trace_root(tmp_path: Path) -> None:
    """A training scenario with ``requires_traces`` is not skipped like a validation one: the
    run would silently train another recipe. One line naming the file, the label and how to
    point at the traces; nothing written."""
    data = tiny_config("scheduler")
    trace = {"scenario": "itp-cluster02", "label": "trace-itp02", "requires_traces": True}
    data["train"]["scenarios"] = [TINY_SPEC, trace]
    path = tmp_path / "needs-traces.yaml"
    path.write_text(yaml.safe_dump(data))
    res = CliRunner().invoke(
        main, ["train", "--agent", "scheduler", "--config", str(path), "--out",
               str(tmp_path / "run"), "--traces-dir", str(tmp_path / "no-traces"), "-q"],
    )  # fmt: skip
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    for part in ("needs-traces.yaml", "'trace-itp02'", "DLCLUSTER_TRACES", "../shared/traces"):
        assert part in res.output
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------------------- rollout labels
def test_rollout_value_is_the_jct_reward_of_following_the_base_policy() -> None:
    """With a horizon past the episode's end, the value of Dally's own answer is exactly the
    sum of the env's jct rewards (job-hours) from that offer on when Dally keeps deciding;
    the forked rollouts leave the env itself untouched."""
    from dlcluster_gym.agents.rollouts import _rollout_value
    from dlcluster_gym.baselines.dally import Dally

    env = tiny_env("Placement").unwrapped
    env.reset(seed=11)
    env.step(Dally.choose(env._offer))  # the reward pending since t = 0 is now taken
    own = Dally.choose(env._offer)
    value = _rollout_value(env, own, 1e9)
    other = _rollout_value(env, 0 if own else 6, 1e9)
    total, done = 0.0, False
    while not done:
        _, r, term, trunc, _ = env.step(Dally.choose(env._offer))
        total, done = total + r, term or trunc
    assert total < 0 and value == pytest.approx(total, rel=1e-9)
    assert other != value


@pytest.mark.extended  # CI runs it after the default run (docs/testing.md)
def test_rollout_labels_do_not_depend_on_workers_and_margin_clones_the_teacher() -> None:
    from dlcluster_gym.agents.config import AgentConfig
    from dlcluster_gym.agents.rollouts import rollout_data

    cfg = AgentConfig.model_validate(tiny_config("placement"))
    one, s1 = rollout_data(cfg, 2, 0, horizon_h=24.0, margin=0.0, workers=1)
    two, _ = rollout_data(cfg, 2, 0, horizon_h=24.0, margin=0.0, workers=2)
    for k in ("obs", "act", "base", "q"):
        np.testing.assert_array_equal(np.asarray(one[k]), np.asarray(two[k]))
    assert s1["labels_total"] == 60 and len(s1["episodes"]) == 2
    q = np.asarray(one["q"])
    act = np.asarray(one["act"])
    tried = ~np.isnan(q[np.arange(len(act)), act])
    assert tried.all()  # every label was evaluated ...
    best = np.nanmax(q, axis=1)
    assert np.all(q[np.arange(len(act)), act] == best)  # ... and is the best (margin 0)
    cloned, _ = rollout_data(cfg, 1, 0, horizon_h=24.0, margin=1e9, workers=1)
    np.testing.assert_array_equal(np.asarray(cloned["act"]), np.asarray(cloned["base"]))


def test_rollout_labels_need_the_base_policy_as_teacher() -> None:
    from dlcluster_gym.agents.config import AgentConfig
    from dlcluster_gym.agents.rollouts import rollout_data

    data = tiny_config("placement")
    data["env_kwargs"] = {"base_policy": "tiresias"}
    cfg = AgentConfig.model_validate(data)
    with pytest.raises(ConfigError, match=r"base policy 'tiresias'.*teacher"):
        rollout_data(cfg, 1, 0, horizon_h=24.0, margin=0.0, workers=1)


# ---------------------------------------------------------------------------- smoke training
def test_training_writes_artifacts(trained: dict[str, Path]) -> None:
    for agent, out in trained.items():
        for f in ("best.zip", "last.zip", "curve.png", "curve.csv", "config.yaml"):
            assert (out / f).is_file(), (agent, f)
        assert any((out / "tb").rglob("events.out.tfevents.*"))
        meta = read_agent_meta(out / "best.zip")
        assert meta["agent"] == agent and meta["command"].startswith("dlcluster train")
        assert meta["config"]["train"]["timesteps"] == 256
        assert meta["warm_start"]["teacher"] == "dally"
        if agent == "placement":
            labels = meta["warm_start"]["rollout"]
            assert labels["labels_total"] == 30 and labels["horizon_h"] == 24.0
            saved = np.load(out / "rollout_labels.npz")
            assert saved["obs"].shape == (30, saved["obs"].shape[1]) and saved["q"].shape == (30, 7)
        assert (out / "best.zip").stat().st_size < 2_000_000


def test_placement_agent_predicts_valid_masked_actions(trained: dict[str, Path]) -> None:
    path = trained["placement"] / "best.zip"
    env = tiny_env("Placement", invalid_action="raise")
    pol = make_env_policy(f"agent:{path}", env)
    info, _, steps = rollout(env, pol, seed=3)  # a masked action would raise
    # a few hundred steps make a poor agent, which may leave a job to the stall guard
    done = info["results"]["jobs_completed"]
    assert steps > 0 and done + info["results"].get("jobs_unfinished", 0) == 30 and done >= 25
    # the native adapter (what `simulate --policy agent:PATH` runs) gives the same results
    res = simulate({**_tiny_scenario()}, f"agent:{path}", 3)
    assert res.summary["jobs_completed"] == done
    assert res.summary["avg_jct_s"] == pytest.approx(info["results"]["avg_jct_s"], rel=1e-12)


def test_delay_timer_agent_acts_and_runs_natively(trained: dict[str, Path]) -> None:
    path = trained["delay-timer"] / "best.zip"
    env = tiny_env("DelayTimer")
    pol = make_env_policy(f"agent:{path}", env)
    obs, _ = env.reset(seed=4)
    a, _ = pol.predict(obs)
    assert a.shape == (14,) and np.all(np.abs(a) <= 1.0)
    info, _, _ = rollout(env, pol, seed=4)
    res = simulate(_tiny_scenario(), f"agent:{path}", 4)
    assert res.summary["avg_jct_s"] == pytest.approx(info["results"]["avg_jct_s"], rel=1e-12)


def test_evaluate_command_runs(trained: dict[str, Path], tmp_path: Path) -> None:
    scen = tmp_path / "tiny.yaml"
    scen.write_text(yaml.safe_dump(_tiny_scenario()))
    out = tmp_path / "eval.json"
    args = ["evaluate", "--agent", str(trained["placement"] / "best.zip"), "--scenario"]
    args += [str(scen), "--seeds", "1,2", "--baselines", "dally,gandiva", "--out", str(out)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert {r["policy"] for r in data["rows"]} == {"placement-agent", "dally", "gandiva"}
    assert len(data["rows"]) == 6
    assert "makespan (h) and ratio to dally" in res.output
    dally = [r for r in data["summary"] if r["policy"] == "dally" and r["scenario"] != "ALL"]
    mk = np.mean([r["makespan_s"] for r in data["rows"] if r["policy"] == "dally"]) / 3600
    assert dally[0]["makespan_h"] == pytest.approx(mk)
    assert f"{mk:.0f} h (1.00)" in res.output
    assert "P99 JCT (h) and ratio to dally" in res.output
    p99 = [np.mean([r["p99_jct_s"] for r in data["rows"] if r["policy"] == p]) / 3600
           for p in ("dally", "gandiva")]  # fmt: skip
    assert dally[0]["p99_jct_h"] == pytest.approx(p99[0])
    assert f"{p99[1]:.1f} h ({p99[1] / p99[0]:.2f})" in res.output


def test_evaluate_runs_entrants_with_parameters(tmp_path: Path) -> None:
    scen = tmp_path / "tiny.yaml"
    scen.write_text(yaml.safe_dump(_tiny_scenario()))
    out = tmp_path / "eval.json"
    entrant = "{policy: dally-manual, params: {machine_timer_s: 0, rack_timer_s: 0}, label: m0}"
    args = ["evaluate", "--agent", str(_shipped("delay_timer")), "--scenario", str(scen)]
    args += ["--seeds", "1", "--baselines", "dally", "--entrant", entrant, "--out", str(out)]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    row = next(r for r in data["rows"] if r["policy"] == "m0")
    want = simulate(str(scen), "dally-manual", 1, policy_params={"machine_timer_s": 0,
                                                                 "rack_timer_s": 0})  # fmt: skip
    assert row["avg_jct_s"] == want.summary["avg_jct_s"] and row["kind"] == "deployable"
    assert f"--entrant={entrant}" in shlex.split(data["command"])


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--baselines", "dally,nope"], "error: --baselines 'nope': unknown policy 'nope'"),
        (["--seeds", ""], "error: --seeds '': give at least one seed"),
        (["--seeds", " , "], "error: --seeds ' , ': give at least one seed"),
        (["--seeds=-1"], "error: --seeds '-1': seeds must be >= 0, got -1"),
        (["--seeds", "1,x"], "error: --seeds '1,x': expected comma-separated integers"),
        (["--scenario", "nope"], "error: --scenario 'nope': unknown scenario 'nope'"),
        (["--out", "{tmp}/a-file/eval.json"], "error: --out .*a-file is not a directory"),
        (["--out", "/proc/dlcluster-no-such/eval.json"], "error: --out .*cannot write there"),
        (
            ["--entrant", "{polcy: dally}"],
            r"error: --entrant .*\(policy: Field required; "
            "polcy: unknown key\\)",
        ),
        (["--entrant", "[1,2"], "error: --entrant .*malformed YAML"),
        (
            ["--entrant", "{policy: dally-manual, params: {machine_timer_s: -1}}"],
            "error: --entrant .*machine_timer_s must be a finite number of seconds >= 0",
        ),
        (["--entrant", "{policy: nope}"], "error: --entrant .*unknown policy 'nope'"),
        (["--entrant", "dally"], "error: --entrant 'dally': label 'dally' is taken"),
    ],
)
def test_evaluate_checks_its_arguments_before_simulating(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], match: str
) -> None:
    path = _shipped("placement")
    if "/proc" in " ".join(args) and not Path("/proc/self").is_dir():
        pytest.skip("no /proc")
    (tmp_path / "a-file").write_text("")

    def no_run(*a: object, **k: object) -> None:
        raise AssertionError("simulated before checking the arguments")

    monkeypatch.setattr("dlcluster_gym.agents.evaluate.run_set", no_run)
    cmd = ["evaluate", "--agent", str(path)]
    if "--scenario" not in args:
        cmd += ["--scenario", "dally-poisson-2rack"]
    res = CliRunner().invoke(main, cmd + [a.replace("{tmp}", str(tmp_path)) for a in args])
    assert res.exit_code == 2, res.output
    assert re.search(match, res.output) and len(res.output.strip().splitlines()) == 1


def test_training_resumes_from_a_checkpoint(trained: dict[str, Path], tmp_path: Path) -> None:
    from dlcluster_gym.agents.train import train

    cfg = load_agent_config(tiny_config("placement"))
    res = train(
        cfg, tmp_path / "resumed", timesteps=384, resume=trained["placement"] / "last.zip",
        progress_bar=False,
    )  # fmt: skip
    assert res.timesteps == 384
    meta = read_agent_meta(res.last)
    assert meta["resumed_from"].endswith("last.zip") and meta["timesteps"] == 384


# ---------------------------------------------------------------------------- bad input
def test_checkpoint_for_the_wrong_env_names_both(trained: dict[str, Path]) -> None:
    path = trained["placement"] / "best.zip"
    with pytest.raises(ConfigError, match=rf"Placement-v0 with observation size {OBS_SIZE}.*"
                       r"DelayTimer-v0 with observation size 80"):  # fmt: skip
        make_env_policy(f"agent:{path}", tiny_env("DelayTimer"))
    with pytest.raises(ConfigError, match="no parameter 'foo'; parameters: base_policy"):
        make_policy(f"agent:{path}", foo=1)


def test_checkpoint_with_another_observation_size_names_both(
    trained: dict[str, Path], tmp_path: Path
) -> None:
    """A placement checkpoint whose observation size differs from the env's."""
    old = tmp_path / "old.zip"
    src_path = trained["placement"] / "best.zip"
    with zipfile.ZipFile(src_path) as src, zipfile.ZipFile(old, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename == META_NAME:
                meta = json.loads(data)
                meta["observation_size"] = OBS_SIZE - 2
                data = json.dumps(meta).encode()
            dst.writestr(item, data)
    with pytest.raises(
        ConfigError, match=rf"observation size {OBS_SIZE - 2}.*observation size {OBS_SIZE}"
    ):
        make_env_policy(f"agent:{old}", tiny_env("Placement"))


def test_scheduler_checkpoint_in_an_env_with_another_action_space_names_both() -> None:
    """The shipped scheduler agent preempts: an env without preemption has fewer actions."""
    path = SHIPPED / "scheduler.zip"
    if not path.is_file():
        pytest.skip(f"{path} not shipped")
    meta = read_agent_meta(path)
    if not meta["env_kwargs"].get("preemption"):
        pytest.skip("the shipped scheduler agent does not preempt")
    with pytest.raises(ConfigError, match=r"action space Discrete\(209\).*has Discrete\(97\)"):
        make_env_policy(f"agent:{path}", tiny_env("Scheduler", max_waiting=16))


def _shipped(name: str) -> Path:
    path = SHIPPED / f"{name}.zip"
    if not path.is_file():
        pytest.skip(f"{path} not shipped")
    return path


@pytest.mark.parametrize("observation", ["dict", "graph"])
def test_scheduler_checkpoint_in_a_dict_observation_env_is_one_line(observation: str) -> None:
    path = _shipped("scheduler")
    kw = read_agent_meta(path)["env_kwargs"]
    env = tiny_env("Scheduler", observation=observation, **kw)
    with pytest.raises(ConfigError, match=r"flat Box observation of size 654.*Dict observation "
                       r"space; make the env with observation='flat'") as ei:  # fmt: skip
        make_env_policy(f"agent:{path}", env)
    assert "\n" not in str(ei.value)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"running_order": "recent"}, "running_order='attained', but the env has "
                                      "running_order='recent'"),
        ({"order": "arrival"}, "order='las', but the env has order='arrival'"),
        ({"known_durations": True}, "known_durations=False, but the env has known_durations=True"),
        ({"requeue": True}, "requeue=False, but the env has requeue=True"),
        ({"move_as": "restart"}, "move_as='migrate', but the env has move_as='restart'"),
        ({"order": "arrival", "wait_retry_s": 60.0},
         "order='las', wait_retry_s=3600.0, but the env has order='arrival', wait_retry_s=60.0"),
    ],
)  # fmt: skip
def test_scheduler_checkpoint_refuses_env_kwargs_that_change_what_it_sees(
    change: dict, named: str
) -> None:
    path = _shipped("scheduler")
    kw = {**read_agent_meta(path)["env_kwargs"], **change}
    with pytest.raises(ConfigError, match=re.escape(named)) as ei:
        make_env_policy(f"agent:{path}", tiny_env("Scheduler", **kw))
    assert "\n" not in str(ei.value)


def test_checkpoints_load_with_kwargs_that_change_neither_observation_nor_actions() -> None:
    path = _shipped("scheduler")
    kw = read_agent_meta(path)["env_kwargs"]
    free = {"reward_weights": {"makespan": 1.0}, "reward_scale_s": 60.0, "render_mode": "ansi",
            "unfinished_penalty": "fixed", "unfinished_penalty_s": 10.0, "stall_end": "truncated",
            "invalid_action": "raise", "invalid_penalty": 3.0, "max_machines": 64,
            "max_racks": 8, "skip_trivial": False}  # fmt: skip
    for env_id in ("DLCluster/Scheduler-v1", "DLCluster/Scheduler-dally-batch-2rack-v1"):
        make_env_policy(f"agent:{path}", gym.make(env_id, **kw, **free))
    placement = _shipped("placement")
    env = gym.make("DLCluster/Placement-v3", scenario="dally-batch-2rack", wait_limit="none")
    make_env_policy(f"agent:{placement}", env)
    with pytest.raises(ConfigError, match="base_policy='dally', but the env has "
                       "base_policy='tiresias'"):  # fmt: skip
        make_env_policy(
            f"agent:{placement}",
            tiny_env("Placement", base_policy="tiresias", done_jobs_of="arrived",
                     known_durations=False),
        )  # fmt: skip
    timer = _shipped("delay_timer")
    trained = float(read_agent_meta(timer)["env_kwargs"].get("max_timer_s", 172800.0))
    with pytest.raises(ConfigError, match=re.escape(f"max_timer_s={trained}, but the env has "
                       "max_timer_s=3600.0")):  # fmt: skip
        make_env_policy(
            f"agent:{timer}", tiny_env("DelayTimer", max_timer_s=3600.0, done_jobs_of="arrived")
        )


def test_agent_parameters_still_override_the_recorded_env_kwargs() -> None:
    """``agent:PATH`` parameters (``base_policy``, ...) are deliberate: the native scheduler
    builds its env with them and loads the agent there."""
    path = _shipped("placement")
    res = simulate(_tiny_scenario(), make_policy(f"agent:{path}", base_policy="gandiva"), 2)
    assert res.summary["jobs_completed"] == 30


def test_missing_or_foreign_checkpoint_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.zip' not found"):
        make_policy(f"agent:{tmp_path / 'nope.zip'}")
    foreign = tmp_path / "foreign.zip"
    with zipfile.ZipFile(foreign, "w") as zf:
        zf.writestr("data", "{}")
    with pytest.raises(ConfigError, match=f"no {META_NAME}"):
        make_policy(f"agent:{foreign}")
    (tmp_path / "text.zip").write_text("not a zip")
    with pytest.raises(ConfigError, match="not a zip file"):
        make_policy(f"agent:{tmp_path / 'text.zip'}")


# ---------------------------------------------------------------------------- shipped agents
@pytest.mark.parametrize("name", ["placement", "delay_timer", "scheduler"])
def test_shipped_checkpoints_load_and_act_deterministically(name: str) -> None:
    path = SHIPPED / f"{name}.zip"
    if not path.is_file():
        pytest.skip(f"{path} not shipped")
    meta = read_agent_meta(path)
    assert meta["command"] and meta["config"] and path.stat().st_size < 5_000_000
    kind = meta["env_kind"]
    env = tiny_env(kind, **agent_env_kwargs(meta))
    pol = make_env_policy(f"agent:{path}", env)
    obs, _ = env.reset(seed=11)
    mask = env.unwrapped.action_masks() if kind in ("Placement", "Scheduler") else None
    kw = {"action_masks": mask} if mask is not None else {}
    a1, _ = pol.predict(obs, deterministic=True, **kw)
    a2, _ = pol.predict(obs, deterministic=True, **kw)
    np.testing.assert_array_equal(a1, a2)
    r1 = simulate(_tiny_scenario(), f"agent:{path}", 11).summary
    r2 = simulate(_tiny_scenario(), f"agent:{path}", 11).summary
    assert r1["avg_jct_s"] == r2["avg_jct_s"] and r1["jobs_completed"] == 30


def _tiny_scenario() -> dict:
    from dlcluster_gym.config import load_scenario
    from dlcluster_gym.envs.base import deep_merge

    return deep_merge(load_scenario("dally-poisson-2rack").model_dump(), TINY)


@pytest.mark.parametrize(
    ("teacher", "env_kwargs"),
    [
        ("srw-slots", {}),
        ("las-slots", {"preemption": True, "running_order": "attained"}),  # the shipped kind
    ],
)
def test_scheduler_agent_trains_and_runs_natively_as_in_the_env(
    tmp_path: Path, teacher: str, env_kwargs: dict
) -> None:
    cfg = tiny_config("scheduler")
    cfg["algorithm"] = "maskable_ppo"
    cfg["warm_start"]["teacher"] = teacher
    cfg["env_kwargs"] = {"max_waiting": 8, "max_running": 4, **env_kwargs}
    path = tmp_path / "scheduler.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "run"
    res = CliRunner().invoke(
        main, ["train", "--agent", "scheduler", "--config", str(path), "--out", str(out), "-q"]
    )
    assert res.exit_code == 0, res.output
    ckpt = out / "best.zip"
    meta = read_agent_meta(ckpt)
    assert meta["env_kind"] == "Scheduler" and meta["warm_start"]["teacher"] == teacher
    env = tiny_env("Scheduler", max_waiting=8, max_running=4, **env_kwargs)
    info, _, _ = rollout(env, make_env_policy(f"agent:{ckpt}", env), seed=9)
    native = simulate(_tiny_scenario(), f"agent:{ckpt}", 9).summary
    got = {k: v for k, v in info["results"].items() if k != "wall_s"}
    assert got == {k: v for k, v in native.items() if k != "wall_s"}
