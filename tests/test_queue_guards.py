"""Starvation guards of the ``las-slots`` teacher (``IndexSlots``; issue #17's P99 target)."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import pytest

from dlcluster_gym.baselines.queue_policies import IndexSlots, LASSlots
from dlcluster_gym.envs.policies import make_env_policy, rollout
from dlcluster_gym.errors import ConfigError

ID = "DLCluster/Scheduler-v0"
BATCH = "dally-batch-2rack"
BATCH_OVER = {"workload": {"num_jobs": 60}}


def _env() -> gym.Env:
    kw = {**LASSlots.env_kwargs, "invalid_action": "raise"}  # a masked action would raise
    return gym.make(ID, scenario=BATCH, scenario_overrides=BATCH_OVER, **kw)


def _run(**guards: object) -> tuple[dict, np.ndarray, LASSlots]:
    env = _env()
    pol = make_env_policy("las-slots", env, **guards)
    info, _, _ = rollout(env, pol, seed=5)
    r = info["results"]
    summary = {k: r[k] for k in ("avg_jct_s", "p99_jct_s", "preemptions", "jobs_unfinished")}
    return summary, env.unwrapped.engine.preemptions.copy(), pol


@pytest.mark.parametrize(
    ("kw", "msg"),
    [
        ({"promote_knob": -1}, "promote_knob must be a number >= 0, got -1"),
        ({"promote_knob": math.inf}, "promote_knob and wait_ratio must be finite"),
        ({"max_wait_h": "x"}, r"parameter 'max_wait_h': Input should be a valid number.*got 'x'"),
        ({"max_wiat_h": 2}, "has no parameter 'max_wiat_h'"),
        ({"margin": "x"}, r"parameter 'margin': Input should be a valid number.*got 'x'"),
        ({"wait_ratio": -0.5}, "wait_ratio must be a number >= 0, got -0.5"),
        ({"max_preemptions": 0}, "max_preemptions must be an integer >= 1 or None, got 0"),
        ({"max_preemptions": 1.5}, r"parameter 'max_preemptions': Input should be a valid int"),
        ({"wait_from": "now"}, "wait_from must be 'arrival' or 'first_start', got 'now'"),
    ],
)
def test_bad_guard_parameters_are_one_line_errors(kw: dict, msg: str) -> None:
    with pytest.raises(ConfigError, match=msg):
        LASSlots(_env(), **kw)


def test_guards_need_the_las_rule() -> None:
    with pytest.raises(ConfigError, match="starvation guards need rule='las'"):
        IndexSlots(_env(), rule="gittins", max_wait_h=6)


def test_default_guards_are_off() -> None:
    p = LASSlots(_env())
    assert p.promote_knob == 0 and math.isinf(p.max_wait_h) and p.max_preemptions is None


def test_max_preemptions_bounds_every_job() -> None:
    _, pre, _ = _run()
    assert pre.max() > 1  # without the guard some job is preempted more than once here
    guarded, pre1, _ = _run(max_preemptions=1)
    assert pre1.max() == 1 and guarded["jobs_unfinished"] == 0
    assert guarded == _run(max_preemptions=1)[0]  # deterministic


def test_tiresias_promotion_promotes_and_is_deterministic() -> None:
    s, _, pol = _run(promote_knob=0.5)
    assert pol.promotions > 0 and s["jobs_unfinished"] == 0
    s2, _, pol2 = _run(promote_knob=0.5)
    assert s == s2 and pol.promotions == pol2.promotions


def test_wait_cap_never_preempts_a_protected_job() -> None:
    env = _env()
    pol = make_env_policy("las-slots", env, max_wait_h=2.0, wait_ratio=0.25)
    u = env.unwrapped
    obs, _ = env.reset(seed=5)
    seen = seen_protected = 0
    for _ in range(5000):
        a = int(pol.predict(obs)[0])
        kind, job, _ = u.decode(a)
        if kind == "preempt":
            seen += 1
            e = u.engine
            ids = np.asarray([j for j in e.waiting if not u._tmask[j]] + [job])
            run = u.view.live(ids)[1]
            waited = (e.now - u.obs_state.arrival[ids] - run) / 3600.0
            protected = (run > 0) & (waited >= 2.0 + 0.25 * run / 3600.0)
            if protected[-1]:  # a protected victim only for a protected job waiting 4 h more
                assert (protected[:-1] & (waited[:-1] - waited[-1] > 4.0)).any()
                seen_protected += 1
        obs, _, term, trunc, info = env.step(a)
        if term or trunc:
            break
    assert seen > 0 and term and info["results"]["jobs_unfinished"] == 0
    assert info["results"]["avg_jct_s"] != _run()[0]["avg_jct_s"]  # the guard acted
