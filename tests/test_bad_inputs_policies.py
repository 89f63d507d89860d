"""Bad policy parameters on the command line (``--policy-arg``): for every parameter every
registered policy declares, a value of the wrong type, and for each parameter with a range, a
value outside it. Each is an exit-2, one-line error naming the policy, the parameter and the
value, found before the simulation starts (``bad_inputs_harness.check_case``)."""

from __future__ import annotations

import pytest
from bad_inputs_harness import OK_SCENARIO, REPO, SIM, Case, check_case, params

from dlcluster_gym.scheduler import policies, policy_parameters, resolve_policy

F = {"s.yaml": OK_SCENARIO}


def arg(policy: str, *pairs: str) -> list[str]:
    out = [*SIM, "{d}/s.yaml", "--policy", policy]
    for pair in pairs:
        out += ["--policy-arg", pair]
    return out


# A value of the wrong type for each declared type, and what the error says about it.
WRONG_TYPE: dict[str, tuple[str, str]] = {
    "bool": ("yes", "Input should be a valid boolean: true or false (got 'yes')"),
    "int": ("2.5", "Input should be a valid integer"),
    "float": ("soon", "Input should be a valid number, unable to parse string as a number"),
    "dict": ("[1]", "Input should be a valid dictionary (got [1])"),
    "str": ("[1]", "Input should be a valid string"),
    "str|bool": ("[1]", "Input should be a valid string, or Input should be a valid boolean"),
}


def _kind(annotation: object) -> str | None:
    text = str(annotation)
    if "str" in text and "bool" in text:
        return "str|bool"
    for kind in ("dict", "Sequence", "bool", "int", "float", "str"):
        if kind in text:
            return None if kind == "Sequence" else kind
    return None


def _wrong_types() -> dict[str, Case]:
    """One case per declared parameter of every registered policy (from its constructor)."""
    out: dict[str, Case] = {}
    for name in policies():
        model = policy_parameters(resolve_policy(name)[0])
        for param, field in (model.model_fields if model is not None else {}).items():
            kind = _kind(field.annotation)
            if kind is None:
                continue
            value, why = WRONG_TYPE[kind]
            out[f"{name}.{param}:{kind}"] = (
                arg(name, f"{param}={value}"),
                F,
                f"policy {name!r}: parameter {param!r}: {why}",
            )
    return out


def _no_parameters() -> dict[str, Case]:
    """Policies that take no parameter refuse any."""
    out: dict[str, Case] = {}
    for name in policies():
        model = policy_parameters(resolve_policy(name)[0])
        if model is not None and not model.model_fields:
            out[f"{name}.takes-none"] = (
                arg(name, "x=1"),
                F,
                f"policy {name!r} has no parameter 'x'; parameters: (none)",
            )
    return out


SECONDS_GE0 = "must be a finite number of seconds >= 0, got"
GT0 = "must be finite and > 0, got"
UNIT = "must be in (0, 1], got"
# policy: {parameter: [(value, what the error says)]}: values outside each parameter's range
RANGES: dict[str, dict[str, list[tuple[str, str]]]] = {
    "cassini": {
        "max_candidates": [("0", "max_candidates must be an integer >= 1, got 0")],
        "candidates": [("nosuch", "candidates must be one of auction, new-only, got 'nosuch'")],
        "base": [
            ("nosuch", "parameter 'base': unknown policy 'nosuch'"),
            ("fcfs+cassini", "base 'fcfs+cassini' is itself a Cassini policy"),
        ],
    },
    "dally+cassini": {
        "base": [("dally+cassini", "base 'dally+cassini' is itself a Cassini policy")]
    },
    "crius": {
        "search_depth": [("-1", "search_depth must be an integer >= 0, got -1")],
        "min_gain": [
            ("-1", "min_gain must be a finite number >= 0, got -1.0"),
            (".nan", "min_gain must be a finite number >= 0, got nan"),
        ],
        "starvation_s": [("-1", "starvation_s must be a number >= 0, got -1.0")],
        "act_on": [("nosuch", "act_on must be 'events' or 'rounds', got 'nosuch'")],
        "estimate_noise": [
            ("1.5", "estimate_noise must be a relative std between 0 and 1, got 1.5")
        ],
        "noise_seed": [("-1", "noise_seed must be an integer >= 0, got -1")],
    },
    "dally": {
        "history_limit_s": [("-1", f"history_limit_s {SECONDS_GE0} -1.0")],
        "history_mode": [("nosuch", "history_mode must be 'window' or 'value', got 'nosuch'")],
        "default_machine_timer_s": [(".nan", f"default_machine_timer_s {SECONDS_GE0} nan")],
        "default_rack_timer_s": [("-1", f"default_rack_timer_s {SECONDS_GE0} -1.0")],
        "remaining": [
            (
                "nosuch",
                "remaining must be one of attained, history, model-history, keyed, known, "
                "got 'nosuch'",
            )
        ],
        "preemption": [
            (
                "1",
                "parameter 'preemption': Input should be a valid string, or Input should be a "
                "valid boolean: true or false (got 1)",
            )
        ],
    },
    "dally-manual": {
        "machine_timer_s": [("-1", f"machine_timer_s {SECONDS_GE0} -1.0")],
        "rack_timer_s": [(".nan", f"rack_timer_s {SECONDS_GE0} nan")],
    },
    "gandiva": {
        "remaining": [
            (
                "known-ish",
                "remaining must be one of attained, history, model-history, keyed, known, "
                "got 'known-ish'",
            )
        ],
        "timeslice": [
            (
                "discrete",
                "parameter 'timeslice': Input should be 'auto', 'rates' or 'quanta' (got "
                "'discrete')",
            )
        ],
    },
    "fa-bf": {"node_vcpus": [("0", f"node_vcpus {GT0} 0.0")]},
    "las-slots": {
        "margin": [("-1", "index-slots: margin must be a number >= 0, got -1.0")],
        "promote_knob": [(".nan", "index-slots: promote_knob must be a number >= 0, got nan")],
        "max_wait_h": [("-1", "index-slots: max_wait_h must be a number >= 0, got -1.0")],
        "wait_ratio": [("-1", "index-slots: wait_ratio must be a number >= 0, got -1.0")],
        "max_preemptions": [
            ("0", "index-slots: max_preemptions must be an integer >= 1 or None, got 0")
        ],
        "wait_from": [
            ("nosuch", "index-slots: wait_from must be 'arrival' or 'first_start', got 'nosuch'")
        ],
    },
    "nearchus": {
        "r0_vcpus": [("0", f"r0_vcpus {GT0} 0.0")],
        "r_up": [("-1", f"r_up {GT0} -1.0")],
        "e_thd_job": [("1.5", f"e_thd_job {UNIT} 1.5")],
        "e_thd_opt": [("0", f"e_thd_opt {UNIT} 0.0")],
        "cv_max": [(".nan", f"cv_max {UNIT} nan")],
        "n_comp": [("0", "n_comp must be an integer >= 1, got 0")],
        "n_net": [("-1", "n_net must be an integer >= 1, got -1")],
        "psn_frac": [("2", f"psn_frac {UNIT} 2.0")],
        "psn_util": [("0", f"psn_util {UNIT} 0.0")],
        "sample_interval_s": [("0", f"sample_interval_s {GT0} 0.0")],
        "keep_eff": [("-1", f"keep_eff {UNIT} -1.0")],
        "min_node_vcpus": [(".nan", f"min_node_vcpus {GT0} nan")],
        "min_gain": [("-1", "min_gain must be finite and >= 0, got -1.0")],
        "patience": [("0", "patience must be an integer >= 1, got 0")],
    },
    "nearchus-gpu": {
        "r0_frac": [("0", f"r0_frac {UNIT} 0.0")],
        "r_up": [(".nan", f"r_up {GT0} nan")],
        "e_thd_job": [("-1", f"e_thd_job {UNIT} -1.0")],
        "check_interval_s": [("0", f"check_interval_s {GT0} 0.0")],
    },
    "optimus": {
        "node_vcpus": [("-1", f"node_vcpus {GT0} -1.0")],
        "interval_s": [("0", f"interval_s {GT0} 0.0")],
        "profile_noise": [("-1", "profile_noise must be finite and >= 0, got -1.0")],
        "profile": [("nosuch", "profile must be one of range, smallest, got 'nosuch'")],
    },
    "themis": {
        "lease_s": [("0", "lease_s must be a finite number of seconds > 0, got 0.0")],
        "auction": [("nosuch", "auction must be one of reauction, renew, got 'nosuch'")],
        "placement": [("nosuch", "placement must be one of penalty, consolidated, got 'nosuch'")],
        "cross_rack_slowdown": [
            ("0.5", "cross_rack_slowdown must be a finite number >= 1, got 0.5")
        ],
        "lengths": [("nosuch", "lengths must be one of known, attained, history, got 'nosuch'")],
    },
    "tiresias": {
        "thresholds": [
            (
                "nosuch",
                "thresholds must be one of history, online, fixed, scaled, quantiles or a list of "
                "GPU-second values, got 'nosuch'",
            ),
            ("[5, 1]", "thresholds must be positive and increasing"),
            (
                "[1, x]",
                "parameter 'thresholds': Input should be a valid string, or Input should be a "
                "valid number, unable to parse string as a number (item 1)",
            ),
        ],
        "num_queues": [
            ("1", "num_queues must be an integer >= 2, got 1"),
            (
                "100000000000",
                "num_queues must be at most 100 (priority queues of attained service), got "
                "100000000000",
            ),
        ],
        "promote_knob": [("-1", "promote_knob must be a finite number >= 0, got -1.0")],
    },
}


def _ranges() -> dict[str, Case]:
    out: dict[str, Case] = {}
    for name, table in RANGES.items():
        for param, bad in table.items():
            for value, why in bad:
                out[f"{name}.{param}={value}"] = (
                    arg(name, f"{param}={value}"),
                    F,
                    f"policy {name!r}: {why}",
                )
    return out


CASES: dict[str, Case] = {
    **_wrong_types(),
    **_no_parameters(),
    **_ranges(),
    # --- how --policy-arg itself is written
    "arg-twice": (
        arg("themis", "lease_s=60", "lease_s=120"),
        F,
        "--policy-arg 'lease_s=120': parameter 'lease_s' is given twice",
    ),
    "arg-no-key": (arg("themis", "=60"), F, "--policy-arg '=60': expected key=value"),
    "arg-bool-on": (
        arg("gandiva", "migration=on"),
        F,
        "policy 'gandiva': parameter 'migration': Input should be a valid boolean: true or false "
        "(got 'on')",
    ),
    "arg-bool-number": (
        arg("tiresias", "preemption=1"),
        F,
        "parameter 'preemption': Input should be a valid boolean: true or false (got 1)",
    ),
    "arg-unknown-for-cassini": (
        arg("cassini", "lease_s=60"),
        F,
        "policy 'cassini' has no parameter 'lease_s'; parameters: base (str | None, default None)",
    ),
    "arg-base-params-for-base": (
        arg("cassini", "base=themis", "base_params={lease_s: -1}"),
        F,
        "policy 'themis': lease_s must be a finite number of seconds > 0, got -1.0",
    ),
    "arg-base-params-unknown": (
        arg("cassini", "base_params={nosuch: 1}"),
        F,
        "policy 'themis' has no parameter 'nosuch'",
    ),
    "user-policy-bad-arg": (
        arg("tests.fixtures.my_policy:SmallestFirst", "max_starts=x"),
        F,
        "policy 'tests.fixtures.my_policy:SmallestFirst': parameter 'max_starts': Input should be "
        "a valid integer",
    ),
    "user-policy-unknown-arg": (
        arg("tests.fixtures.my_policy:SmallestFirst", "max=1"),
        F,
        "has no parameter 'max'; parameters: max_starts (int, default 1000000)",
    ),
}


def test_every_policy_parameter_has_a_case():
    """A parameter added to a policy's constructor gets a wrong-type case by itself (the
    table is built from the declarations); this checks that the build saw all of them."""
    declared = set()
    for name in policies():
        model = policy_parameters(resolve_policy(name)[0])
        declared |= {f"{name}.{p}" for p in (model.model_fields if model is not None else {})}
    covered = {key.split(":")[0].split("=")[0] for key in CASES}
    assert declared <= covered, declared - covered
    assert len(CASES) >= 120


@pytest.mark.parametrize(("args", "files", "culprit"), params(CASES))
def test_bad_policy_parameter_is_one_line_and_exit_2(tmp_path, monkeypatch, args, files, culprit):
    monkeypatch.syspath_prepend(str(REPO))  # tests.fixtures.my_policy
    check_case(tmp_path, monkeypatch, args, files, culprit)
