"""``dlcluster models`` (the model zoo and its communication overheads) and ``dlcluster
compat`` (Cassini compatibility of jobs sharing a link)."""

from __future__ import annotations

import json
from typing import Any

import click

from dlcluster_gym.workload.profiles import PROFILE_SOURCES


@click.command()
@click.option(
    "--overheads",
    is_flag=True,
    help="Communication overhead (% of compute) at Dally's reference placements.",
)
@click.option(
    "--profile",
    "source",
    type=click.Choice(sorted(PROFILE_SOURCES)),
    default=None,
    help="Model profile source (default: physics; dally-table1 with --overheads; "
    "cassini-testbed shows the testbed profiles on the cassini-testbed cluster).",
)
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
def models(overheads: bool, source: str | None, fmt: str) -> None:
    """The model zoo; with --overheads, the communication overhead of every model at Dally's
    three reference placements (8 GPUs in a machine / a rack / across racks on the Dally
    cluster) under a profile source; dally-table1 is Dally Table 1."""
    from dlcluster_gym.perf.network import DALLY_TABLE1, overhead_table
    from dlcluster_gym.workload.profiles import model_profile

    if not overheads:  # each model as the profile source gives it
        from dlcluster_gym.workload.models import MODEL_ZOO

        profiles = {n: model_profile(n, source or "physics") for n in sorted(MODEL_ZOO)}
        data: Any = {
            n: {
                "params_m": p.params_m,
                "skew": p.skew,
                "parallelism": p.parallelism,
                "compute_s": p.compute_s,
                "tier_scale": list(p.comm.tier_scale),
                "source": p.source,
            }
            for n, p in profiles.items()
        }
        if fmt == "json":
            click.echo(json.dumps(data))
        else:
            for n, d in data.items():
                scale = d["tier_scale"]
                scaled = (
                    "" if scale == [1.0, 1.0, 1.0] else " x" + "/".join(f"{x:g}" for x in scale)
                )
                click.echo(
                    f"{n:<16} {d['params_m']:>9g}M  {d['skew']:<4} {d['parallelism']:<5} "
                    f"{d['compute_s'] * 1e3:8.1f} ms{scaled}  {d['source']}"
                )
        return
    source = source or "dally-table1"
    if source == "cassini-testbed":
        _testbed_overheads(fmt)
        return
    table = overhead_table(source)
    if fmt == "json":
        click.echo(json.dumps(table))
        return
    from rich.console import Console
    from rich.table import Table

    paper = source == "dally-table1"
    title = f"Communication overhead, % of compute, profile {source}" + (
        " (ours / Dally Table 1)" if paper else ""
    )
    t = Table(title=title)
    t.add_column("model")
    for tier in ("machine", "rack", "network"):
        t.add_column(tier, justify="right")
    for model, row in table.items():
        cells = []
        for k in ("machine", "rack", "network"):
            ref = DALLY_TABLE1.get(model, {}).get(k) if paper else None
            cells.append(f"{row[k]:.1f}" + (f" / {ref:g}" if ref is not None else ""))
        t.add_row(model, *cells)
    Console().print(t)


def _testbed_overheads(fmt: str) -> None:
    """``models --overheads --profile cassini-testbed``: the testbed profiles as the engine
    runs them, on the ``cassini-testbed`` cluster."""
    from dlcluster_gym.perf.testbed import TESTBED_PLACEMENTS, testbed_overheads

    table = testbed_overheads()
    if fmt == "json":
        click.echo(json.dumps(table))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(
        title="Testbed profiles (configs/profiles/cassini-testbed.yaml) as the engine runs them "
        "on cluster cassini-testbed: exposed comm. % of compute, job alone, on 2 servers in "
        "1 rack (rack-2), 2 racks (net-2), 12 servers in 6 racks (net-12)"
    )
    for col in ("model", "batch", "iter ms", "Up ms", "Gb/iter", "compute ms"):
        t.add_column(col, justify="left" if col == "model" else "right")
    for label in TESTBED_PLACEMENTS:
        t.add_column(label, justify="right")
    for model, r in table.items():
        t.add_row(
            model,
            f"{r['ref_batch']:.0f}",
            f"{r['iteration_ms']:.1f}",
            f"{r['up_ms']:.1f}",
            f"{r['gbit']:.2f}",
            f"{r['compute_ms']:.1f}",
            *(f"{r[label]:.1f}" for label in TESTBED_PLACEMENTS),
        )
    Console().print(t)


@click.command()
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


COMMANDS = (models, compat)
