"""``dlcluster simulate``: one policy on one scenario."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from dlcluster_gym.cli.common import (
    _check_time_limit,
    _fail,
    _fmt,
    _progress_bar,
    check_writable,
    policy_args_option,
    policy_option,
    scenario_option,
    seed_option,
    traces_dir_option,
)
from dlcluster_gym.sim.results import SUMMARY_KEYS

SUMMARY_ORDER = (*SUMMARY_KEYS, "wall_s")


# What `simulate --out` and `report` write into a run folder (what --overwrite deletes).
RUN_FILES = (
    "metrics.json", "results.json", "jobs.csv", "jobs.parquet", "timeseries.csv",
    "events.jsonl", "report.png", "report.md", "report.html",
)  # fmt: skip


def _check_run_folder(out: Path, events: Path | None, overwrite: bool) -> None:
    """``--out``: not the --events file, and empty unless ``--overwrite`` (so that one folder
    never mixes the files of two runs)."""
    if events is not None:
        if events.resolve() == out.resolve():
            _fail(f"--events {events}: is the --out folder; give the event log its own file name")
        if events.resolve().parent == out.resolve() and events.name in RUN_FILES[:5]:
            _fail(f"--events {events}: --out writes {events.name} there itself; give the event "
                  "log another name (e.g. events.jsonl)")  # fmt: skip
    if overwrite or not out.is_dir():
        return
    held = sorted(p.name for p in out.iterdir() if not p.name.startswith("."))
    if held:
        _fail(
            f"--out {out}: not empty (holds {len(held)} file(s), e.g. {held[0]}); its files "
            "would mix with this run's: give a new or empty folder, or --overwrite to replace "
            "an earlier run's files"
        )


def _clear_run_files(out: Path) -> None:
    """``--overwrite``: delete what an earlier run or report wrote into ``out``."""
    for name in RUN_FILES:
        (out / name).unlink(missing_ok=True)


BIG_RUN_JOBS = 100_000  # from here on, say up front that a run will take a while
JOBS_PER_S = 14_000  # fcfs, philly-1024gpu (README "Speed" table); dally ~6,000, tiresias far less


def _estimate(scenario: str, seed: int | None) -> None:
    """A note on stderr before a big synthetic run: its size and a rough duration."""
    from dlcluster_gym.config import load_scenario

    cfg = load_scenario(scenario, seed=seed)
    n = getattr(cfg.workload, "num_jobs", None)
    if cfg.workload.max_jobs is not None and n is not None:
        n = min(n, cfg.workload.max_jobs)
    if n is not None and n >= BIG_RUN_JOBS:
        click.echo(
            f"note: a big run: {n:,} jobs on {cfg.cluster.num_gpus:,} GPUs; at about "
            f"{JOBS_PER_S:,} jobs/s (fcfs; most policies are slower) it takes "
            f"{n / JOBS_PER_S / 60:,.0f} min or more",
            err=True,
        )


def _note_unused_traces_dir(scenario: str, seed: int | None, traces_dir: Path | None) -> None:
    """A note on stderr when --traces-dir cannot matter: the scenario reads no trace file, or
    only by absolute paths (the trace root applies to relative ones)."""
    if traces_dir is None:
        return
    from dlcluster_gym.config import load_scenario

    w = load_scenario(scenario, seed=seed).workload
    paths = [p for p in (getattr(w, "path", None), getattr(w, "task_path", None)) if p]
    if any(not Path(p).expanduser().is_absolute() for p in paths):
        return
    why = "reads no trace file" if not paths else "reads its trace by an absolute path"
    missing = "" if traces_dir.is_dir() else f"; {traces_dir} does not exist either"
    click.echo(
        f"note: --traces-dir {traces_dir} is not used: scenario {scenario!r} {why}{missing}",
        err=True,
    )


@click.command()
@scenario_option
@policy_option
@policy_args_option
@seed_option
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for metrics.json, results.json, jobs.csv, jobs.parquet, timeseries.csv "
    "(and events.jsonl with --events); a new or empty one (see --overwrite).",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Let --out be a folder that is not empty: the files an earlier run or report wrote "
    "there are deleted first, other files are left alone.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option(
    "--events",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the event log here (one JSON object per line).",
)
@traces_dir_option
@click.option(
    "--time-limit",
    "time_limit_s",
    type=float,
    default=None,
    metavar="SECONDS",
    help="Stop with an error once the run has taken this many seconds of wall-clock time "
    "(loading included), even inside a policy's schedule() that never returns. Default: no "
    "limit.",
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
def simulate(
    scenario: str,
    policy: str,
    policy_args: tuple[str, ...],
    seed: int | None,
    out: Path | None,
    overwrite: bool,
    fmt: str,
    events: Path | None,
    traces_dir: Path | None,
    time_limit_s: float | None,
    quiet: bool,
) -> None:
    """Run one policy on one scenario and print its summary.

    --time-limit SECONDS bounds the run's wall-clock time: past it the run stops with a
    one-line error naming the policy, the simulated time and what it was deciding (on POSIX
    a timer signal interrupts even a schedule() that never returns)."""
    from dlcluster_gym.api import simulate as run
    from dlcluster_gym.scheduler import parse_policy_args
    from dlcluster_gym.sim.results import _jsonable, write_events

    params = parse_policy_args(policy_args)
    _check_time_limit(time_limit_s, "--time-limit")
    if out is not None:
        check_writable(out, "--out", directory=True)
    if events is not None:
        check_writable(events, "--events", directory=False)
    if out is not None:
        _check_run_folder(out, events, overwrite)
    _estimate(scenario, seed)
    _note_unused_traces_dir(scenario, seed, traces_dir)
    bar, update = _progress_bar(not quiet and sys.stderr.isatty(), f"{policy} on {scenario}")
    try:
        res = run(
            scenario,
            policy,
            seed,
            policy_params=params,
            traces_dir=traces_dir,
            record_events=events is not None,
            progress=update,
            time_limit_s=time_limit_s,
        )
    finally:
        if bar is not None:
            bar.close()
    if out is not None:
        if overwrite:
            _clear_run_files(out)
        res.save(out)
    if events is not None:
        write_events(events, res.events or [])
    metrics = res.metrics()
    unfinished = int(metrics.get("jobs_unfinished", 0) or 0)
    if unfinished:
        total = int(metrics.get("jobs_total", 0) or 0)
        click.echo(
            f"warning: {unfinished} of {total} job(s) did not finish under policy "
            f"{res.policy!r}"
            + (" (it never started a job)" if unfinished == total else "")
            + "; JCT metrics cover the finished jobs only",
            err=True,
        )
    if fmt == "json":
        click.echo(json.dumps(_jsonable(metrics)))
        return
    from rich.console import Console
    from rich.table import Table

    label = {"bound": " (BOUND, not a schedule)", "clairvoyant": " (CLAIRVOYANT: not deployable)"}
    title = f"{res.policy}{label.get(res.kind, '')} on {res.scenario}"
    if unfinished:
        title += f" - {unfinished} JOB(S) UNFINISHED"
    table = Table(title=f"{title}, seed {res.seed}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k in SUMMARY_ORDER:
        if k in metrics:
            bad = k == "jobs_unfinished" and unfinished
            table.add_row(k, _fmt(k, metrics[k]), style="bold red" if bad else None)
    Console().print(table)
    if out is not None:
        click.echo(f"results written to {out}")


COMMANDS = (simulate,)
