"""The information boundary: what a scheduler may know.

The general check is counterfactual: for every registered policy that does not declare itself
clairvoyant, two workloads identical in everything a real scheduler observes (arrivals,
demands, models, per-iteration compute) that differ only in the jobs' true lengths (running
jobs and jobs not yet arrived), or that differ only by jobs arriving later, produce identical
decisions until the first job finishes (at most ``MAX_INSTANTS`` decision instants).
Parametrized over the policy registry, so a new policy is checked without anyone remembering
to add it. Declared-clairvoyant policies are the
control: the same check tells their workloads apart.
"""

from __future__ import annotations

import dataclasses
import math
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from conftest import run_engine, small_scenario

from dlcluster_gym import BaseScheduler, Start
from dlcluster_gym.api import prepare
from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import load_scenario
from dlcluster_gym.errors import NotApplicableError, OracleError
from dlcluster_gym.scheduler import is_clairvoyant, make_policy, policies, policy_kind
from dlcluster_gym.sim.engine import Engine
from dlcluster_gym.sim.estimators import History, remaining_iterations
from dlcluster_gym.workload.job import Job

# A small workload per family of policies; lengths are stretched so that the first finish
# comes late and the comparison window holds many decisions.
GPU = load_scenario(
    "dally-poisson-2rack",
    workload={"kind": "dally", "num_jobs": 48, "arrival": "poisson", "load": 1.2},
)
GPU_BATCH = load_scenario(
    "dally-batch-2rack", workload={"kind": "dally", "num_jobs": 40, "arrival": "batch"}
)
CASSINI = load_scenario(
    "cassini-testbed-poisson",
    workload={
        "kind": "synthetic", "num_jobs": 40, "arrival": "poisson", "load": 1.2,
        "models": ["vgg16", "resnet50", "bert", "gpt2-medium"],
        "gpu_demands": [1, 2, 4, 6, 8], "iterations": [200, 1000],
    },
)  # fmt: skip
ADAPTIVE = load_scenario(
    {
        "name": "adaptive-small",
        "cluster": "crius-testbed-64gpu",
        "workload": {
            "kind": "synthetic", "num_jobs": 40, "arrival": "poisson", "load": 1.2,
            "models": ["bert-0.76b", "moe-0.69b", "wresnet-0.5b"], "gpu_demands": [4, 8],
            "iterations": [200, 2000],
        },
        "round_period_s": 300,
    }
)  # fmt: skip
PS = load_scenario(
    "nearchus-multi-a",
    workload={"kind": "ps", "num_jobs": 16, "arrival": "poisson", "rate_per_hour": 4.0},
)
SCENARIOS = (GPU, GPU_BATCH, CASSINI, ADAPTIVE, PS)
# Base lengths x this: the queue fills before the first finish (PS jobs reconfigure every
# epoch, so a shorter stretch gives them a window as busy); the fewest actions a window must
# hold for the comparison not to be vacuous.
STRETCH = {"nearchus-multi-a": (5.0, 10.0)}
DEFAULT_STRETCH = (100.0, 200.0)
MIN_ACTIONS = {"nearchus-multi-a": 1}
# The window also ends after this many decision instants: round-based policies (Gavel's rounds,
# Gandiva's time-slicing quanta) decide every few minutes for days before the first finish, and
# this many rounds already hold thousands of actions.
MAX_INSTANTS = 150


def _workload(cfg: Any, seed: int = 3) -> tuple[Any, Cluster, list[Job]]:
    cfg, cluster, jobs, _ = prepare(cfg, seed=seed)
    return cfg, cluster, jobs


def _stretch(jobs: list[Job], factors: np.ndarray) -> list[Job]:
    return [
        dataclasses.replace(j, iterations=float(j.iterations) * float(f))
        for j, f in zip(jobs, factors, strict=True)
    ]


def _late_jobs(jobs: list[Job], after_s: float, rng: np.random.Generator) -> list[Job]:
    """``jobs`` plus copies of a few of them, with other lengths, arriving after ``after_s``."""
    n = len(jobs)
    extra = [
        dataclasses.replace(
            jobs[i], job_id=n + k, name=f"late-{k}", arrival_s=after_s + 10.0 * (k + 1),
            iterations=float(jobs[i].iterations) * float(rng.uniform(0.2, 5.0)),
        )
        for k, i in enumerate(rng.choice(n, size=min(6, n), replace=False).tolist())
    ]  # fmt: skip
    return [*jobs, *extra]


def _canon(actions: Any) -> tuple:
    out = []
    for a in actions:
        fields = dataclasses.asdict(a) if dataclasses.is_dataclass(a) else {"repr": repr(a)}
        out.append((type(a).__name__, tuple(sorted((k, repr(v)) for k, v in fields.items()))))
    return tuple(out)


def decisions_until_first_finish(
    cfg: Any,
    cluster: Cluster,
    jobs: list[Job],
    name: str,
    params: dict,
    max_instants: int = MAX_INSTANTS,
) -> tuple[list[tuple[float, tuple]], float]:
    """The policy's decisions (time, actions) at every instant before the first job finishes
    or the ``max_instants``-th instant, whichever comes first, and the time where the window
    ends (inf if the run ends first)."""
    policy = make_policy(name, **params)
    engine = Engine(cfg, cluster, jobs, policy, np.random.default_rng(7))
    steps = engine.instants()
    log: list[tuple[float, tuple]] = []
    try:
        view = next(steps)
        while not any(t.kind == "finish" for t in view.triggers):
            if len(log) >= max_instants:
                return log, view.now
            actions = engine._decide(view)
            actions = list(actions)
            log.append((view.now, _canon(actions)))
            view = steps.send(actions)
        return log, view.now
    except StopIteration:
        return log, float("inf")


def _entrants() -> list[tuple[str, dict]]:
    out: list[tuple[str, dict]] = []
    for name, spec in policies().items():
        if spec.bound:
            continue
        out.append((name, {}))
    # non-default variants whose information model differs from the default
    out += [
        ("themis", {"lengths": "attained"}), ("themis", {"lengths": "history"}),
        ("cassini", {"base_params": {"lengths": "history"}}),
        ("tiresias", {"thresholds": "fixed"}), ("tiresias", {"thresholds": "scaled"}),
        ("dally", {"remaining": "known"}), ("gandiva", {"remaining": "known"}),
        ("dally", {"remaining": "attained"}), ("gandiva", {"remaining": "model-history"}),
    ]  # fmt: skip
    return out


def _id(entrant: tuple[str, dict]) -> str:
    name, params = entrant
    return name + "".join(f"-{k}={v}" for k, v in params.items())


def _applicable(name: str, params: dict) -> list[tuple[Any, Cluster, list[Job]]]:
    """The test workloads the policy applies to (both GPU ones for GPU policies)."""
    out = []
    for cfg in SCENARIOS:
        sc, cluster, jobs = _workload(cfg)
        try:
            decisions_until_first_finish(sc, cluster, jobs[:2], name, params)
        except NotApplicableError:
            continue
        out.append((sc, cluster, jobs))
    if not out:
        pytest.fail(f"policy {name} applies to none of the test workloads")
    return out


def _pair(scenario: str, jobs: list[Job], rng: np.random.Generator) -> tuple[list[Job], list[Job]]:
    """(base, other): the base workload with late first finishes, and the same workload with
    other true lengths only."""
    base = _stretch(jobs, rng.uniform(*STRETCH.get(scenario, DEFAULT_STRETCH), len(jobs)))
    return base, _stretch(base, rng.uniform(0.5, 2.0, len(jobs)))


@pytest.mark.parametrize("entrant", _entrants(), ids=_id)
def test_counterfactual_lengths_and_late_arrivals(entrant: tuple[str, dict]) -> None:
    name, params = entrant
    declared = is_clairvoyant(make_policy(name, **params))
    for sc, cluster, jobs in _applicable(name, params):
        rng = np.random.default_rng(11)
        base, other = _pair(sc.name, jobs, rng)
        log_a, t_a = decisions_until_first_finish(sc, cluster, base, name, params)
        acted = sum(len(acts) for t, acts in log_a if t < t_a)
        need = MIN_ACTIONS.get(sc.name, 3)
        assert acted >= need, f"{name} on {sc.name}: {acted} actions before the first finish"
        if declared:
            continue  # allowed to differ (the controls below check that they do)
        log_b, t_b = decisions_until_first_finish(sc, cluster, other, name, params)
        horizon = min(t_a, t_b)
        seen_a = [d for d in log_a if d[0] < horizon]
        seen_b = [d for d in log_b if d[0] < horizon]
        assert seen_a == seen_b, f"{name} {params} on {sc.name}: decisions depend on lengths"
        # the same workload plus jobs that arrive after the first finish
        late = _late_jobs(base, t_a, rng)
        log_c, _ = decisions_until_first_finish(sc, cluster, late, name, params)
        assert [d for d in log_c if d[0] < t_a] == [d for d in log_a if d[0] < t_a], (
            f"{name} {params} on {sc.name}: decisions depend on jobs not arrived yet"
        )


@pytest.mark.parametrize(
    "entrant",
    [("srw", {}), ("themis", {}), ("tiresias", {"thresholds": "scaled"})],
    ids=_id,
)
def test_the_counterfactual_check_catches_declared_clairvoyant_policies(
    entrant: tuple[str, dict],
) -> None:
    """Control: policies that read lengths are told apart by the same two workloads (so the
    check above can fail)."""
    name, params = entrant
    sc, cluster, jobs = _workload(GPU_BATCH)
    base, other = _pair(sc.name, jobs, np.random.default_rng(11))
    log_a, t_a = decisions_until_first_finish(sc, cluster, base, name, params)
    log_b, t_b = decisions_until_first_finish(sc, cluster, other, name, params)
    h = min(t_a, t_b)
    assert [d for d in log_a if d[0] < h] != [d for d in log_b if d[0] < h]
    assert policy_kind(name, params) == "clairvoyant"


def test_every_registered_policy_has_a_kind() -> None:
    for name in policies():
        assert policy_kind(name) in ("deployable", "clairvoyant", "bound")
    assert policy_kind("ideal") == "bound"
    assert policy_kind("srw") == "clairvoyant"
    assert policy_kind("themis") == "clairvoyant"
    assert policy_kind("themis", {"lengths": "history"}) == "deployable"
    assert policy_kind("tiresias") == "deployable"
    assert policy_kind("tiresias", {"thresholds": "scaled"}) == "clairvoyant"
    assert policy_kind("dally") == "deployable"
    assert policy_kind("dally", {"remaining": "known"}) == "clairvoyant"


# ---------------------------------------------------------------- the view's rules


class _Probe(BaseScheduler):
    """Starts job 0 at once and runs ``probe(view)`` at every call."""

    name = "probe"

    def __init__(self, probe: Any, clairvoyant: bool = False) -> None:
        super().__init__()
        self.probe, self.clairvoyant, self.seen = probe, clairvoyant, []

    def schedule(self, view: Any) -> list:
        self.seen.append(self.probe(view))
        if 0 in view.waiting():
            return [Start(0, (0,))]
        return []


def _two_jobs() -> list[Job]:
    return [Job(0, "vgg11", 1, 100, 1.0, 0.0), Job(1, "vgg11", 1, 50, 1.0, 500.0)]


def test_a_job_that_has_not_arrived_is_an_oracle_error() -> None:
    with pytest.raises(OracleError, match="has not arrived yet"):
        run_engine(small_scenario(), _two_jobs(), _Probe(lambda v: v.jobs[1].model))


def test_a_running_jobs_length_is_an_oracle_error_and_a_finished_ones_is_history() -> None:
    with pytest.raises(OracleError, match="total iterations of job 0"):
        run_engine(small_scenario(), _two_jobs(), _Probe(lambda v: v.jobs[0].iterations))

    def finished_length(view: Any) -> float | None:
        return view.jobs[0].iterations if view.jobs[0].finished else None

    p = _Probe(finished_length)
    run_engine(small_scenario(), _two_jobs(), p)
    assert 100 in p.seen  # read once job 0 finished (t=100), at job 1's arrival


def test_the_oracle_opens_only_for_a_declared_clairvoyant_policy() -> None:
    with pytest.raises(OracleError, match="clairvoyant = True"):
        run_engine(small_scenario(), _two_jobs(), _Probe(lambda v: v.oracle.num_jobs))
    p = _Probe(lambda v: (v.oracle.num_jobs, v.jobs[1].arrival_s), clairvoyant=True)
    run_engine(small_scenario(), _two_jobs(), p)
    assert p.seen[0] == (2, 500.0)


def test_submitted_facts_are_filled_at_arrival() -> None:
    def facts(view: Any) -> tuple:
        return (view.demand.tolist(), np.isnan(view.arrival_s).tolist(),
                np.isnan(view.wait_since).tolist(), [j.job_id for j in view.jobs])  # fmt: skip

    p = _Probe(facts)
    run_engine(small_scenario(), _two_jobs(), p)
    assert p.seen[0] == ([1, 0], [False, True], [False, True], [0])
    assert p.seen[-1][0] == [1, 1] and p.seen[-1][3] == [0, 1]


def test_clairvoyant_declaration_must_be_a_bool() -> None:
    from dlcluster_gym.errors import ConfigError

    p = _Probe(lambda v: None)
    p.clairvoyant = "yes"
    with pytest.raises(ConfigError, match="`clairvoyant` must be True or False"):
        run_engine(small_scenario(), _two_jobs(), p)


def test_shipped_policies_read_no_oracle_unless_declared() -> None:
    """Every deployable default runs a whole small workload without an OracleError (the
    counterfactual test only covers the time before the first finish)."""
    ran = set()
    for cfg in SCENARIOS:
        sc, _, jobs = _workload(cfg)
        for name, spec in policies().items():
            if spec.bound or policy_kind(name) != "deployable" or name in ran:
                continue
            try:
                _, res = run_engine(sc, jobs[:20], make_policy(name))
            except NotApplicableError:
                continue
            ran.add(name)
            assert res.summary["jobs_completed"] > 0
    deployable = {
        n for n, s in policies().items() if not s.bound and policy_kind(n) == "deployable"
    }
    assert ran == deployable


# ---------------------------------------------------------------- estimators


def _history(lengths: list[float], models: list[str] | None = None) -> History:
    models = models or ["m"] * len(lengths)
    jobs = [
        Job(i, mo, 1, ln, 1.0, 0.0) for i, (ln, mo) in enumerate(zip(lengths, models, strict=True))
    ]
    return History(SimpleNamespace(finished_order=list(range(len(jobs))), jobs=jobs))


def test_estimators_hand_computed() -> None:
    compute, done = np.array([1.0, 1.0]), np.array([150.0, 50.0])
    # nothing finished: "attained" (done, at least floor_s of compute)
    empty = _history([])
    np.testing.assert_allclose(
        remaining_iterations(empty, compute, done, floor_s=600.0), [600.0, 600.0]
    )
    np.testing.assert_allclose(remaining_iterations(empty, compute, done), [150.0, 50.0])
    h = _history([100.0, 200.0, 400.0])
    # job 0 (150 done): finished longer are 200, 400 -> mean 300 -> 150 left
    # job 1 (50 done): all three, mean 700/3 -> 700/3 - 50 left
    np.testing.assert_allclose(remaining_iterations(h, compute, done), [150.0, 700 / 3 - 50])
    np.testing.assert_allclose(
        remaining_iterations(h, compute, done, method="attained"), [150.0, 50.0]
    )
    # beyond every finished length: the attained estimate
    np.testing.assert_allclose(remaining_iterations(h, compute, np.array([500.0, 400.0])),
                               [500.0, 400.0])  # fmt: skip
    # compute 2 s per iteration: work 100; finished longer than 100: 200, 400 (mean 300)
    np.testing.assert_allclose(
        remaining_iterations(h, np.array([2.0]), np.array([50.0])), [(300 - 100) / 2]
    )
    assert h.median_gpu_service_s() == 200.0
    assert _history([]).median_gpu_service_s() is None


def test_model_history_uses_the_jobs_own_model_first() -> None:
    h = _history([100.0, 1000.0, 3000.0], ["a", "b", "b"])
    compute, done = np.ones(3), np.array([50.0, 50.0, 200.0])
    got = remaining_iterations(h, compute, done, method="model-history", models=["a", "b", "a"])
    # a: only 100 -> 50 left; b: mean(1000, 3000) - 50; a with 200 done: no longer "a" job,
    # so the pooled history: mean(1000, 3000) - 200
    np.testing.assert_allclose(got, [50.0, 1950.0, 1800.0])


def test_tiresias_online_thresholds_follow_the_finished_jobs() -> None:
    from dlcluster_gym.baselines.tiresias import DEFAULT_THRESHOLDS, REFERENCE_MEDIAN_GPU_S

    sc = small_scenario(racks=1, machines=2, gpus=4)
    jobs = [Job(0, "vgg11", 2, 100, 1.0, 0.0), Job(1, "vgg11", 2, 300, 1.0, 0.0),
            Job(2, "vgg11", 1, 50_000, 1.0, 1000.0)]  # fmt: skip
    policy = make_policy("tiresias")
    assert not policy.clairvoyant
    run_engine(sc, jobs, policy)
    # after all finished: median ideal GPU-service over finished jobs (200, 600, 50,000)
    np.testing.assert_allclose(
        policy.thresholds, np.asarray(DEFAULT_THRESHOLDS) * 600.0 / REFERENCE_MEDIAN_GPU_S
    )


# ---------------------------------------------------------------- environments

ENV_DECISIONS = 300  # decision points compared per episode (the preset's whole workload)


def _env_records(
    monkeypatch: pytest.MonkeyPatch, env_id: str, transform: Any, seed: int = 5
) -> tuple[list[tuple], float, Any]:
    """(observation, mask) at every decision point before the first job finishes (at most
    ``ENV_DECISIONS``), the time of that finish (or of the last decision point), and the env.
    Actions: a seeded random valid action (the same sequence on the same observations)."""
    import gymnasium as gym

    import dlcluster_gym.envs.base as env_base

    real = env_base.prepare

    def prepared(*args: Any, **kwargs: Any) -> Any:
        cfg, cluster, jobs, rng = real(*args, **kwargs)
        return cfg, cluster, transform(jobs), rng

    monkeypatch.setattr(env_base, "prepare", prepared)
    env = gym.make(env_id)
    if getattr(env.unwrapped, "per_job", False):  # Scheduler-v3: ask about every waiting job,
        env = gym.make(env_id, auto_start=False)  # so that decisions come before a finish
    inner = env.unwrapped
    act_rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=seed)
    records: list[tuple] = []
    first_finish = float("inf")
    for _ in range(ENV_DECISIONS):
        engine = inner.engine
        if engine.n_done > 0:
            first_finish = float(engine.now)
            break
        mask = inner.action_masks() if hasattr(inner, "action_masks") else None
        records.append((_obs_bytes(obs), None if mask is None else np.asarray(mask).tobytes()))
        space = env.action_space
        if isinstance(space, gym.spaces.Discrete) and mask is not None:
            action = int(act_rng.choice(np.flatnonzero(np.asarray(mask))))
        elif isinstance(space, gym.spaces.MultiDiscrete) and mask is not None:
            m, cuts = np.asarray(mask), np.cumsum(space.nvec)[:-1]  # one mask per head
            action = np.array([act_rng.choice(np.flatnonzero(h)) for h in np.split(m, cuts)])
        elif isinstance(space, gym.spaces.Box):
            action = act_rng.uniform(space.low, space.high).astype(space.dtype)
        else:
            raise AssertionError(f"{env_id}: no seeded sampler for {space}")
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break
    if not math.isfinite(first_finish):  # stopped first: the late jobs come after that
        first_finish = float(inner.engine.now)
    monkeypatch.setattr(env_base, "prepare", real)
    return records, first_finish, env


def _obs_bytes(obs: Any) -> Any:
    if isinstance(obs, dict):
        return tuple((k, np.asarray(v).tobytes()) for k, v in sorted(obs.items()))
    return np.asarray(obs).tobytes()


def _env_ids() -> list[str]:
    from dlcluster_gym.envs import env_ids

    return env_ids()


@pytest.mark.parametrize("env_id", _env_ids())
def test_env_observations_hold_no_ground_truth(
    monkeypatch: pytest.MonkeyPatch, env_id: str
) -> None:
    """Every env id whose default observation is declared free of ground truth observes the
    same on workloads that differ only in true lengths, or by jobs arriving later."""
    import warnings

    rng = np.random.default_rng(11)
    factors = rng.uniform(*DEFAULT_STRETCH, 4096)
    other = rng.uniform(0.5, 2.0, 4096)

    def base(jobs: list[Job]) -> list[Job]:
        return _stretch(jobs, factors[: len(jobs)])

    def changed(jobs: list[Job]) -> list[Job]:
        return _stretch(base(jobs), other[: len(jobs)])

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        rec_a, t_a, env = _env_records(monkeypatch, env_id, base)
        if env.unwrapped.clairvoyant:
            pytest.skip(f"{env_id} declares that it observes ground truth")
        rec_b, _, _ = _env_records(monkeypatch, env_id, changed)
        n = min(len(rec_a), len(rec_b))
        # DelayTimer decides at most hourly, at instants: on batch arrivals the first one (t=0)
        # may be the only one before the first finish; its Poisson ids compare dozens.
        need = 1 if "DelayTimer" in env_id else 3
        assert n >= need, f"{env_id}: {n} decision points before the first finish (vacuous)"
        assert rec_a[:n] == rec_b[:n], f"{env_id}: observations depend on true job lengths"
        late_rng = np.random.default_rng(3)
        rec_c, _, _ = _env_records(
            monkeypatch, env_id, lambda jobs: _late_jobs(base(jobs), t_a, late_rng)
        )
        m = min(len(rec_a), len(rec_c))
        assert rec_a[:m] == rec_c[:m], f"{env_id}: observations depend on future arrivals"


def test_env_check_catches_an_env_that_observes_true_lengths(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Control: Placement-v2 observes true remaining work; the same two workloads tell it
    apart (so the check above can fail), and it declares itself clairvoyant."""
    import warnings

    rng = np.random.default_rng(11)
    factors, other = rng.uniform(*DEFAULT_STRETCH, 4096), rng.uniform(0.5, 2.0, 4096)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        rec_a, _, env = _env_records(
            monkeypatch, "DLCluster/Placement-v2", lambda j: _stretch(j, factors[: len(j)])
        )
        rec_b, _, _ = _env_records(
            monkeypatch,
            "DLCluster/Placement-v2",
            lambda j: _stretch(_stretch(j, factors[: len(j)]), other[: len(j)]),
        )
    assert env.unwrapped.clairvoyant
    n = min(len(rec_a), len(rec_b))
    assert n >= 3 and rec_a[:n] != rec_b[:n]


def test_the_docs_table_of_kinds_is_the_codes() -> None:
    """docs/schedulers.md "What each policy may know": every registered policy has a row and
    its kind there is ``policy_kind`` with default parameters."""
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[1] / "docs" / "schedulers.md").read_text()
    section = doc.split("## What each policy may know", 1)[1].split("\n## ", 1)[0]
    documented: dict[str, str] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].startswith("`"):
            continue
        kind = re.sub(r"[*]|\(.*\)", "", cells[1]).strip()
        for name in re.findall(r"`([^`]+)`", cells[0]):
            documented[name] = kind
    for name in policies():
        assert name in documented, f"docs/schedulers.md has no row for {name}"
        assert documented[name] == policy_kind(name), f"{name}: docs say {documented[name]}"
