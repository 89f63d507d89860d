"""``dlcluster profile``: where one policy spends its time on one scenario (cProfile)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from dlcluster_gym.cli.common import (
    policy_args_option,
    policy_option,
    prepare_out_file,
    scenario_option,
    seed_option,
    traces_dir_option,
)


@click.command()
@scenario_option
@policy_option
@policy_args_option
@seed_option
@click.option(
    "--jobs",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Replay only the first N jobs by arrival (0: all), to profile a slow policy on a "
    "prefix of a large trace in bounded time.",
)
@click.option(
    "--top", type=click.IntRange(min=1), default=25, show_default=True, help="Functions shown."
)
@click.option(
    "--sort",
    type=click.Choice(["tottime", "cumulative"]),
    default="tottime",
    show_default=True,
    help="Order: time in the function itself, or with what it calls.",
)
@click.option("--contention", is_flag=True, help="Turn link contention on for the run.")
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the raw profile here (pstats format, e.g. for snakeviz).",
)
@traces_dir_option
def profile(
    scenario: str,
    policy: str,
    policy_args: tuple[str, ...],
    seed: int | None,
    jobs: int,
    top: int,
    sort: str,
    contention: bool,
    out: Path | None,
    traces_dir: Path | None,
) -> None:
    """Run one policy on one scenario under cProfile and print the functions it spends the
    most time in, after a line with the run's wall time, events, average JCT and
    preemptions (the profiler slows the run down)."""
    import cProfile
    import pstats

    from dlcluster_gym.api import prepare
    from dlcluster_gym.config import load_scenario
    from dlcluster_gym.scheduler import make_policy, parse_policy_args
    from dlcluster_gym.sim.engine import Engine

    params = parse_policy_args(policy_args)
    if out is not None:
        prepare_out_file(out, "--out")
    spec: str | dict = scenario
    if contention:
        spec = {**load_scenario(scenario).model_dump(), "contention": True}
    cfg, cluster, job_list, rng = prepare(spec, seed=seed, traces_dir=traces_dir)
    if jobs:
        job_list = job_list[:jobs]
    engine = Engine(cfg, cluster, job_list, make_policy(policy, **params), rng)
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    res = engine.run()
    prof.disable()
    wall = time.perf_counter() - t0
    s = res.summary
    click.echo(
        f"{scenario}:{policy} jobs={len(job_list)} wall={wall:.1f}s (profiled) "
        f"events={s['sim_events']} avg_jct={s['avg_jct_s']:.6g} preemptions={s['preemptions']}"
    )
    stats = pstats.Stats(prof)
    if out is not None:
        stats.dump_stats(str(out))
    stats.strip_dirs().sort_stats(sort).print_stats(top)


COMMANDS = (profile,)
