"""Named splits (``dlcluster_gym/splits.py``): loading, the seed rules, ``dlcluster list
splits``, ``dlcluster evaluate --split`` and the agent config a ``--split`` trains on."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from dlcluster_gym.cli import main
from dlcluster_gym.config import load_scenario
from dlcluster_gym.errors import ConfigError, UnknownNameError
from dlcluster_gym.splits import (
    PARTS,
    SeedSet,
    entry_scenario,
    list_splits,
    load_split,
    parse_split_part,
)
from tests.conftest import needs_traces

CHECKPOINTS = Path(__file__).resolve().parent.parent / "agents" / "checkpoints"


def _scenario_file(tmp: Path, num_jobs: int = 20) -> Path:
    """A 2-rack Poisson scenario of ``num_jobs`` jobs (seconds to simulate)."""
    data = load_scenario("dally-poisson-2rack").model_dump(mode="json")
    data["workload"]["num_jobs"] = num_jobs
    data["name"] = "tiny"
    path = tmp / "tiny.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _split_file(tmp: Path, name: str = "tiny-split", **parts: dict) -> Path:
    """A split over the tiny scenario; ``parts`` replace the default parts."""
    scenario = _scenario_file(tmp)
    data = {
        "description": "a tiny split for tests",
        "scenario": str(scenario),
        "train": {"seeds": "1000-1999", "scenarios": [{"label": "tiny-train"}]},
        "validation": {"seeds": [501], "scenarios": [{"label": "tiny-val"}]},
        "test": {
            "seeds": "1-2",
            "scenarios": [
                {"label": "tiny-test"},
                {
                    "label": "tiny-test-10",
                    "overrides": {"workload": {"num_jobs": 10}},
                    "seeds": [3],
                },
            ],
        },
        **parts,
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


# ---------------------------------------------------------------------------- loading
def test_seed_sets_parse_ranges_and_lists_and_say_what_is_allowed() -> None:
    s = SeedSet.parse(["1000-1999", 5, "3-4"])
    assert str(s) == "3-5, 1000-1999" and len(s) == 1003 and 1500 in s and 6 not in s
    assert s.span() is None and SeedSet.parse("101-110").span() == (101, 110)
    assert list(SeedSet.parse(7)) == [7] and SeedSet.parse(s.to_yaml()) == s
    assert str(s & SeedSet.parse("4-1001")) == "4-5, 1000-1001"
    for bad, why in (("5-3", "runs backwards; write 3-5"), (True, "is not a seed"),
                     ("ten", "is not a seed"), (-1, "out of range"), ([], "no seeds")):  # fmt: skip
        with pytest.raises(ValueError, match=why):
            SeedSet.parse(bad)


def test_a_split_file_loads_into_three_parts_of_entries(tmp_path: Path) -> None:
    split = load_split(_split_file(tmp_path))
    assert split.name == "tiny-split" and split.description == "a tiny split for tests"
    assert [e.label for e in split.train] == ["tiny-train"]
    test = split.part("test")
    assert [(e.label, list(e.seeds)) for e in test] == [("tiny-test", [1, 2]),
                                                        ("tiny-test-10", [3])]  # fmt: skip
    assert test[1].overrides == {"workload": {"num_jobs": 10}}
    assert entry_scenario(test[1].scenario, test[1].overrides).workload.num_jobs == 10
    assert not any(e.requires_traces for p in PARTS for e in split.part(p))
    with pytest.raises(ConfigError, match="unknown part 'tst'; parts: train, validation, test"):
        split.part("tst")


def test_shipped_splits_load_and_keep_test_seeds_out_of_training() -> None:
    assert {"dally-groups", "philly-vc"} <= set(list_splits())
    groups = load_split("dally-groups")
    assert {e.overrides.get("cluster", "dally-4rack") for e in groups.test} == {
        "dally-4rack", "dally-8rack"}  # fmt: skip
    assert all(str(e.seeds) == "101-110" for e in groups.test)
    assert all(str(e.seeds) == "501-506" for e in groups.validation)
    philly = load_split("philly-vc")  # the trace is read only when a window runs
    assert all(e.scenario == "philly-vc" and e.requires_traces for p in PARTS
               for e in philly.part(p))  # fmt: skip
    # a temporal split: every train window ends before any validation window, and so on
    windows = {p: [e.overrides["workload"]["time_window_s"] for e in philly.part(p)]
               for p in PARTS}  # fmt: skip
    assert max(w[1] for w in windows["train"]) <= min(w[0] for w in windows["validation"])
    assert max(w[1] for w in windows["validation"]) <= min(w[0] for w in windows["test"])
    n = sum(len(w) for w in windows.values())
    assert 0.5 <= len(windows["train"]) / n <= 0.7 and 0.15 <= len(windows["test"]) / n <= 0.35


def test_parts_must_give_the_same_scenario_disjoint_seeds(tmp_path: Path) -> None:
    path = _split_file(tmp_path, validation={"seeds": "1500-1501",
                                             "scenarios": [{"label": "v"}]})  # fmt: skip
    with pytest.raises(ConfigError) as err:
        load_split(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: train.scenarios.0 ('tiny-train') and validation.scenarios.0")
    assert "same scenario and share seeds 1500-1501" in msg and "disjoint seeds" in msg
    # another scenario (other overrides) may reuse validation seeds of the train range
    entry = {"label": "v", "overrides": {"workload": {"load": 0.5}}}
    other = {"seeds": "1500", "scenarios": [entry]}
    assert load_split(_split_file(tmp_path, validation=other)).validation[0].label == "v"


def test_test_seeds_never_appear_in_train_or_validation(tmp_path: Path) -> None:
    other = {"label": "other", "overrides": {"workload": {"load": 0.5}}, "seeds": "1-1"}
    path = _split_file(tmp_path, validation={"seeds": [501], "scenarios": [{"label": "v"}, other]})
    with pytest.raises(ConfigError) as err:
        load_split(path)
    assert str(err.value) == (
        f"{path}: test.scenarios.0 ('tiny-test') seeds 1 also appear in validation.scenarios.1 "
        "('other'); test seeds must never appear in train or validation (test: 1-2; "
        "validation: 1)"
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"test": {"seeds": "x-y", "scenarios": [{"label": "t"}]}},
         "test.seeds: seed 'x-y' is not a seed; seeds are integers 0.."),
        ({"test": {"seeds": "1-2", "scenarios": [{"label": "t", "seed": 3}]}},
         "test.scenarios.0.seed: unknown key (got 3); allowed: scenario, label, overrides, seeds"),
        ({"test": {"seeds": "1-2", "scenarios": []}},
         "test.scenarios: Tuple should have at least 1 item"),
        ({"test": {"scenarios": [{"label": "t"}]}},
         "test.scenarios.0.seeds: missing; give the entry's seeds, or the part's (test.seeds)"),
        ({"test": {"seeds": 1, "scenarios": [{"label": "t"}, {"label": "t", "seeds": 3}]}},
         "test.scenarios.1.label: 't' is also test.scenarios.0's label"),
        ({"test": {"seeds": 1, "scenarios": [{"overrides": {"workload": {"num_jobs": 0}}}]}},
         "test.scenarios.0.overrides:"),
        ({"test": {"seeds": 1, "scenarios": [{"scenario": "no-such-preset"}]}},
         "test.scenarios.0.scenario: unknown scenario 'no-such-preset'; valid scenarios:"),
    ],
)  # fmt: skip
def test_errors_name_the_file_the_field_the_value_and_what_is_allowed(
    tmp_path: Path, change: dict, expected: str
) -> None:
    path = _split_file(tmp_path, **change)
    with pytest.raises(ConfigError) as err:
        load_split(path)
    assert str(err.value).startswith(str(path)) and expected in str(err.value)


def test_a_split_without_a_part_says_which_parts_a_split_has(tmp_path: Path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text("train: {seeds: 1, scenarios: [{scenario: dally-poisson-2rack}]}\n")
    with pytest.raises(ConfigError, match="validation: missing; every split has the parts train"):
        load_split(path)


def test_an_unknown_name_lists_the_known_splits() -> None:
    with pytest.raises(UnknownNameError) as err:
        load_split("no-such-split")
    assert str(err.value).startswith("unknown split 'no-such-split'; valid splits: ")
    assert "dally-groups" in str(err.value) and "philly-vc" in str(err.value)
    assert parse_split_part("philly-vc") == ("philly-vc", "test")
    assert parse_split_part("philly-vc:train") == ("philly-vc", "train")
    with pytest.raises(ConfigError, match="unknown part 'tst'; give NAME or NAME:PART"):
        parse_split_part("philly-vc:tst")


def test_list_splits_command() -> None:
    res = CliRunner().invoke(main, ["list", "splits"])
    assert res.exit_code == 0, res.output
    names = [line.split()[0] for line in res.output.splitlines()]
    assert "dally-groups" in names and "philly-vc" in names
    assert "temporal split" in next(ln for ln in res.output.splitlines() if ln.startswith("philly"))


@needs_traces
def test_a_philly_vc_test_window_builds_with_its_vcs() -> None:
    from dlcluster_gym.cluster.topology import Cluster
    from dlcluster_gym.scenario.build import build_workload

    entry = load_split("philly-vc").test[0]
    cfg = entry_scenario(entry.scenario, entry.overrides)
    assert cfg.cluster.groups[0].gpus_per_machine == 8 and cfg.cluster.tiers.rack.preset
    import numpy as np

    jobs = build_workload(cfg, Cluster(cfg.cluster), np.random.default_rng(101))
    assert len(jobs) >= 100 and len({j.vc for j in jobs}) > 1
    assert max(j.num_gpus for j in jobs) <= cfg.cluster.num_gpus  # gpu_demand: filter


# ---------------------------------------------------------------------------- evaluate
def _scheduler_checkpoint() -> Path:
    pytest.importorskip("stable_baselines3")
    pytest.importorskip("sb3_contrib")
    path = CHECKPOINTS / "scheduler.zip"
    if not path.is_file():
        pytest.skip(f"{path} not shipped")
    return path


def test_evaluate_on_a_split_part_runs_its_entries_with_their_own_seeds(tmp_path: Path) -> None:
    agent = _scheduler_checkpoint()
    split = _split_file(tmp_path)
    args = ["evaluate", "--agent", str(agent), "--split", str(split), "--baselines", "fcfs",
            "--format", "json", "--quiet"]  # fmt: skip
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["seeds"] == {"tiny-test": [1, 2], "tiny-test-10": [3]}
    assert {(r["scenario"], r["seed"], r["policy"]) for r in report["rows"]} == {
        (sc, seed, p) for sc, seeds in report["seeds"].items() for seed in seeds
        for p in ("scheduler-agent", "fcfs")
    }  # fmt: skip
    assert report["split"] == f"{split}:test"
    assert f"--split={split}" in report["command"] and "--scenario" not in report["command"]


def test_evaluate_split_errors(tmp_path: Path) -> None:
    agent = _scheduler_checkpoint()
    runner = CliRunner()
    res = runner.invoke(main, ["evaluate", "--agent", str(agent), "--split", "philly-vc",
                               "--seeds", "1-2"])  # fmt: skip
    assert res.exit_code == 2
    assert "--split philly-vc: a split gives the scenarios and their seeds; leave out --seeds" in (
        res.output
    )
    res = runner.invoke(main, ["evaluate", "--agent", str(agent), "--split", "nope:test"])
    assert res.exit_code == 2 and "unknown split 'nope'; valid splits: dally-groups" in res.output


# ---------------------------------------------------------------------------- train
def test_a_split_replaces_the_configs_scenario_sets(tmp_path: Path) -> None:
    from dlcluster_gym.agents.config import load_agent_config

    split = _split_file(tmp_path)
    base = load_agent_config("scheduler")
    cfg = load_agent_config("scheduler", split=str(split))
    assert cfg.split == str(split)
    assert [s.label for s in cfg.train.scenarios] == ["tiny-train"]
    assert cfg.train.seeds == (1000, 2000)  # 1000-1999 inclusive as [lo, hi)
    assert [(s.label, s.seeds) for s in cfg.validation.scenarios] == [("tiny-val", (501,))]
    assert [(s.label, s.seeds) for s in cfg.evaluation.scenarios] == [
        ("tiny-test", (1, 2)), ("tiny-test-10", (3,))]  # fmt: skip
    # everything else is the config's own
    assert cfg.train.timesteps == base.train.timesteps and cfg.ppo == base.ppo
    assert cfg.validation.every_steps == base.validation.every_steps
    # the same from `split:` in the config file (a split file beside it)
    data = yaml.safe_load((Path("configs/agents/scheduler.yaml")).read_text())
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump({**data, "split": split.name}))
    again = load_agent_config(tmp_path / "agent.yaml")
    assert again.train == cfg.train and again.evaluation == cfg.evaluation


def test_training_needs_the_train_seeds_to_be_one_range(tmp_path: Path) -> None:
    from dlcluster_gym.agents.config import load_agent_config

    other = {"label": "b", "overrides": {"workload": {"load": 0.5}}, "seeds": "3000-3999"}
    train = {"seeds": "1000-1999", "scenarios": [{"label": "a"}, other]}
    with pytest.raises(ConfigError, match=r"train seeds \(1000-1999, 3000-3999\) are not one "):
        load_agent_config("scheduler", split=str(_split_file(tmp_path, train=train)))
    val = {"seeds": "1500", "scenarios": [{"label": "v", "overrides": {"workload": {"load": 0.5}}}]}
    with pytest.raises(ConfigError, match="validation seeds 1500 lie in the train seeds' range"):
        load_agent_config("scheduler", split=str(_split_file(tmp_path, validation=val)))


def test_train_split_records_the_split_in_the_command(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("stable_baselines3")
    from dlcluster_gym.agents import train as agents_train

    seen = {}

    def fake_train(cfg, out, **kw):
        seen.update(cfg=cfg, **kw)
        return types.SimpleNamespace(timesteps=0, wall_s=0.0, best_score=1.0, best=out,
                                     last=out, out=out)  # fmt: skip

    monkeypatch.setattr(agents_train, "train", fake_train)
    split = _split_file(tmp_path)
    res = CliRunner().invoke(main, ["train", "--agent", "scheduler", "--split", str(split),
                                    "--out", str(tmp_path / "run"), "-q"])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert f"--split {split}" in seen["command"] and seen["cfg"].split == str(split)
    assert [s.label for s in seen["cfg"].train.scenarios] == ["tiny-train"]
