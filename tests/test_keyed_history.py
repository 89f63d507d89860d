"""Submission attributes (virtual cluster, user, job name), the estimators keyed by them, the
policies that use them (``qssf``, ``qssf-preemptive``) and the clairvoyant ``srsf``, and
Scheduler-v4's history features, with the information boundary checked past the first finish:
changing the lengths of jobs that have not finished changes nothing a deployable policy or
the env shows."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from conftest import needs_traces, run_engine, small_scenario

from dlcluster_gym.api import prepare
from dlcluster_gym.config import load_scenario
from dlcluster_gym.scheduler import make_policy, policy_kind
from dlcluster_gym.sim.engine import Engine
from dlcluster_gym.sim.estimators import (
    KEY_LEVELS,
    KEY_WINDOW,
    History,
    keyed_length,
    keyed_remaining_work,
    remaining_iterations,
)
from dlcluster_gym.workload.job import Job
from dlcluster_gym.workload.traces import load_generic, load_helios, load_philly

# ---------------------------------------------------------------- loaders


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_philly_loader_keeps_the_virtual_cluster(tmp_path: Path) -> None:
    p = _write(tmp_path / "philly.csv", "timestamp,duration,num_gpus,gpu_time,cluster\n"
               "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
               "2017-10-09 06:13:03,2951.0,2,5902.0,6214e9\n")  # fmt: skip
    t = load_philly(p)
    assert t.vcs == ("6214e9", "11cb48")  # sorted by arrival
    assert t.users is None and t.job_names is None
    assert load_philly(p, time_window_s=(0.0, 60.0)).vcs == ("6214e9",)
    # without the column: no VCs, not an error
    q = _write(tmp_path / "novc.csv", "timestamp,duration,num_gpus\n2017-10-09 07:01:55,6,1\n")
    assert load_philly(q).vcs is None


def test_helios_loader_maps_user_vc_and_job_name(tmp_path: Path) -> None:
    head = "job_id,user,vc,jobname,gpu_num,cpu_num,node_num,state,submit_time,start_time,"
    p = _write(tmp_path / "helios.csv", head + "end_time,duration,queue\n"
               "j1,alice,vcA,train-bert,8,0,1,COMPLETED,100,0,0,500,0\n"
               "j2,bob,vcB,eval,0,4,1,COMPLETED,50,0,0,20,0\n"
               "j3,bob,vcA,resnet,2,0,1,COMPLETED,10,0,0,30,0\n")  # fmt: skip
    t = load_helios(p)
    assert t.job_ids == ("j3", "j1")  # the CPU-only job is left out
    assert t.users == ("bob", "alice")
    assert t.vcs == ("vcA", "vcA")
    assert t.job_names == ("resnet", "train-bert")


def test_generic_loader_maps_attributes(tmp_path: Path) -> None:
    p = _write(tmp_path / "g.csv", "t,d,g,team,who,name\n0,10,1,a,u1,x\n5,20,2,,u2,y\n")
    t = load_generic(p, columns={"arrival": "t", "duration": "d", "num_gpus": "g",
                                 "vc": "team", "user": "who", "job_name": "name"})  # fmt: skip
    assert t.vcs == ("a", "") and t.users == ("u1", "u2") and t.job_names == ("x", "y")


@needs_traces
def test_philly_scenario_jobs_carry_their_vc() -> None:
    sc = load_scenario("philly-1024gpu", workload={
        "kind": "trace", "format": "philly", "path": "pollux_adaptdl/traces/philly.csv",
        "max_jobs": 300})  # fmt: skip
    _, _, jobs, _ = prepare(sc, seed=1)
    vcs = {j.vc for j in jobs}
    assert "" not in vcs and len(vcs) >= 3


def test_job_attributes_must_be_text() -> None:
    from dlcluster_gym.errors import ConfigError

    with pytest.raises(ConfigError, match="vc must be a string"):
        Job(0, "vgg11", 1, 10.0, 1.0, 0.0, vc=3)  # type: ignore[arg-type]


# ---------------------------------------------------------------- estimators


def _history(specs: list[tuple[float, str, str, str, int]]) -> History:
    """Finished jobs (length s, vc, user, job name, GPUs), in finish order."""
    jobs = [Job(i, "m", g, ln, 1.0, 0.0, vc=vc, user=u, job_name=n)
            for i, (ln, vc, u, n, g) in enumerate(specs)]  # fmt: skip
    return History(SimpleNamespace(finished_order=list(range(len(jobs))), jobs=jobs))


def _with_open_jobs(h: History, specs: list[tuple[str, str, str, int]]) -> np.ndarray:
    """Add unfinished jobs (vc, user, job name, GPUs) to ``h``'s engine; their ids."""
    e = h._e
    start = len(e.jobs)
    for k, (vc, u, n, g) in enumerate(specs):
        e.jobs.append(Job(start + k, "m", g, 1.0, 1.0, 0.0, vc=vc, user=u, job_name=n))
    h._job_rows = np.full((len(e.jobs), len(KEY_LEVELS) + 1), -2, dtype=np.int64)
    return np.arange(start, len(e.jobs))


def test_keyed_estimates_hand_computed() -> None:
    h = _history([
        (100.0, "a", "u", "train", 1), (300.0, "a", "u", "train", 1),  # user+name (u, train)
        (1000.0, "a", "v", "other", 2),  # VC a, 2 GPUs
        (5000.0, "a", "w", "big", 4),  # VC a
        (50.0, "b", "", "", 1),  # VC b
    ])  # fmt: skip
    jobs = _with_open_jobs(h, [
        ("a", "u", "train", 1),  # its recurring job: mean(100, 300)
        ("a", "x", "new", 2),  # VC a with 2 GPUs: 1000
        ("a", "x", "new", 8),  # VC a: mean(100, 300, 1000, 5000)
        ("c", "", "", 1),  # unseen VC c, no name; 1 GPU (VC ""): nothing -> all finished
        ("", "", "", 2),  # no VC: keyed by GPU count over the trace ("", 2): none -> all
    ])  # fmt: skip
    mean, count, level = keyed_length(h, jobs)
    np.testing.assert_allclose(mean[:3], [200.0, 1000.0, 1600.0])
    np.testing.assert_allclose(mean[3:], [1290.0, 1290.0])
    assert count.tolist() == [2, 1, 4, 5, 5]
    assert level.tolist() == [0, 1, 2, 3, 3]
    # remaining given work done: (u, train) with 150 done -> only 300 is longer -> 150 left;
    # with 400 done none of its key is longer -> VC a & 1 GPU: none -> VC a: 1000, 5000 longer
    rem, lvl = keyed_remaining_work(h, jobs[[0, 0]], np.array([150.0, 400.0]))
    np.testing.assert_allclose(rem, [150.0, 2600.0])
    assert lvl.tolist() == [0, 2]
    # beyond every finished length: NaN, and remaining_iterations falls back to "attained"
    rem, lvl = keyed_remaining_work(h, jobs[[1]], np.array([9000.0]))
    assert np.isnan(rem[0]) and lvl[0] == len(KEY_LEVELS) + 1
    got = remaining_iterations(h, np.array([1.0]), np.array([9000.0]), method="keyed",
                               jobs=jobs[[1]])  # fmt: skip
    np.testing.assert_allclose(got, [9000.0])


def test_keyed_windows_keep_the_latest_jobs_only() -> None:
    n = KEY_WINDOW + 5
    h = _history([(float(10 * (i + 1)), "a", "u", "n", 1) for i in range(n)])
    jobs = _with_open_jobs(h, [("a", "u", "n", 1)])
    mean, count, _ = keyed_length(h, jobs)
    assert count[0] == KEY_WINDOW
    np.testing.assert_allclose(mean, [np.mean([10.0 * (i + 1) for i in range(5, n)])])


def test_no_history_no_estimate() -> None:
    h = _history([])
    jobs = _with_open_jobs(h, [("a", "u", "n", 1)])
    mean, count, level = keyed_length(h, jobs)
    assert np.isnan(mean[0]) and count[0] == 0 and level[0] == len(KEY_LEVELS) + 1
    rem, _ = keyed_remaining_work(h, jobs, np.array([0.0]))
    assert np.isnan(rem[0])
    empty = np.array([], dtype=np.int64)
    assert keyed_length(h, empty)[0].size == 0
    assert keyed_remaining_work(h, empty, np.array([]))[0].size == 0


# ---------------------------------------------------------------- policies


def test_kinds() -> None:
    assert policy_kind("qssf") == "deployable"
    assert policy_kind("qssf-preemptive") == "deployable"
    assert policy_kind("srsf") == "clairvoyant"


def test_qssf_starts_the_shortest_estimated_job_first() -> None:
    """Two recurring jobs, one short (user s) and one long (user l), finish first; then a long
    and a short one of the same names wait for one machine: QSSF starts the short one first
    though it arrived later; FCFS starts the long one."""
    sc = small_scenario(racks=1, machines=1, gpus=4)
    jobs = [
        Job(0, "vgg11", 4, 100, 1.0, 0.0, user="s", job_name="quick"),
        Job(1, "vgg11", 4, 10_000, 1.0, 1.0, user="l", job_name="slow"),
        Job(2, "vgg11", 4, 10_000, 1.0, 20_000.0, user="l", job_name="slow"),
        Job(3, "vgg11", 4, 10_000, 1.0, 20_001.0, user="l", job_name="slow"),
        Job(4, "vgg11", 4, 100, 1.0, 20_002.0, user="s", job_name="quick"),
    ]
    _, res = run_engine(sc, jobs, make_policy("qssf"))
    start = res.jobs["first_start_s"]
    assert start[4] < start[3]  # the short recurring job jumps the long one
    _, fifo = run_engine(sc, jobs, make_policy("fcfs"))
    assert fifo.jobs["first_start_s"][3] < fifo.jobs["first_start_s"][4]
    assert res.summary["avg_jct_s"] < fifo.summary["avg_jct_s"]


def test_srsf_is_no_worse_than_las_on_a_small_preset() -> None:
    from dlcluster_gym import simulate

    srsf = simulate("dally-poisson-2rack", "srsf", seed=1).summary["avg_jct_s"]
    las = simulate("dally-poisson-2rack", "las-slots", seed=1).summary["avg_jct_s"]
    assert srsf < las


# ---------------------------------------------------------------- past the first finish

GROUPED = load_scenario(
    "dally-poisson-2rack",
    workload={"kind": "dally", "num_jobs": 120, "arrival": "poisson", "load": 1.3},
)


def _grouped_jobs(seed: int = 3) -> tuple[Any, Any, list[Job]]:
    """A workload whose jobs carry VCs, users and names, and whose recurring jobs (same user
    and name) have similar lengths, so that the keyed estimates differ from the pooled one."""
    cfg, cluster, jobs, _ = prepare(GROUPED, seed=seed)
    out = []
    for j in jobs:
        g = j.job_id % 6
        out.append(dataclasses.replace(j, vc=f"vc{g % 3}", user=f"u{g}", job_name=f"n{g}",
                                       iterations=float(j.iterations) * (0.2 + g)))  # fmt: skip
    return cfg, cluster, out


def _decisions(cfg: Any, cluster: Any, jobs: list[Job], name: str, until: int) -> list:
    engine = Engine(cfg, cluster, jobs, make_policy(name), np.random.default_rng(7))
    steps = engine.instants()
    log = []
    view = next(steps)
    try:
        while len(log) < until:
            actions = list(engine._decide(view))
            log.append((view.now, engine.n_done, repr(actions)))
            view = steps.send(actions)
    except StopIteration:
        pass
    return log


def _unfinished_longer(jobs: list[Job], finished: set[int], factor: float) -> list[Job]:
    return [
        j if j.job_id in finished else dataclasses.replace(j, iterations=j.iterations * factor)
        for j in jobs
    ]


@pytest.mark.parametrize("name", ["qssf", "qssf-preemptive"])
def test_keyed_policies_read_finished_jobs_only(name: str) -> None:
    """Run until many jobs finished; then make every job not finished by then 3x longer: the
    decisions up to then are the same (only finished jobs' lengths enter the estimates)."""
    cfg, cluster, jobs = _grouped_jobs()
    until = 200
    log = _decisions(cfg, cluster, jobs, name, until)
    engine = Engine(cfg, cluster, jobs, make_policy(name), np.random.default_rng(7))
    res = engine.run()
    t_end = log[-1][0]
    finished = {int(j) for j, f in enumerate(res.jobs["finish_s"]) if f <= t_end}
    assert len(finished) >= 10, "vacuous: few jobs finished in the window"
    other = _unfinished_longer(jobs, finished, 3.0)
    assert _decisions(cfg, cluster, other, name, until) == log
    # control: changing a finished job's length changes later decisions
    first = min(finished, key=lambda j: res.jobs["finish_s"][j])
    changed = [dataclasses.replace(j, iterations=float(j.iterations) * 0.5)
               if j.job_id == first else j for j in jobs]  # fmt: skip
    assert _decisions(cfg, cluster, changed, name, until) != log


def test_scheduler_v4_history_features_read_finished_jobs_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import gymnasium as gym

    import dlcluster_gym.envs.base as env_base
    from dlcluster_gym.envs.queue_obs import HISTORY_FEATURES, NW

    real = env_base.prepare

    def records(jobs_fn: Any, steps: int) -> tuple[list, Any]:
        def prepared(*args: Any, **kwargs: Any) -> Any:
            cfg, cluster, jobs, rng = real(*args, **kwargs)
            return cfg, cluster, jobs_fn(jobs), rng

        monkeypatch.setattr(env_base, "prepare", prepared)
        env = gym.make("DLCluster/Scheduler-v4", scenario=GROUPED)
        obs, _ = env.reset(seed=3)
        rng = np.random.default_rng(0)
        out = []
        for _ in range(steps):
            mask = np.asarray(env.unwrapped.action_masks())
            heads = np.split(mask, np.cumsum(env.action_space.nvec)[:-1])
            out.append((obs.tobytes(), mask.tobytes()))
            action = np.array([rng.choice(np.flatnonzero(h)) for h in heads])
            obs, _, term, trunc, _ = env.step(action)
            if term or trunc:
                break
        monkeypatch.setattr(env_base, "prepare", real)
        return out, env.unwrapped

    def attrs(jobs: list[Job]) -> list[Job]:
        return [dataclasses.replace(j, vc=f"vc{j.job_id % 3}", user=f"u{j.job_id % 6}",
                                    job_name=f"n{j.job_id % 6}") for j in jobs]  # fmt: skip

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        rec_a, env = records(attrs, 600)
        e = env.engine
        t_end = e.now
        finished = set(e.finished_order)
        assert len(finished) >= 10, "vacuous: few jobs finished in the window"
        # the history features are in the observation and were filled from finished jobs
        obs = np.frombuffer(rec_a[-1][0], dtype=np.float32)
        w = obs[: env.K * (NW + len(HISTORY_FEATURES))].reshape(env.K, -1)
        assert w[:, NW + HISTORY_FEATURES.index("est_known")].any()
        rec_b, env_b = records(lambda js: _unfinished_longer(attrs(js), finished, 3.0), 600)
        assert len(rec_b) >= len(rec_a) and env_b.engine.now >= t_end
        assert rec_a == rec_b[: len(rec_a)]


def test_scheduler_v4_defaults() -> None:
    import gymnasium as gym

    from dlcluster_gym.envs.queue_obs import HISTORY_FEATURES

    v4 = gym.make("DLCluster/Scheduler-v4").unwrapped
    assert (v4.env_name, v4.preemption, v4.history_features, v4.per_job) == (
        "Scheduler-v4", True, True, True)  # fmt: skip
    assert v4.scenario.name == "dally-groups-4rack-load12"
    v3 = gym.make("DLCluster/Scheduler-v3").unwrapped
    assert not v3.preemption and not v3.history_features
    assert v3.scenario.name == "dally-poisson-4rack"
    extra = (v4.K + v4.R) * len(HISTORY_FEATURES)
    assert v4.observation_space.shape[0] == v3.observation_space.shape[0] + extra
    # preemption off is still v4 (the observation decides the version), and scenarios work
    off = gym.make("DLCluster/Scheduler-v4", preemption=False,
                   scenarios=[{"scenario": "dally-poisson-2rack"}]).unwrapped  # fmt: skip
    assert off.env_name == "Scheduler-v4" and not off.preemption
