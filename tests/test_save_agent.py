"""``save_agent``: a user's own SB3 model as a DLCluster agent checkpoint, and the env-version
check every checkpoint gets when it loads."""

from __future__ import annotations

import json
import shutil
import warnings
import zipfile
from pathlib import Path

import gymnasium as gym
import pytest
import yaml

pytest.importorskip("stable_baselines3")
pytest.importorskip("sb3_contrib")

from click.testing import CliRunner
from sb3_contrib import MaskablePPO

import dlcluster_gym  # noqa: F401  (registers the envs)
from dlcluster_gym.agents import save_agent
from dlcluster_gym.cli import main
from dlcluster_gym.config import load_scenario
from dlcluster_gym.envs.agent_meta import META_NAME, read_agent_meta, trained_version
from dlcluster_gym.envs.base import deep_merge
from dlcluster_gym.envs.policies import make_env_policy, rollout
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.scheduler import policy_kind

ID = "DLCluster/Scheduler-v2"
TINY = {"workload": {"num_jobs": 30}}
KW = {"max_waiting": 4, "max_running": 4}
SHIPPED = Path(__file__).resolve().parent.parent / "agents" / "checkpoints"


def _env(env_id: str = ID, **kw: object) -> gym.Env:
    with warnings.catch_warnings():  # older versions warn when made
        warnings.simplefilter("ignore", DeprecationWarning)
        return gym.make(env_id, scenario="dally-poisson-2rack", scenario_overrides=TINY,
                        **{**KW, **kw})  # fmt: skip


@pytest.fixture(scope="module")
def model() -> MaskablePPO:
    """A MaskablePPO trained for 256 steps on a tiny workload (a few seconds)."""
    m = MaskablePPO("MlpPolicy", _env(), n_steps=128, batch_size=64, n_epochs=1, seed=0,
                    device="cpu")  # fmt: skip
    return m.learn(256)


@pytest.fixture(scope="module")
def saved(model: MaskablePPO, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return save_agent(model, tmp_path_factory.mktemp("agent") / "mine", KW)


def _tiny_file(tmp: Path) -> Path:
    data = deep_merge(load_scenario("dally-poisson-2rack").model_dump(mode="json"), TINY)
    data["name"] = "tiny"
    path = tmp / "tiny.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_save_agent_writes_the_training_pipelines_metadata(saved: Path) -> None:
    assert saved.name == "mine.zip"
    meta = read_agent_meta(saved)
    assert meta["env_id"] == ID and meta["env_kind"] == "Scheduler"
    assert meta["agent"] == "scheduler" and meta["algorithm"] == "maskable_ppo"
    env = _env()
    assert meta["observation_size"] == env.observation_space.shape[0]
    assert meta["action_space"] == str(env.action_space)
    # the kwargs that decide what the agent observes are recorded, given or not
    assert meta["env_kwargs"] == {**KW, "done_jobs_of": "arrived", "known_durations": False}
    assert {"stable-baselines3", "sb3-contrib", "dlcluster-gym"} <= set(meta["versions"])
    assert MaskablePPO.load(saved, device="cpu").observation_space == env.observation_space


def test_a_saved_agent_runs_as_a_policy_and_in_the_env(saved: Path, tmp_path: Path) -> None:
    tiny = _tiny_file(tmp_path)
    args = ["simulate", "--scenario", str(tiny), "--policy", f"agent:{saved}", "--seed", "3"]
    res = CliRunner().invoke(main, [*args, "--format", "json"])
    assert res.exit_code == 0, res.output
    native = json.loads(res.stdout)["avg_jct_s"]
    env = _env()
    info, _, _ = rollout(env, make_env_policy(f"agent:{saved}", env), seed=3)
    assert info["results"]["avg_jct_s"] == pytest.approx(native, rel=1e-12)
    assert policy_kind(f"agent:{saved}") == "deployable"
    out = CliRunner().invoke(main, ["evaluate", "--agent", f"mine={saved}", "--scenario",
                                    str(tiny), "--seeds", "3", "--baselines", "dally", "--quiet",
                                    "--format", "json"])  # fmt: skip
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)["rows"]
    assert [r["avg_jct_s"] for r in rows if r["policy"] == "mine"] == [native]
    bare = CliRunner().invoke(main, ["evaluate", "--agent", str(saved)])
    assert bare.exit_code == 2 and "records no evaluation set" in bare.output


def test_a_checkpoint_refuses_an_env_of_another_version(saved: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"trained on Scheduler-v2, the env is Scheduler-v1"):
        make_env_policy(f"agent:{saved}", _env("DLCluster/Scheduler-v1"))
    # v1 with v2's observation (done_jobs_of='arrived') differs only in rewards: it loads
    make_env_policy(f"agent:{saved}", _env("DLCluster/Scheduler-v1", done_jobs_of="arrived"))
    future = tmp_path / "future.zip"
    shutil.copy(saved, future)
    with zipfile.ZipFile(saved) as z:
        meta = json.loads(z.read(META_NAME))
    meta["env_id"] = "DLCluster/Scheduler-v99"
    _rewrite(future, meta)
    with pytest.raises(ConfigError, match=r"DLCluster/Scheduler-v99, a version this "
                       r"dlcluster-gym does not define"):  # fmt: skip
        make_env_policy(f"agent:{future}", _env())


def _rewrite(path: Path, meta: dict) -> None:
    tmp = path.with_suffix(".tmp")
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(tmp, "w") as dst:
        for item in src.infolist():
            data = json.dumps(meta) if item.filename == META_NAME else src.read(item)
            dst.writestr(item, data)
    tmp.replace(path)


@pytest.mark.parametrize(("name", "version"), [("scheduler", 2), ("placement", 3),
                                                ("delay_timer", 1)])  # fmt: skip
def test_shipped_v0_ids_are_the_version_their_kwargs_make(name: str, version: int) -> None:
    path = SHIPPED / f"{name}.zip"
    if not path.is_file():
        pytest.skip(f"{path} not shipped")
    meta = read_agent_meta(path)
    assert meta["env_id"].endswith("-v0") and trained_version(meta) == version


def test_save_agent_checks_before_writing(model: MaskablePPO, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"max_waiting=8.*but the env has max_waiting=4"):
        save_agent(model, tmp_path / "a.zip", {**KW, "max_waiting": 8})
    with pytest.raises(ConfigError, match="env_id 'DLCluster/Scheduler-v1' is not the model's"):
        save_agent(model, tmp_path / "b.zip", KW, env_id="DLCluster/Scheduler-v1")
    with pytest.raises(ConfigError, match="metadata key 'env_id' is set by save_agent"):
        save_agent(model, tmp_path / "c.zip", KW, metadata={"env_id": "x"})
    assert not list(tmp_path.iterdir())  # nothing written
    model.save(tmp_path / "plain.zip")
    loaded = MaskablePPO.load(tmp_path / "plain.zip", device="cpu")  # no env
    with pytest.raises(ConfigError, match="give env_id="):
        save_agent(loaded, tmp_path / "d.zip", KW)
    size = loaded.observation_space.shape[0]
    with pytest.raises(ConfigError, match=f"observation size {size}, but the env is "
                       "Scheduler-v2 with observation size"):  # fmt: skip
        save_agent(loaded, tmp_path / "e.zip", {}, env_id=ID)  # default windows: other size
    path = save_agent(loaded, tmp_path / "f.zip", KW, env_id=ID, config="scheduler",
                      metadata={"description": "a test"})  # fmt: skip
    meta = read_agent_meta(path)
    assert meta["description"] == "a test" and meta["config"]["agent"] == "scheduler"
