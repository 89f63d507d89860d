"""The ``dlcluster`` command."""

from __future__ import annotations

import json
import math
import sys
import warnings
from pathlib import Path
from typing import Any

import click

from dlcluster_gym.errors import DLClusterError
from dlcluster_gym.sim.results import SUMMARY_KEYS

SUMMARY_ORDER = (*SUMMARY_KEYS, "wall_s")


def _fail(msg: str) -> None:
    click.echo(f"error: {msg}", err=True)
    sys.exit(2)


def _warn_to_stderr(
    message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
) -> None:
    click.echo(f"warning: {message}", err=True)


class _Group(click.Group):
    """Turns the package's own errors into one clear line on stderr and exit code 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except DLClusterError as exc:
            _fail(str(exc))


@click.group(cls=_Group)
@click.version_option(package_name="dlcluster-gym")
def main() -> None:
    """Simulate deep-learning cluster schedulers; list presets; inspect the model zoo."""
    warnings.showwarning = _warn_to_stderr


def _fmt(key: str, v: Any) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        if key.endswith("_s"):
            return f"{v:,.1f} s ({v / 3600:,.2f} h)" if v >= 3600 else f"{v:,.3f} s"
        return f"{v:.4f}"
    return str(v)


def _progress_bar(enabled: bool, total_hint: str) -> tuple[Any, Any]:
    if not enabled:
        return None, None
    from tqdm import tqdm

    bar = tqdm(
        total=None,
        unit="job",
        desc=total_hint,
        file=sys.stderr,
        mininterval=0.5,
        dynamic_ncols=True,
    )
    state = {"done": -1}

    def update(done: int, total: int) -> None:
        if bar.total != total:
            bar.total = total
        if done != state["done"]:
            bar.update(done - max(state["done"], 0))
            state["done"] = done

    return bar, update


@main.command()
@click.option("--scenario", required=True, help="Preset name (dlcluster list scenarios) or YAML.")
@click.option(
    "--policy",
    default="fcfs",
    show_default=True,
    help="Registered name (dlcluster list policies) or package.module:Class.",
)
@click.option(
    "--policy-arg",
    "policy_args",
    multiple=True,
    metavar="KEY=VALUE",
    help="Policy parameter (repeatable).",
)
@click.option("--seed", type=int, default=None, help="Overrides the scenario's seed.")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Directory for metrics.json, results.json, jobs.csv, timeseries.csv.",
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
@click.option(
    "--traces-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Trace root (default: $DLCLUSTER_TRACES, else ../shared/traces).",
)
@click.option("--quiet", is_flag=True, help="No progress bar.")
def simulate(
    scenario: str,
    policy: str,
    policy_args: tuple[str, ...],
    seed: int | None,
    out: Path | None,
    fmt: str,
    events: Path | None,
    traces_dir: Path | None,
    quiet: bool,
) -> None:
    """Run one policy on one scenario and print its summary."""
    from dlcluster_gym.api import simulate as run
    from dlcluster_gym.scheduler import parse_policy_args
    from dlcluster_gym.sim.results import _jsonable, write_events

    params = parse_policy_args(policy_args)
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
        )
    finally:
        if bar is not None:
            bar.close()
    if out is not None:
        res.save(out)
    if events is not None:
        write_events(events, res.events or [])
    metrics = res.metrics()
    if fmt == "json":
        click.echo(json.dumps(_jsonable(metrics)))
        return
    from rich.console import Console
    from rich.table import Table

    title = f"{res.policy}{' (BOUND, not a schedule)' if res.is_bound else ''} on {res.scenario}"
    table = Table(title=f"{title}, seed {res.seed}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for k in SUMMARY_ORDER:
        if k in metrics:
            table.add_row(k, _fmt(k, metrics[k]))
    Console().print(table)
    if out is not None:
        click.echo(f"results written to {out}")


@main.command(name="list")
@click.argument("what", type=click.Choice(["policies", "scenarios", "models", "clusters"]))
def list_cmd(what: str) -> None:
    """List policies, scenarios, models or clusters, one per line with a description."""
    rows: list[tuple[str, str]]
    if what == "policies":
        from dlcluster_gym.scheduler import policies

        rows = [(n, s.description) for n, s in policies().items()]
    elif what == "models":
        from dlcluster_gym.workload.models import MODEL_ZOO

        rows = [
            (
                n,
                f"{p.family}, {p.params_m:g}M params, {p.skew} skew, {p.parallelism} "
                f"parallel, {p.compute_s * 1e3:g} ms/iter compute",
            )
            for n, p in sorted(MODEL_ZOO.items())
        ]
    else:
        from dlcluster_gym.config import list_presets

        rows = list(list_presets(what).items())
    width = max((len(n) for n, _ in rows), default=0)
    for name, desc in rows:
        click.echo(f"{name:<{width}}  {desc}")


@main.command()
@click.option(
    "--overheads",
    is_flag=True,
    help="Communication overhead (% of compute) at Dally's reference placements.",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def models(overheads: bool, fmt: str) -> None:
    """The model zoo; with --overheads, Dally Table 1 as our network model computes it."""
    from dlcluster_gym.perf.network import DALLY_TABLE1, table1_overheads

    if not overheads:
        from dlcluster_gym.workload.models import MODEL_ZOO

        data: Any = {
            n: {
                "params_m": p.params_m,
                "skew": p.skew,
                "parallelism": p.parallelism,
                "compute_s": p.compute_s,
                "source": p.source,
            }
            for n, p in sorted(MODEL_ZOO.items())
        }
        if fmt == "json":
            click.echo(json.dumps(data))
        else:
            for n, d in data.items():
                click.echo(
                    f"{n:<16} {d['params_m']:>9g}M  {d['skew']:<4} {d['parallelism']:<5} "
                    f"{d['compute_s'] * 1e3:8.1f} ms  {d['source']}"
                )
        return
    table = table1_overheads()
    if fmt == "json":
        click.echo(json.dumps(table))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title="Communication overhead, % of compute (ours / Dally Table 1)")
    t.add_column("model")
    for tier in ("machine", "rack", "network"):
        t.add_column(tier, justify="right")
    for model, row in table.items():
        paper = DALLY_TABLE1[model]
        t.add_row(model, *(f"{row[k]:.1f} / {paper[k]:g}" for k in ("machine", "rack", "network")))
    Console().print(t)


@main.command()
@click.option(
    "--jobs",
    "jobs_spec",
    required=True,
    metavar="MODEL:BATCH[,MODEL:BATCH...]",
    help="Jobs sharing the link, batch size per GPU (a bare MODEL uses its reference batch).",
)
@click.option(
    "--link-gbps",
    type=float,
    default=50.0,
    show_default=True,
    help="Capacity of the shared link in Gb/s (the Cassini testbed's NICs: 50).",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def compat(jobs_spec: str, link_gbps: float, fmt: str) -> None:
    """Cassini compatibility score and time shifts of jobs sharing one link.

    Jobs are Cassini Table 4.2 models profiled on its testbed (perf/testbed.py). JSON output:
    {"score": float, "shifts_ms": {"<model>:<batch>": ms}, "perimeter_ms": float}; the first
    job is the reference (0 ms) and a repeated MODEL:BATCH gets the suffix #2, #3, ...
    """
    from dlcluster_gym.perf.testbed import (
        get_profiled_model,
        job_keys,
        link_report,
        parse_job_specs,
    )

    specs = parse_job_specs(jobs_spec)
    report = link_report(specs, link_gbps)
    if fmt == "json":
        click.echo(json.dumps(report))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"Jobs sharing one {link_gbps:g} Gb/s link")
    for col in ("job", "iteration ms", "Up ms", "peak Gb/s", "time shift ms"):
        t.add_column(col, justify="left" if col == "job" else "right")
    for spec, key in zip(specs, job_keys(specs), strict=True):
        m = get_profiled_model(spec.model)
        t.add_row(
            key,
            f"{m.iteration_ms(spec.batch):.1f}",
            f"{m.up_ms:.1f}",
            f"{m.peak_gbps:g}",
            f"{report['shifts_ms'][key]:g}",
        )
    Console().print(t)
    click.echo(
        f"compatibility score {report['score']:.3f} (1 = fully compatible); "
        f"unified circle {report['perimeter_ms']:g} ms"
    )


if __name__ == "__main__":
    main()
