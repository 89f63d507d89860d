"""``dlcluster evaluate``: agent checkpoints next to heuristics on held-out scenarios and
seeds (torch and stable-baselines3 are imported only when it runs)."""

from __future__ import annotations

import functools
import json
import math
import os
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import click

from dlcluster_gym.cli.common import (
    MAX_EVAL_SEEDS,
    _fail,
    _import_agents,
    _seed_list,
    check_writable,
    prepare_out_file,
    traces_dir_option,
)
from dlcluster_gym.errors import DLClusterError


def _agent_options(values: tuple[str, ...]) -> list[tuple[str | None, Path, str]]:
    """``--agent`` values as (label or None, path, the value as given): ``LABEL=PATH`` names
    the agent, unless a file is called exactly as the value."""
    out = []
    for value in values:
        label, sep, path = value.partition("=")
        if sep and label.strip() and path and not Path(value).exists():
            out.append((label.strip(), Path(path), value))
        else:
            out.append((None, Path(value), value))
    return out


def _agent_labels(agents: list[tuple[str | None, Path, str]], metas: list[dict]) -> list[str]:
    """One label per agent: its own (``LABEL=PATH``); else ``<agent>-agent`` for a lone
    agent; else the file stem, with its folder where stems repeat."""
    given = [a[0] for a in agents]
    if len(agents) == 1 and given[0] is None:
        return [f"{metas[0]['agent']}-agent"]
    stems = [p.stem for _, p, _ in agents]
    labels = []
    for (label, path, _), stem in zip(agents, stems, strict=True):
        if label is None:
            label = stem if stems.count(stem) == 1 else f"{path.parent.name}/{stem}"
        labels.append(label)
    for (_, _, value), label in zip(agents, labels, strict=True):
        if labels.count(label) > 1:
            _fail(f"--agent {value}: label {label!r} is taken by another agent; "
                  "name each one with --agent LABEL=PATH")  # fmt: skip
    return labels


@click.command()
@click.option(
    "--agent",
    "agents",
    multiple=True,
    required=True,
    help="Agent checkpoint (.zip from `dlcluster train` or `save_agent`), repeatable; "
    "LABEL=PATH names it (default: the file stem, or <agent>-agent for a lone agent).",
)
@click.option(
    "--scenario",
    "scenarios",
    multiple=True,
    help="Scenario preset or YAML (repeatable; default: the agents' configs' held-out sets).",
)
@click.option(
    "--seeds",
    default=None,
    help="Seeds for every scenario: integers and ranges, e.g. 101-110 or 101,102 (default: "
    "each config's evaluation seeds, per scenario where it names them).",
)
@click.option(
    "--split",
    default=None,
    metavar="NAME[:PART]",
    help="Evaluate on a part of a named split (dlcluster list splits; PART: train, "
    "validation or test, default test): its scenarios, each with its own seeds. Replaces "
    "--scenario and --seeds.",
)
@click.option(
    "--baselines",
    default=None,
    help="Comma-separated policies to compare with ('' for none). Default: "
    "dally,dally-manual,tiresias,gandiva,themis,cassini,qssf,qssf-preemptive,srsf,srw,ideal "
    "plus the heuristics of each agent kind (fcfs and las-slots for scheduler agents). Tables "
    "mark clairvoyant policies and bounds; the best heuristic is the best deployable one "
    "(dlcluster list policies).",
)
@click.option(
    "--entrant",
    "entrants",
    multiple=True,
    metavar="YAML",
    help="A policy with parameters, written as a leaderboard suite's entrant (repeatable), "
    "e.g. '{policy: dally-manual, params: {machine_timer_s: 172800}, label: manual-48h}'; "
    "its label (default: the policy name) names its column.",
)
@click.option(
    "--reference",
    default=None,
    help="Policy (or agent label) the ratios are to (default: dally when it runs, else the "
    "first agent).",
)
@click.option(
    "--tie-rtol",
    type=click.FloatRange(min=0.0),
    default=1e-3,
    show_default=True,
    help="A scenario where every non-bound policy's average JCT is equal within this relative "
    "tolerance on every seed is reported as 'no decision' and left out of the aggregate.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    help="A folder for eval.json (every run), eval.md (the tables) and eval.png (ratios with "
    "95% CIs); a path ending in .json writes that one JSON file only.",
)
@click.option(
    "--rerun",
    default=None,
    metavar="POLICIES",
    help="Comma-separated policy or agent labels: run only their columns again and keep every "
    "other run of the evaluation already in --out (the same columns, scenarios and seeds); "
    "the page says which columns were rerun, and how. For a policy whose code or defaults "
    "changed.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@traces_dir_option
@click.option("--quiet", is_flag=True, help="No progress bar or progress lines.")
def evaluate(
    agents: tuple[str, ...],
    scenarios: tuple[str, ...],
    seeds: str | None,
    split: str | None,
    baselines: str | None,
    entrants: tuple[str, ...],
    reference: str | None,
    tie_rtol: float,
    out: Path | None,
    rerun: str | None,
    fmt: str,
    traces_dir: Path | None,
    quiet: bool,
) -> None:
    """Evaluate agent checkpoints next to heuristics on held-out scenarios and seeds.

    Per scenario and policy: mean average and P99 JCT over seeds with 95% Student-t
    confidence intervals, and the per-seed ratio to the reference with its CI. Scenarios
    where every policy ties are 'no decision' and left out of the aggregate (the geometric
    mean of the per-scenario ratios). Each agent is also compared with the best deployable
    heuristic (the best clairvoyant one beside it), and its fraction of the room closed is
    shown: from the best deployable reference policy (0) to the best clairvoyant one (1), per
    seed, 'no room' where the clairvoyant one is less than 5% below."""
    from dlcluster_gym.envs.agent_loader import read_agent_meta
    from dlcluster_gym.scheduler import make_policy

    if not math.isfinite(tie_rtol):
        _fail(f"--tie-rtol {tie_rtol}: give a finite relative tolerance >= 0")
    parsed = _agent_options(agents)
    metas = []
    for _, path, value in parsed:
        try:
            metas.append(read_agent_meta(path))
        except DLClusterError as err:
            _fail(f"--agent {value}: {err}")
    _import_agents("dlcluster_gym.agents.load")
    from dlcluster_gym.agents import evaluate as ev
    from dlcluster_gym.agents.config import (
        DEFAULT_EVAL_SEEDS,
        MIN_CI_SEEDS,
        AgentConfig,
        ScenarioSpec,
    )
    from dlcluster_gym.agents.envs import available, scenario_mapping

    labels = _agent_labels(parsed, metas)
    policies: dict[str, Any] = {
        label: f"agent:{path}" for label, (_, path, _) in zip(labels, parsed, strict=True)
    }
    names = (
        ev.default_baselines([m["agent"] for m in metas])
        if baselines is None
        else [x.strip() for x in baselines.split(",") if x.strip()]
    )
    for b in names:
        if b in policies:
            _fail(f"--baselines {b!r}: that is an agent's label")
        policies[b] = b
    # everything is resolved before the first simulation: a typo must not cost a run
    for label, (_, _, value) in zip(labels, parsed, strict=True):
        try:
            make_policy(policies[label])
        except DLClusterError as err:
            _fail(f"--agent {value}: {err}")
    for name in dict.fromkeys(names):
        try:
            make_policy(name)
        except DLClusterError as err:
            _fail(f"--baselines {name!r}: {err}")
    for value in entrants:
        label, maker = _entrant_option(value)
        if label in policies:
            _fail(f"--entrant {value!r}: label {label!r} is taken; give the entrant a label")
        policies[label] = maker
    ref = reference or ("dally" if "dally" in policies else labels[0])
    if ref not in policies:
        _fail(f"--reference {ref!r}: not among the evaluated policies ({', '.join(policies)})")
    if split is not None and (scenarios or seeds is not None):
        given = " and ".join(o for o, v in (("--scenario", scenarios), ("--seeds", seeds)) if v)
        _fail(f"--split {split}: a split gives the scenarios and their seeds; leave out {given}")
    seed_list = _seed_list(seeds) if seeds is not None else None
    configs = []
    for meta, (_, _, value) in zip(metas, parsed, strict=True):
        if meta.get("config") is not None:
            try:
                configs.append(AgentConfig.model_validate(meta["config"]).evaluation)
            except ValueError as err:
                _fail(f"--agent {value}: its recorded config does not validate: {err}")
    split_part = None
    if split is not None:
        split_part, specs = _split_specs(split, ScenarioSpec)
    elif scenarios:
        default = seed_list or (list(configs[0].seeds) if configs else list(DEFAULT_EVAL_SEEDS))
        specs = [ScenarioSpec(scenario=s, seeds=tuple(default)) for s in scenarios]
    else:
        if not configs:
            _fail(f"--agent {agents[0]}: the checkpoint records no evaluation set (saved "
                  "without a config); give --scenario")  # fmt: skip
        specs = _evaluation_specs(configs, seed_list)
    for spec in specs:
        try:
            scenario_mapping(spec)
        except DLClusterError as err:
            where = (
                f"--split {split}: scenario"
                if split is not None
                else "--scenario"
                if scenarios
                else f"{parsed[0][2]}: evaluation scenario"
            )
            _fail(f"{where} {spec.scenario!r}: {err}")
    if out is not None:
        if out.suffix == ".json":
            prepare_out_file(out, "--out")
        else:
            check_writable(out, "--out", directory=True)
    command = _evaluate_command(click.get_current_context().params)
    previous = None if rerun is None else _previous_evaluation(rerun, out, policies)
    kept, skipped = available(specs, traces_dir)
    for s in skipped:
        click.echo(f"note: skipped {s} (needs traces; trace root not found)", err=True)
    few = [s.name for s in kept if len(s.seeds or ()) < MIN_CI_SEEDS]
    if few:
        click.echo(
            f"warning: {', '.join(few)}: fewer than {MIN_CI_SEEDS} seeds; 95% confidence "
            f"intervals need >= {MIN_CI_SEEDS} seeds per scenario to be worth reading "
            "(e.g. --seeds 101-110)",
            err=True,
        )
    to_run = policies if previous is None else {k: policies[k] for k in previous["rerun"]}
    total = ev.count_runs(len(to_run), kept, DEFAULT_EVAL_SEEDS, traces_dir)
    bar = None
    if quiet or fmt == "json":
        progress = None
    elif sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=total, unit="run", desc="evaluate", file=sys.stderr, dynamic_ncols=True)

        def progress(msg: str) -> None:
            bar.set_postfix_str(msg, refresh=False)
            bar.update(1)
    else:

        def progress(msg: str) -> None:
            click.echo(msg, err=True)

    started = time.perf_counter()
    try:
        rows = ev.run_set(to_run, kept, DEFAULT_EVAL_SEEDS, traces_dir, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    wall_s = time.perf_counter() - started
    if previous is not None:
        rows = _merge_rerun(previous, rows)
    report = ev.evaluation_report(rows, labels, ref, tie_rtol)
    report["command"] = command if previous is None else previous["command"]
    if split_part is not None:
        report["split"] = split_part
    report["wall_s"] = wall_s if previous is None else previous["wall_s"]
    report["cores"] = os.cpu_count() if previous is None else previous["cores"]
    if previous is not None:
        report["reruns"] = [
            *previous["reruns"],
            {
                "policies": previous["rerun"],
                "command": f"{command} --rerun={rerun}",
                "wall_s": wall_s,
                "cores": os.cpu_count(),
            },
        ]
    report["checkpoints"] = {
        label: str(path) for label, (_, path, _) in zip(labels, parsed, strict=True)
    }
    sections = ev.report_sections(report, rows)
    if out is not None:
        _write_evaluation(out, report, sections, ev)
    if fmt == "json":
        click.echo(json.dumps(report))
        return
    for i, (heading, table) in enumerate(sections):
        click.echo(f"{'' if i == 0 else chr(10)}{heading}:")
        click.echo(table)
    if report["no_decision"]:
        click.echo(f"\nno decision (left out of the aggregate): {', '.join(report['no_decision'])}")


def _entrant_option(value: str) -> tuple[str, Any]:
    """``--entrant YAML`` -> (label, a maker of fresh policy objects); the policy is built
    once here, so a bad name or parameter fails before any simulation."""
    import yaml
    from pydantic import ValidationError

    from dlcluster_gym.config import safe_load, yaml_problem
    from dlcluster_gym.leaderboard.suite import EntrantSpec
    from dlcluster_gym.scheduler import make_policy

    form = "expected a mapping like '{policy: NAME, params: {...}, label: LABEL}'"
    try:
        spec = EntrantSpec.model_validate(safe_load(value))
    except yaml.YAMLError as err:
        _fail(f"--entrant {value!r}: {form} ({yaml_problem(err)})")
    except ValidationError as err:
        why = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'value'}: "
            + ("unknown key" if e["type"] == "extra_forbidden" else e["msg"])
            for e in err.errors()
        )
        _fail(f"--entrant {value!r}: {form} ({why})")
    try:
        make_policy(spec.policy, **spec.params)
    except DLClusterError as err:
        _fail(f"--entrant {value!r}: {err}")
    return spec.label or spec.policy, functools.partial(make_policy, spec.policy, **spec.params)


def _previous_evaluation(rerun: str, out: Path | None, policies: dict[str, Any]) -> dict[str, Any]:
    """``--rerun``: the report in ``--out``, with the labels to rerun (``rerun``); a clear
    error when there is none, its columns are not this command's, or a label is not
    evaluated. Scenarios and seeds are checked when the runs are merged."""
    names = list(dict.fromkeys(x.strip() for x in rerun.split(",") if x.strip()))
    if not names:
        _fail("--rerun: give the labels of the columns to run again, e.g. --rerun tiresias")
    for name in names:
        if name not in policies:
            _fail(f"--rerun {name!r}: not among the evaluated policies ({', '.join(policies)})")
    if out is None:
        _fail("--rerun: give --out, the folder (or .json file) of the evaluation to update")
    path = out if out.suffix == ".json" else out / "eval.json"
    if not path.is_file():
        _fail(f"--rerun: {path} does not exist; run the evaluation once without --rerun")
    try:
        previous = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        _fail(f"--rerun: {path} is not readable JSON ({err})")
    lacks = [k for k in ("command", "rows", "wall_s", "cores") if k not in previous]
    if not isinstance(previous, dict) or lacks:  # (a list holds no key either)
        _fail(f"--rerun: {path} is not an evaluation written by dlcluster evaluate (no "
              f"{', '.join(lacks) or 'mapping'})")  # fmt: skip
    before, rows = previous["command"], previous["rows"]
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        _fail(f"--rerun: {path}: 'rows' is not a list of runs")
    had = list(dict.fromkeys(r.get("policy") for r in rows))
    if set(had) != set(policies):
        _fail(
            f"--rerun: {path} has the columns {', '.join(map(str, had))}; this command "
            f"evaluates {', '.join(policies)}. Give the agents and --baselines/--entrant of "
            f"that evaluation ({before})"
        )
    previous["rerun"] = names
    previous.setdefault("reruns", [])
    return previous


def _merge_rerun(previous: dict[str, Any], new_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The previous evaluation's rows with those of the rerun columns replaced by ``new_rows``
    (the same scenarios and seeds, or a clear error: e.g. a trace root present for one run
    and not the other)."""
    names = set(previous["rerun"])

    def key(r: dict[str, Any]) -> tuple:
        return (r.get("scenario"), r.get("seed"), r.get("policy"))

    old = [key(r) for r in previous["rows"] if r.get("policy") in names]
    by_key = {key(r): r for r in new_rows}
    if sorted(old, key=str) != sorted(by_key, key=str):
        missing = sorted({(k[0], k[1]) for k in set(old) ^ set(by_key)}, key=str)
        _fail("--rerun: the runs differ from the evaluation in --out (scenario, seed): "
              f"{missing[:5]}{' ...' if len(missing) > 5 else ''}; the same scenarios and "
              "seeds must run (is the trace root the same?)")  # fmt: skip
    return [by_key[key(r)] if r.get("policy") in names else r for r in previous["rows"]]


def _evaluate_command(params: dict[str, Any]) -> str:
    """The ``dlcluster evaluate`` command line that repeats this evaluation from its parsed
    ``params`` (the options that decide what runs and where it is written; progress and
    format options left out)."""
    agents, scenarios, tie_rtol = params["agents"], params["scenarios"], params["tie_rtol"]
    args = ["dlcluster", "evaluate", *(f"--agent={a}" for a in agents)]
    args += [f"--scenario={sc}" for sc in scenarios]
    args += [f"--entrant={e}" for e in params.get("entrants", ())]
    for key in ("seeds", "split", "baselines", "reference", "out"):
        if (value := params.get(key)) is not None:
            args.append(f"--{key}={value}")
    if tie_rtol != 1e-3:
        args.append(f"--tie-rtol={tie_rtol:g}")
    return shlex.join(args)


def _split_specs(text: str, spec_cls: Any) -> tuple[str, list[Any]]:
    """``--split NAME[:PART]`` -> ("NAME:PART", the part's entries as evaluation specs, each
    with its own seeds)."""
    from dlcluster_gym.splits import load_split, parse_split_part

    try:
        name, part = parse_split_part(text)
        entries = load_split(name).part(part)
    except DLClusterError as err:
        _fail(f"--split {text}: {err}")
    for e in entries:
        if len(e.seeds) > MAX_EVAL_SEEDS:
            _fail(f"--split {text}: {e.label!r} has {len(e.seeds):,} seeds ({e.seeds}); at "
                  f"most {MAX_EVAL_SEEDS:,} per scenario are evaluated")  # fmt: skip
    specs = [
        spec_cls(
            scenario=e.scenario, overrides=e.overrides, label=e.label, seeds=tuple(e.seeds),
            requires_traces=e.requires_traces,
        )
        for e in entries
    ]  # fmt: skip
    return f"{name}:{part}", specs


def _evaluation_specs(configs: list[Any], seeds: list[int] | None) -> list[Any]:
    """The scenarios of the agents' evaluation sets, each once (by label), with the seeds it
    runs: ``seeds`` when given, else every seed its sets give it."""
    specs: dict[str, Any] = {}
    for ev_set in configs:
        for spec in ev_set.scenarios:
            own = tuple(seeds) if seeds is not None else ev_set.seeds_of(spec)
            if spec.name in specs:
                old = specs[spec.name]
                if old.model_copy(update={"seeds": None}) != spec.model_copy(
                    update={"seeds": None}
                ):
                    _fail(f"evaluation scenario {spec.name!r} differs between the agents' "
                          "configs; evaluate them apart or give --scenario")  # fmt: skip
                own = tuple(dict.fromkeys((*old.seeds, *own)))
            specs[spec.name] = spec.model_copy(update={"seeds": own})
    return list(specs.values())


def _write_evaluation(out: Path, report: dict, sections: list[tuple[str, str]], ev: Any) -> None:
    """``--out``: FILE.json, or a folder with eval.json, eval.md and eval.png."""
    if out.suffix == ".json":
        out.write_text(json.dumps(report, indent=1))
        return
    out.mkdir(parents=True, exist_ok=True)
    (out / "eval.json").write_text(json.dumps(report, indent=1))
    from dlcluster_gym.leaderboard.tables import seed_ranges

    seeds = "; ".join(f"{sc}: {seed_ranges(v)}" for sc, v in report["seeds"].items())
    lines = ["# Agent evaluation", ""]
    for label, path in report.get("checkpoints", {}).items():
        lines.append(f"- agent `{label}`: `{path}`")
    if "split" in report:
        lines.append(f"- split: `{report['split']}` (scenarios and seeds of that part)")
    if "command" in report:
        lines.append(f"- command: `{report['command']}` ({report['wall_s']:.0f} s wall on "
                     f"{report['cores']} cores)")  # fmt: skip
    for rerun in report.get("reruns", []):
        again = ", ".join(f"`{p}`" for p in rerun["policies"])
        lines.append(
            f"- rerun: the {again} runs, again on later code by `{rerun['command']}` "
            f"({rerun['wall_s']:.0f} s wall on {rerun['cores']} cores); every other run is the "
            "command's above"
        )
    lines += [f"- reference: {report['reference']}; seeds per scenario: {seeds}",
              f"- no decision (relative tolerance {report['tie_rtol']:g}): "
              f"{', '.join(report['no_decision']) or 'none'}", ""]  # fmt: skip
    for heading, table in sections:
        lines += [f"## {heading[0].upper()}{heading[1:]}", "", table, ""]
    lines += ["![ratios to the reference](eval.png)", ""]
    (out / "eval.md").write_text("\n".join(lines))
    png = ev.ratio_figure(report["stats"], report["aggregate"], report["reference"])
    (out / "eval.png").write_bytes(png)


COMMANDS = (evaluate,)
