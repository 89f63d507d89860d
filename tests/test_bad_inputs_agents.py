"""Bad agent checkpoints, env arguments and env actions.

Checkpoints go through the command line (``--policy agent:PATH``, ``evaluate --agent``): a
damaged zip, metadata that is not JSON or lacks what every use reads, a model that does not
load. Each is an exit-2, one-line error naming the file (``bad_inputs_harness.check_case``).
The Gymnasium envs are an API: a bad keyword argument, ``reset()`` argument or action is a
typed exception (``ConfigError``/``InvalidActionError``, both ``ValueError``s) whose one-line
message names the env, the argument and the value (``API_CASES``).
"""

from __future__ import annotations

import json
import math
import warnings
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bad_inputs_harness import (
    CHECKPOINTS,
    HAS_AGENTS,
    OK_SCENARIO,
    SIM,
    Case,
    check_case,
    damaged_checkpoint,
    params,
)

from dlcluster_gym.errors import ConfigError, InvalidActionError, UnknownNameError

AGENT = [*SIM, "{d}/s.yaml", "--policy", "agent:{d}/a.zip"]
EVAL = ["evaluate", "--agent", "{d}/a.zip"]
META = "dlcluster_agent.json"


def meta_edit(edit: Any, source: str = "placement.zip") -> Any:
    """A copy of a shipped checkpoint whose metadata ``edit`` changed in place."""

    def make(d: Path) -> bytes:
        with zipfile.ZipFile(CHECKPOINTS / source) as z:
            meta = json.loads(z.read(META))
        edit(meta)
        return damaged_checkpoint(member=META, data=json.dumps(meta).encode(), source=source)(d)

    return make


def pop(key: str) -> Any:
    return lambda m: m.pop(key)


def put(key: str, value: Any) -> Any:
    return lambda m: m.__setitem__(key, value)


def files(zip_maker: Any) -> dict[str, Any]:
    return {"s.yaml": OK_SCENARIO, "a.zip": zip_maker}


WHERE = f"a.zip': {META}"
CASES: dict[str, Case] = {
    "no-metadata": (
        AGENT,
        files(damaged_checkpoint(drop=META)),
        f"a.zip' has no {META}: not a DLCluster agent",
    ),
    "empty-file": (AGENT, files(b""), "a.zip' is not a readable zip file"),
    "a-folder": (
        [*SIM, "{d}/s.yaml", "--policy", "agent:{d}/a.zip"],
        {"s.yaml": OK_SCENARIO, "a.zip/x": "a"},
        "a.zip' is a folder; give the .zip file",
    ),
    "metadata-format": (
        AGENT,
        files(meta_edit(put("format", 2))),
        "a.zip': metadata format 2, expected 1",
    ),
    "metadata-env-kind": (
        AGENT,
        files(meta_edit(put("env_kind", "Robot"))),
        f"a.zip': env_kind 'Robot' in {META} is not one of Placement, DelayTimer, Scheduler",
    ),
    "metadata-observation-size-text": (
        AGENT,
        files(meta_edit(put("observation_size", "63"))),
        f"{WHERE}: observation_size must be an integer >= 1, got '63'",
    ),
    "metadata-observation-size-zero": (
        AGENT,
        files(meta_edit(put("observation_size", 0))),
        f"{WHERE}: observation_size must be an integer >= 1, got 0",
    ),
    "metadata-no-algorithm": (
        AGENT,
        files(meta_edit(pop("algorithm"))),
        f"{WHERE}: algorithm must be an algorithm name",
    ),
    "metadata-no-agent": (
        AGENT,
        files(meta_edit(pop("agent"))),
        f"{WHERE}: agent must name the agent kind (placement, delay-timer or scheduler), got None",
    ),
    "metadata-env-kwargs-a-list": (
        AGENT,
        files(meta_edit(put("env_kwargs", ["done_jobs_of"]))),
        f"{WHERE}: env_kwargs must be a JSON object",
    ),
    "metadata-config-a-list": (
        AGENT,
        files(meta_edit(put("config", [1]))),
        f"{WHERE}: config must be a JSON object, got [1]",
    ),
    "metadata-observation-kwargs-missing": (
        AGENT,
        files(meta_edit(lambda m: m["env_kwargs"].pop("done_jobs_of"))),
        f"a.zip' does not record done_jobs_of in the env_kwargs of its {META}",
    ),
    "metadata-env-id-other-kind": (
        AGENT,
        files(meta_edit(put("env_id", "DLCluster/Scheduler-v0"))),
        "env_id 'DLCluster/Scheduler-v0' in dlcluster_agent.json is not a "
        "DLCluster/Placement-v<N> id",
    ),
    "metadata-env-id-future-version": (
        AGENT,
        files(meta_edit(put("env_id", "DLCluster/Placement-v99"))),
        "was recorded for DLCluster/Placement-v99, a version this dlcluster-gym does not define",
    ),
    "metadata-unknown-algorithm": (
        AGENT,
        files(meta_edit(put("algorithm", "genetic"))),
        "unknown algorithm 'genetic'; algorithms: maskable_ppo, ppo",
    ),
    "metadata-latin1": (
        AGENT,
        files(
            damaged_checkpoint(
                member=META, data='{"format": 1, "agent": "caf\xe9"}'.encode("latin-1")
            )
        ),
        f"{WHERE} is not valid JSON ('utf-8' codec can't decode",
    ),
    "agent-unknown-parameter": (
        [*AGENT, "--policy-arg", "x=1"],
        files(damaged_checkpoint()),
        "agent 'agent:{d}/a.zip' has no parameter 'x'; parameters: base_policy, base_params",
    ),
    "agent-missing-file": (
        [*SIM, "{d}/s.yaml", "--policy", "agent:{d}/none.zip"],
        {"s.yaml": OK_SCENARIO},
        "agent checkpoint '{d}/none.zip' not found",
    ),
    "evaluate-metadata-not-json": (
        EVAL,
        files(damaged_checkpoint(member=META, data=b"{bad")),
        f"--agent {{d}}/a.zip: agent checkpoint '{{d}}/a.zip': {META} is not valid JSON",
    ),
    "evaluate-damaged-member": (
        EVAL,
        files(lambda d: _flip(damaged_checkpoint()(d))),
        "--agent {d}/a.zip: agent checkpoint '{d}/a.zip' is damaged: member",
    ),
    "evaluate-no-env-kind": (
        EVAL,
        files(meta_edit(pop("env_kind"))),
        "--agent {d}/a.zip: agent checkpoint '{d}/a.zip': env_kind None",
    ),
}

NEEDS_AGENTS: dict[str, Case] = {
    "model-data-not-json": (
        AGENT,
        files(damaged_checkpoint(member="data", data=b"{bad")),
        "a.zip': its maskable_ppo model does not load (JSONDecodeError",
    ),
    "model-optimizer-missing": (
        AGENT,
        files(damaged_checkpoint(drop="policy.optimizer.pth")),
        "a.zip': its maskable_ppo model does not load",
    ),
    "model-of-another-algorithm": (
        AGENT,
        files(meta_edit(put("algorithm", "ppo"))),
        "a.zip': its ppo model does not load",
    ),
}


def _flip(data: bytes) -> bytes:
    b = bytearray(data)
    b[len(b) // 3] ^= 0xFF
    return bytes(b)


SMALL = {
    "cluster": {"racks": 1, "machines_per_rack": 2, "gpus_per_machine": 4},
    "workload": {"kind": "synthetic", "num_jobs": 4},
}
PL, DT, SC, SC2 = (
    "DLCluster/Placement-v3",
    "DLCluster/DelayTimer-v1",
    "DLCluster/Scheduler-v3",
    "DLCluster/Scheduler-v2",
)
COMMON: dict[str, list[tuple[Any, type, str]]] = {
    "scenario": [
        ("nosuch", UnknownNameError, "unknown scenario 'nosuch'"),
        (
            {"cluster": 5},
            ConfigError,
            ": scenario: cluster: Input should be a valid dictionary or instance of ClusterConfig "
            "(got 5); workload: Field required",
        ),
    ],
    "scenario_overrides": [
        (
            [1],
            ConfigError,
            "scenario_overrides must be a mapping (nested keys of the scenario), got [1]",
        ),
        (
            {"seed": -1},
            ConfigError,
            "scenario_overrides: seed: Input should be greater than or equal to 0",
        ),
        ({"nosuch": 1}, ConfigError, "scenario_overrides: nosuch: Extra inputs are not permitted"),
    ],
    "reward_weights": [
        ([1], ConfigError, "reward_weights must be a mapping of component to weight"),
        ({"jct": math.nan}, ConfigError, "reward weight jct=nan must be finite"),
        ({"happiness": 1}, ConfigError, "unknown reward component 'happiness'; components: jct"),
    ],
    "reward_scale_s": [
        (0, ConfigError, "reward_scale_s must be a finite number > 0 (seconds), got 0"),
        (True, ConfigError, "reward_scale_s must be a finite number > 0 (seconds), got True"),
    ],
    "render_mode": [("vr", ConfigError, "render_mode 'vr' is not one of")],
    "done_jobs_of": [
        ("all", ConfigError, "done_jobs_of must be one of arrived, workload, got 'all'")
    ],
    "episode_seeds": [
        (
            [5, 1],
            ConfigError,
            "episode_seeds must be [lo, hi) with integers 0 <= lo < hi, got [5, 1]",
        ),
        (
            [0, 2**64],
            ConfigError,
            "episode_seeds must be [lo, hi) with integers 0 <= lo < hi, got [0, "
            "18446744073709551616]",
        ),
    ],
    "traces_dir": [(5, ConfigError, "traces_dir must be a folder path (str or Path), got 5")],
    "nosuch_kwarg": [
        (1, ConfigError, "unknown argument(s) 'nosuch_kwarg'; valid arguments: scenario")
    ],
}
PER_ENV: dict[str, dict[str, list[tuple[Any, type, str]]]] = {
    PL: {
        "base_policy": [
            ("nosuch", UnknownNameError, "unknown policy 'nosuch'"),
            (
                "fcfs+cassini",
                ConfigError,
                "base policy 'fcfs+cassini' has no offers(view) generator",
            ),
        ],
        "base_params": [
            ([1], ConfigError, "base_params must be a mapping of names to values, got [1]"),
            ({"x": 1}, ConfigError, "policy 'dally' has no parameter 'x'"),
        ],
        "invalid_action": [
            ("crash", ConfigError, "invalid_action must be 'wait' or 'raise', got 'crash'")
        ],
        "invalid_penalty": [
            (
                -1,
                ConfigError,
                "invalid_penalty must be a finite number >= 0 (the reward is minus it), got -1",
            )
        ],
        "wait_retry_s": [
            (math.inf, ConfigError, "wait_retry_s must be a finite number > 0, got inf")
        ],
        "wait_limit": [
            ("never", ConfigError, "wait_limit must be one of rack_timer, none, got 'never'")
        ],
        "known_durations": [
            ("yes", ConfigError, "known_durations must be True or False, got 'yes'")
        ],
    },
    DT: {
        "decision_period_s": [
            (math.nan, ConfigError, "decision_period_s must be a finite number > 0, got nan")
        ],
        "max_timer_s": [(0, ConfigError, "max_timer_s must be a finite number > 0, got 0")],
        "dally_params": [
            ([1], ConfigError, "dally_params must be a mapping of names to values, got [1]"),
            ({"x": 1}, ConfigError, "policy 'dally' has no parameter 'x'"),
        ],
        "wait_retry_s": [(-1, ConfigError, "wait_retry_s must be a finite number > 0, got -1")],
    },
    SC: {
        "max_waiting": [
            (0, ConfigError, "max_waiting must be an integer in 1..4096, got 0"),
            (2.5, ConfigError, "max_waiting must be an integer in 1..4096, got 2.5"),
            (10**9, ConfigError, "max_waiting must be an integer in 1..4096, got 1000000000"),
        ],
        "max_running": [("x", ConfigError, "max_running must be an integer in 1..4096, got 'x'")],
        "preemption": [("yes", ConfigError, "preemption must be True or False, got 'yes'")],
        "requeue": [(1, ConfigError, "requeue must be True or False, got 1")],
        "move_as": [
            ("teleport", ConfigError, "move_as must be one of migrate, restart; got 'teleport'")
        ],
        "order": [
            (
                "random",
                ConfigError,
                "order must be one of las, arrival, nw_sens, demand, srw; got 'random'",
            )
        ],
        "running_order": [
            ("x", ConfigError, "running_order must be one of attained, recent, wide; got 'x'")
        ],
        "observation": [
            ("image", ConfigError, "observation must be one of flat, dict, graph; got 'image'")
        ],
        "invalid_action": [
            ("x", ConfigError, "invalid_action must be one of stop, raise; got 'x'")
        ],
        "invalid_penalty": [
            (math.inf, ConfigError, "invalid_penalty must be a finite number >= 0, got inf")
        ],
        "unfinished_penalty_s": [
            (-1, ConfigError, "unfinished_penalty_s applies only with unfinished_penalty='fixed'")
        ],
        "max_machines": [(0, ConfigError, "max_machines must be an integer in 1..4096, got 0")],
        "max_racks": [(-1, ConfigError, "max_racks must be an integer in 1..4096, got -1")],
        "skip_trivial": [("no", ConfigError, "skip_trivial must be True or False, got 'no'")],
        "unfinished_penalty": [
            ("x", ConfigError, "unfinished_penalty must be one of serial, fixed; got 'x'")
        ],
        "stall_end": [
            ("x", ConfigError, "stall_end must be one of terminated, truncated; got 'x'")
        ],
        "actions": [("x", ConfigError, "actions must be one of slots, per-job; got 'x'")],
        "max_steps": [(0, ConfigError, "max_steps must be an integer >= 1 or None, got 0")],
        "max_preemptions_per_h": [
            (
                math.nan,
                ConfigError,
                "max_preemptions_per_h must be an integer >= 1 or None, got nan",
            )
        ],
        "auto_start": [("x", ConfigError, "auto_start must be True or False, got 'x'")],
    },
}

# (env id, action, expected error): each a step from the first decision of a fresh episode
ACTIONS: list[tuple[str, Any, str]] = [
    (PL, -1, "action -1 is out of range; actions are 0..6 (wait, machine, rack, network"),
    (PL, 7, "action 7 is out of range; actions are 0..6"),
    (PL, 2.5, "action 2.5 is not an integer in 0..6"),
    (PL, "wait", "action 'wait' is not an integer in 0..6 (wait, machine"),
    (PL, None, "action None is not an integer in 0..6"),
    (PL, np.array([1, 2]), "expected one action in 0..6, got array([1, 2])"),
    (PL, True, "action True is not an integer in 0..6"),
    (DT, np.array([2.0]), "action must have 14 values (machine timers then extra rack timers"),
    (DT, "x", "action must be 14 numbers in [-1, 1], got 'x'"),
    (
        DT,
        np.zeros(99),
        "action must have 14 values (machine timers then extra rack timers for classes 1, 2, 4, "
        "8, 16, 32, >=64), got 99",
    ),
    (
        SC,
        [0],
        "expected an action (act, candidate) with act in 0..1 and candidate in 0..5, got [0]",
    ),
    (SC2, -1, "action -1 is out of range; actions are 0..96"),
    (SC2, 10**6, "action 1000000 is out of range; actions are 0..96"),
    (SC2, "x", "action 'x' is not an integer in 0..96"),
    (SC2, 2.5, "action 2.5 is not an integer in 0..96"),
]

# (env id, reset keyword arguments, expected error)
RESETS: list[tuple[str, dict[str, Any], str]] = [
    (
        PL,
        {"seed": 2**70},
        "reset(seed=1180591620717411303424) is out of range; seed must be an integer in [0, "
        "9223372036854775807]",
    ),
    (DT, {"seed": -1}, "reset(seed=-1) is out of range"),
    (
        SC,
        {"seed": 1.5},
        "reset(seed=...) must be an integer in [0, 9223372036854775807] or None, got 1.5 (float)",
    ),
    (SC2, {"seed": True}, "got True (bool)"),
    (PL, {"options": {"scenario": "x"}}, "reset() takes no options, got 'scenario'"),
    (DT, {"options": [1]}, "reset options must be a mapping or None, got [1]"),
]


def _api_cases() -> dict[str, tuple[str, str, Any, type, str]]:
    """name -> (env id, what: "make" / "step" / "reset", argument, exception, text)."""
    out: dict[str, tuple[str, str, Any, type, str]] = {}
    for env_id in PER_ENV:
        table = {**COMMON, **PER_ENV[env_id]}
        for key, bad in table.items():
            for i, (value, exc, why) in enumerate(bad):
                out[f"{env_id.split('/')[1]}.{key}.{i}"] = (env_id, "make", {key: value}, exc, why)
    for i, (env_id, action, why) in enumerate(ACTIONS):
        out[f"{env_id.split('/')[1]}.step.{i}"] = (env_id, "step", action, InvalidActionError, why)
    for i, (env_id, kw, why) in enumerate(RESETS):
        out[f"{env_id.split('/')[1]}.reset.{i}"] = (env_id, "reset", kw, ConfigError, why)
    return out


API_CASES = _api_cases()


def test_the_tables_have_distinct_cases():
    assert len(CASES) + len(NEEDS_AGENTS) >= 20 and len(API_CASES) >= 100
    assert len({c for _, _, c in CASES.values()}) == len(CASES)


@pytest.mark.parametrize(
    ("args", "files", "culprit"),
    params(CASES) + params(NEEDS_AGENTS, [pytest.mark.skipif(not HAS_AGENTS, reason="agents")]),
)
def test_bad_checkpoint_is_one_line_and_exit_2(tmp_path, monkeypatch, args, files, culprit):
    check_case(tmp_path, monkeypatch, args, files, culprit)


@pytest.mark.parametrize(
    ("env_id", "what", "arg", "exc", "text"), API_CASES.values(), ids=API_CASES
)
def test_bad_env_argument_or_action_is_a_typed_one_line_error(env_id, what, arg, exc, text):
    import gymnasium as gym

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # older versions warn when made
        if what == "make":
            kwargs = {"scenario": SMALL} if "scenario" not in arg else {}
            with pytest.raises(exc) as err:
                gym.make(env_id, **kwargs, **arg)
        else:
            scenario = SMALL if env_id != SC else "dally-batch-2rack"
            env = gym.make(env_id, scenario=scenario)
            if what == "reset":
                with pytest.raises(exc) as err:
                    env.reset(**arg)
            else:
                env.reset(seed=1)
                with pytest.raises(exc) as err:
                    env.step(arg)
    message = str(err.value)
    assert isinstance(err.value, ValueError | KeyError)
    assert "\n" not in message and text in message, message
