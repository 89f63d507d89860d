"""Environments without leaks: Placement-v3's estimated job features, the deprecation of the
versions whose defaults observe ground truth, each env's ``clairvoyant`` declaration (and its
native wrappers' and agents'), and checkpoint metadata that must say what the agent saw."""

from __future__ import annotations

import dataclasses
import inspect
import json
import math
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import dlcluster_gym  # noqa: F401  (registers the envs)
from dlcluster_gym.envs import VERSIONS, latest
from dlcluster_gym.envs.agent_meta import (
    CLASS_DEFAULTS,
    META_NAME,
    OBSERVATION_KWARGS,
    read_agent_meta,
    write_agent_meta,
)
from dlcluster_gym.envs.delay_timer import DelayTimerEnv
from dlcluster_gym.envs.native import (
    OfferPolicyScheduler,
    QueuePolicyScheduler,
    TimerPolicyScheduler,
)
from dlcluster_gym.envs.placement import OBS_INDEX, OBS_SIZE, PlacementEnv
from dlcluster_gym.envs.policies import make_env_policy
from dlcluster_gym.envs.scheduler_env import SchedulerEnv
from dlcluster_gym.envs.versions import leaks
from dlcluster_gym.errors import ConfigError
from dlcluster_gym.scheduler import is_clairvoyant, make_policy, policy_kind
from dlcluster_gym.workload.job import Job

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "agents" / "checkpoints"
SCEN = "dally-poisson-2rack"
SMALL = {"workload": {"num_jobs": 60}}
# batch arrivals under Tiresias with the authors' fixed limits from the start (three queues:
# it preempts before the first job finishes, so preempted jobs are offered again having run):
# many offers before the first finish, and many of jobs that have run
BATCH = {
    "scenario": "dally-batch-2rack",
    "scenario_overrides": SMALL,
    "base_policy": "tiresias",
    "base_params": {"thresholds": "online", "num_queues": 3, "promote_wait": "last"},
}
LEAK = r"DLCluster/\S+ observes ground truth a real scheduler does not have"
PROGRESS, REMAINING = OBS_INDEX["job.progress"], OBS_INDEX["job.remaining_work"]


def _make(env_id: str, **kw: Any) -> gym.Env:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return gym.make(env_id, **kw)


# ---------------------------------------------------------------- Placement-v3's features
def _offers_before_first_finish(
    monkeypatch: pytest.MonkeyPatch, env_id: str, stretch: np.ndarray | None
) -> list[np.ndarray]:
    """Observations of a seeded masked-random episode up to the first finish, on the preset's
    workload with every job's length multiplied by ``stretch`` (None: as drawn)."""
    import dlcluster_gym.envs.base as env_base

    real = env_base.prepare

    def prepared(*args: Any, **kwargs: Any) -> Any:
        cfg, cluster, jobs, rng = real(*args, **kwargs)
        if stretch is not None:
            jobs = [
                dataclasses.replace(j, iterations=float(j.iterations) * float(f))
                for j, f in zip(jobs, stretch, strict=False)
            ]
        return cfg, cluster, jobs, rng

    monkeypatch.setattr(env_base, "prepare", prepared)
    env = _make(env_id, **BATCH)
    inner = env.unwrapped
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=2)
    out = []
    while inner.engine.n_done == 0 and inner._offer is not None:
        out.append(obs)
        obs, *_ = env.step(int(rng.choice(np.flatnonzero(inner.action_masks()))))
    monkeypatch.setattr(env_base, "prepare", real)
    return out


def test_placement_v3_observes_no_job_lengths_where_v2_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two workloads identical except in the jobs' lengths: v3 observes the same at every
    offer before the first job finishes; v2 (true progress and remaining work) does not."""
    other = np.random.default_rng(5).uniform(1.0, 3.0, 256)  # longer: finish later
    got = {
        v: [
            _offers_before_first_finish(monkeypatch, f"DLCluster/Placement-v{v}", s)
            for s in (None, other)
        ]
        for v in (2, 3)
    }
    a, b = got[3]
    n = min(len(a), len(b))
    assert n >= 20, "too few offers before the first finish: the check is vacuous"
    assert any(x[PROGRESS] > 0 for x in a[:n]), "no offer of a job that has run"
    for x, y in zip(a[:n], b[:n], strict=True):
        np.testing.assert_array_equal(x, y)
    a2, b2 = got[2]
    m = min(len(a2), len(b2))
    differ = [not np.array_equal(x, y) for x, y in zip(a2[:m], b2[:m], strict=True)]
    assert sum(differ) >= m // 2, "v2 observes the true remaining work"


def _by_hand(lengths_s: list[float], done: float, compute_s: float, gpus: int) -> tuple:
    """Placement-v3's (progress, remaining_work) from the finished jobs' lengths (ideal
    compute seconds): the expected remaining work given the work done, as done again where
    no finished job is longer."""
    work = done * compute_s
    longer = [x for x in lengths_s if x > work]
    rem = (sum(longer) / len(longer) - work) / compute_s if longer else done
    progress = done / (done + rem) if done + rem > 0 else 0.0
    remaining = min(math.log1p(rem * compute_s * gpus / 3600.0) / math.log1p(1e4), 1.0)
    return progress, remaining


def test_placement_v3_estimates_match_a_hand_computation() -> None:
    env = _make("DLCluster/Placement-v3", **BATCH)
    inner = env.unwrapped
    rng = np.random.default_rng(1)
    obs, info = env.reset(seed=4)
    checked = {"history": 0, "started": 0}
    while inner._offer is not None:
        e = inner.engine
        job = e.jobs[info["job"]]
        lengths = [e.jobs[j].iterations * e.jobs[j].compute_s for j in e.finished_order]
        done = float(e.done_iters[job.job_id])
        want = _by_hand(lengths, done, job.compute_s, job.num_gpus)
        assert obs[PROGRESS] == pytest.approx(want[0], rel=1e-6, abs=1e-7)
        assert obs[REMAINING] == pytest.approx(want[1], rel=1e-6, abs=1e-7)
        checked["history"] += bool(lengths)
        checked["started"] += done > 0
        obs, _, _, _, info = env.step(int(rng.choice(np.flatnonzero(inner.action_masks()))))
    assert checked["history"] > 20 and checked["started"] > 20, checked


def test_placement_estimates_by_hand_on_a_tiny_history() -> None:
    """The formula itself: finished jobs of 100 s and 300 s of work; a job that has done
    50 s expects the mean of both minus 50 s, one that has done 200 s expects 100 s more,
    one past both as much again as it has done."""
    assert _by_hand([100.0, 300.0], 50.0, 1.0, 1) == pytest.approx(
        (50.0 / 200.0, math.log1p(150.0 / 3600.0) / math.log1p(1e4))
    )
    assert _by_hand([100.0, 300.0], 100.0, 2.0, 4)[0] == pytest.approx(200.0 / 300.0)
    assert _by_hand([100.0, 300.0], 400.0, 1.0, 1)[0] == 0.5
    assert _by_hand([], 0.0, 1.0, 1) == (0.0, 0.0)


def test_placement_known_durations_keeps_the_true_values() -> None:
    env = _make("DLCluster/Placement-v3", scenario=SCEN, scenario_overrides=SMALL,
                known_durations=True)  # fmt: skip
    inner = env.unwrapped
    obs, info = env.reset(seed=4)
    e = inner.engine
    job: Job = e.jobs[info["job"]]
    done = float(e.done_iters[job.job_id])
    left_h = (job.iterations - done) * job.compute_s * job.num_gpus / 3600.0
    assert obs[PROGRESS] == pytest.approx(done / job.iterations)
    assert obs[REMAINING] == pytest.approx(min(math.log1p(left_h) / math.log1p(1e4), 1.0), rel=1e-6)
    assert env.observation_space.shape == (OBS_SIZE,) == (63,)


# ---------------------------------------------------------------- deprecation warnings
OLD = [(k, v) for k in VERSIONS for v in VERSIONS[k] if leaks(k, VERSIONS[k][v])]
NEW = [(k, v) for k in VERSIONS for v in VERSIONS[k] if not leaks(k, VERSIONS[k][v])]


def test_the_leaky_and_the_clean_versions_are_the_expected_ones() -> None:
    assert OLD == [("Placement", 0), ("Placement", 1), ("Placement", 2), ("DelayTimer", 0),
                   ("Scheduler", 0), ("Scheduler", 1)]  # fmt: skip
    # Scheduler-v2 is leak-free too: v3 changed the action design, v4 added history features
    assert NEW == [("Placement", 3), ("DelayTimer", 1), ("Scheduler", 2), ("Scheduler", 3),
                   ("Scheduler", 4)]  # fmt: skip
    assert {(k, latest(k)) for k in VERSIONS} <= set(NEW)


@pytest.mark.parametrize(("kind", "version"), OLD)
def test_old_versions_warn_once_naming_the_leak_and_the_version_to_use(
    kind: str, version: int
) -> None:
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        gym.make(f"DLCluster/{kind}-v{version}")
    ours = [w for w in got if issubclass(w.category, DeprecationWarning)
            and "observes ground truth" in str(w.message)]  # fmt: skip
    assert len(ours) == 1
    msg = str(ours[0].message)
    assert f"DLCluster/{kind}-v{version} observes" in msg
    assert f"use DLCluster/{kind}-v{latest(kind)}" in msg
    if VERSIONS[kind][version].get("done_jobs_of") == "workload":
        assert "done_jobs_of='workload'" in msg
    if VERSIONS[kind][version].get("known_durations"):
        assert "job.progress and job.remaining_work are the true values" in msg
    assert ours[0].filename == __file__  # attributed to the line that made the env


@pytest.mark.parametrize(("kind", "version"), NEW)
def test_newest_versions_do_not_warn(kind: str, version: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        if version < latest(kind):  # gymnasium says a newer version exists; ours say nothing
            warnings.filterwarnings("ignore", ".*is out of date")
        env = gym.make(f"DLCluster/{kind}-v{version}")
    assert not env.unwrapped.clairvoyant


def test_an_oracle_option_on_the_newest_versions() -> None:
    """Placement's ``known_durations=True`` is v2's observation (it warns); Scheduler's is an
    oracle option of every version (no warning); both make the env clairvoyant."""
    with pytest.warns(DeprecationWarning, match=r"Placement-v2 observes ground truth"):
        env = gym.make("DLCluster/Placement-v3", known_durations=True)
    assert env.unwrapped.clairvoyant
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = gym.make("DLCluster/Scheduler-v4", known_durations=True)
    assert env.unwrapped.clairvoyant


def test_a_pickled_copy_does_not_warn_again() -> None:
    import pickle

    env = _make("DLCluster/Placement-v1").unwrapped
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        copy = pickle.loads(pickle.dumps(env))
    assert copy.clairvoyant and copy.env_name == "Placement-v1"


# ---------------------------------------------------------------- clairvoyant declarations
CLAIRVOYANT = [
    ("Placement-v3", {}, False),
    ("Placement-v2", {}, True),
    ("Placement-v1", {}, True),
    ("Placement-v0", {}, True),
    ("Placement-v0", {"known_durations": False, "done_jobs_of": "arrived"}, False),
    ("Placement-v3", {"known_durations": True}, True),
    ("Placement-v3", {"done_jobs_of": "workload"}, True),
    ("Placement-v3", {"base_policy": "tiresias"}, False),
    ("Placement-v3", {"base_policy": "tiresias", "base_params": {"thresholds": "scaled"}}, True),
    ("Placement-v3", {"base_params": {"remaining": "known"}}, True),
    ("Placement-v3", {"base_policy": "gandiva", "base_params": {"remaining": "known"}}, True),
    ("Placement-dally-batch-2rack-v3", {}, False),
    ("DelayTimer-v1", {}, False),
    ("DelayTimer-v0", {}, True),
    ("DelayTimer-v1", {"dally_params": {"remaining": "known"}}, True),
    ("DelayTimer-v0", {"done_jobs_of": "arrived"}, False),
    ("Scheduler-v2", {}, False),
    ("Scheduler-v1", {}, True),
    ("Scheduler-v0", {}, True),
    ("Scheduler-v0", {"done_jobs_of": "arrived"}, False),
    ("Scheduler-v2", {"known_durations": True}, True),
    ("Scheduler-v2", {"known_durations": True, "order": "srw"}, True),
]


@pytest.mark.parametrize(("env_id", "kw", "want"), CLAIRVOYANT)
def test_each_env_declares_whether_it_is_clairvoyant(env_id: str, kw: dict, want: bool) -> None:
    env = _make(f"DLCluster/{env_id}", **kw).unwrapped
    assert env.clairvoyant is want
    assert is_clairvoyant(env) is want
    with pytest.raises(AttributeError):
        env.clairvoyant = not want  # read-only


@pytest.mark.parametrize("cls", [PlacementEnv, DelayTimerEnv, SchedulerEnv])
def test_metadata_class_defaults_are_the_env_classes(cls: type) -> None:
    params = {}
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if init is not None and klass is not object and klass is not gym.Env:
            params.update(inspect.signature(init).parameters)
    kind = cls.env_name.split("-")[0]
    for key in OBSERVATION_KWARGS[kind]:
        assert params[key].default == CLASS_DEFAULTS[key], (kind, key)


QUANTILES = {"thresholds": "quantiles"}


def _never(env: gym.Env) -> Any:
    raise AssertionError("the label must not need the env policy")


@pytest.mark.parametrize(
    ("wrapper", "want"),
    [
        (lambda: OfferPolicyScheduler(_never), False),
        (lambda: OfferPolicyScheduler(_never, known_durations=True), True),
        (lambda: OfferPolicyScheduler(_never, done_jobs_of="workload"), True),
        (lambda: OfferPolicyScheduler(_never, base_policy="tiresias", base_params=QUANTILES), True),
        (lambda: OfferPolicyScheduler(_never, clairvoyant_policy=True), True),
        (lambda: TimerPolicyScheduler(_never), False),
        (lambda: TimerPolicyScheduler(_never, done_jobs_of="workload"), True),
        (lambda: TimerPolicyScheduler(_never, dally_params={"remaining": "known"}), True),
        (lambda: QueuePolicyScheduler(_never), False),
        (lambda: QueuePolicyScheduler(_never, env_kwargs={"known_durations": True}), True),
        (lambda: QueuePolicyScheduler(_never, env_kwargs={"done_jobs_of": "workload"}), True),
        (lambda: QueuePolicyScheduler(_never, clairvoyant_policy=True), True),
    ],
)
def test_native_wrappers_declare_the_env_they_build(wrapper: Any, want: bool) -> None:
    assert is_clairvoyant(wrapper()) is want


def test_env_policies_declare_what_they_read() -> None:
    env = _make("DLCluster/Scheduler-v2", known_durations=True, order="srw")
    assert make_env_policy("srw", env).clairvoyant
    assert make_env_policy("srw-slots", env).clairvoyant
    plain = _make("DLCluster/Scheduler-v2", preemption=True)
    assert not make_env_policy("dally", plain).clairvoyant
    assert not make_env_policy("tiresias", plain).clairvoyant
    assert make_env_policy("tiresias", plain, thresholds="scaled").clairvoyant


@pytest.mark.parametrize("name", ["placement", "delay_timer", "scheduler", "oracle-placement"])
def test_agents_are_labelled_from_their_metadata(name: str, tmp_path: Path) -> None:
    """Every shipped agent was trained without ground truth: deployable. A placement agent
    whose metadata says it saw the true remaining work is clairvoyant. The label comes from
    the metadata alone (no torch import)."""
    kind = "deployable"
    path = SHIPPED / f"{name}.zip"
    if name == "oracle-placement":
        kind, path = "clairvoyant", tmp_path / "oracle.zip"

        def oracle(meta: dict) -> dict:
            meta["env_kwargs"].update(known_durations=True, done_jobs_of="workload")
            return meta

        _rewrite_meta(SHIPPED / "placement.zip", path, oracle)
    assert policy_kind(f"agent:{path}") == kind
    code = (
        "import sys; from dlcluster_gym.scheduler import policy_kind; "
        f"print(policy_kind('agent:{path}'), 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == [kind, "False"]


def test_shipped_metadata_records_what_each_agent_saw() -> None:
    kw = {n: read_agent_meta(SHIPPED / f"{n}.zip")["env_kwargs"]
          for n in ("placement", "delay_timer", "scheduler")}  # fmt: skip
    assert kw["placement"]["done_jobs_of"] == "arrived"
    assert kw["placement"]["known_durations"] is False
    assert kw["delay_timer"]["done_jobs_of"] == "arrived"
    assert kw["scheduler"]["done_jobs_of"] == "arrived"
    assert kw["scheduler"]["known_durations"] is False


# ---------------------------------------------------------------- checkpoint metadata
def _rewrite_meta(src: Path, dst: Path, edit: Any) -> None:
    """Copy checkpoint ``src`` to ``dst`` with its metadata edited (no validation)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = zin.read(info.filename)
            if info.filename == META_NAME:
                data = json.dumps(edit(json.loads(data))).encode()
            zout.writestr(info, data)


def _drop(*keys: str) -> Any:
    def edit(meta: dict) -> dict:
        meta["env_kwargs"] = {k: v for k, v in meta["env_kwargs"].items() if k not in keys}
        return meta

    return edit


def test_a_checkpoint_that_does_not_record_its_observation_is_an_error(tmp_path: Path) -> None:
    old = tmp_path / "old.zip"
    _rewrite_meta(SHIPPED / "placement.zip", old, _drop("done_jobs_of", "known_durations"))
    pattern = (
        r"'\S*old\.zip' does not record done_jobs_of, known_durations in the env_kwargs of "
        r"its dlcluster_agent\.json.*no default is assumed.*retrain it with `dlcluster train`"
        r".*write_agent_meta.*\"done_jobs_of\": \"workload\", \"known_durations\": true"
    )
    with pytest.raises(ConfigError, match=pattern):
        read_agent_meta(old)
    with pytest.raises(ConfigError, match="does not record done_jobs_of, known_durations"):
        make_policy(f"agent:{old}")
    with pytest.raises(ConfigError, match="does not record done_jobs_of, known_durations"):
        policy_kind(f"agent:{old}")
    part = tmp_path / "part.zip"
    _rewrite_meta(SHIPPED / "scheduler.zip", part, _drop("known_durations"))
    with pytest.raises(ConfigError, match=r"does not record known_durations in"):
        read_agent_meta(part)


def test_write_agent_meta_records_keys_and_keeps_the_model(tmp_path: Path) -> None:
    old = tmp_path / "old.zip"
    _rewrite_meta(SHIPPED / "delay_timer.zip", old, _drop("done_jobs_of"))
    with pytest.raises(ConfigError, match="does not record done_jobs_of"):
        read_agent_meta(old)
    with zipfile.ZipFile(old) as z:
        meta = json.loads(z.read(META_NAME))
        before = {i.filename: z.read(i.filename) for i in z.infolist() if i.filename != META_NAME}
    with pytest.raises(ConfigError, match="does not record done_jobs_of"):
        write_agent_meta(old, meta)  # refuses to write metadata that would not load
    meta["env_kwargs"]["done_jobs_of"] = "arrived"
    write_agent_meta(old, meta)
    assert read_agent_meta(old)["env_kwargs"]["done_jobs_of"] == "arrived"
    with zipfile.ZipFile(old) as z:
        after = {i.filename: z.read(i.filename) for i in z.infolist() if i.filename != META_NAME}
    assert after == before
    assert policy_kind(f"agent:{old}") == "deployable"


def test_training_records_the_observation_kwargs_always() -> None:
    pytest.importorskip("stable_baselines3")
    from dlcluster_gym.agents.config import load_agent_config
    from dlcluster_gym.agents.train import recorded_env_kwargs

    placement = load_agent_config("placement")
    assert recorded_env_kwargs(placement) == {
        "done_jobs_of": "arrived", "known_durations": False, "base_policy": "dally"}  # fmt: skip
    bare = placement.model_copy(update={"env_kwargs": {}})
    assert recorded_env_kwargs(bare) == {"done_jobs_of": "workload", "known_durations": True}
    timer = load_agent_config("delay_timer")
    assert recorded_env_kwargs(timer)["done_jobs_of"] == "arrived"
    for name in ("scheduler", "scheduler-v6"):
        kw = recorded_env_kwargs(load_agent_config(name))
        assert (kw["done_jobs_of"], kw["known_durations"]) == ("arrived", False)
