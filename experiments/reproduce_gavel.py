"""Reproduce Gavel's heterogeneity-aware vs heterogeneity-agnostic comparison (OSDI'20,
section 7, continuous-single trace): average JCT against the input job rate.

The scenario is ``gavel-continuous-single`` (1-GPU jobs, durations of 10^x minutes on a V100,
Poisson arrivals, 36 V100 + 36 P100 + 36 K80, no network, 6-minute rounds). Each policy runs
with the GPU types profiled as the engine runs them (``gavel-las``; with ``--policies``
also ``gavel-ftf-history``) and with every type profiled at the V100's speed (the
``-agnostic`` variants). As in Gavel's
evaluation, the average JCT is over a window of job ids in steady state (``--window``).

Writes, under --out (default experiments/results/gavel/):
  runs.csv         per rate, seed and policy: windowed average JCT, makespan, wall time
  jct_vs_rate.png  windowed average JCT against the input job rate (Gavel Fig. 8's axes)
  report.md        the table per rate and the claims table (experiments/claims.py)

Usage: python experiments/reproduce_gavel.py [--rates 1 2 3 4 5 6] [--seeds 1 2] [--workers 2]
       python experiments/reproduce_gavel.py --report-only   (report.md from runs.csv)
"""

from __future__ import annotations

import argparse
import math
import os
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from claims import Claim, claims_section, up_to  # experiments/ is on sys.path
from tqdm import tqdm

from dlcluster_gym import simulate
from dlcluster_gym.config import ScenarioConfig, load_scenario
from dlcluster_gym.workers import die_with_parent

SCENARIO = "gavel-continuous-single"
PAIRS = {"gavel-las": "gavel-las-agnostic", "gavel-ftf-history": "gavel-ftf-history-agnostic"}
POLICIES = tuple(p for pair in PAIRS.items() for p in pair)
# Gavel's Figure 8 (continuous-single) is max-min fairness; finish-time fairness (its
# Figure 10, on multi-GPU jobs) is optional here: its bisection over LPs at every round
# makes a run several minutes long.
DEFAULT_POLICIES = ("gavel-las", "gavel-las-agnostic")
RATES = (1.0, 2.0, 3.0, 4.0, 5.0, 6.0)  # jobs per hour (Gavel Fig. 8: 0.4 to 6.0)
SEEDS = (1, 2)
JOBS = 1000
WINDOW = (200, 800)  # job ids measured: after the cluster fills, before arrivals stop
OUT = Path(__file__).resolve().parent / "results" / "gavel"


def scenario(rate: float, jobs: int) -> ScenarioConfig:
    """The scenario at ``rate`` jobs/hour with ``jobs`` jobs."""
    sc = load_scenario(SCENARIO)
    wl = sc.workload.model_copy(update={"rate_per_hour": rate, "num_jobs": jobs})
    return sc.model_copy(update={"workload": wl})


def run(policy: str, rate: float, seed: int, jobs: int, window: tuple[int, int]) -> dict:
    """One run: ``policy`` on the scenario at ``rate`` jobs/hour with ``jobs`` jobs."""
    res = simulate(scenario(rate, jobs), policy, seed)
    ids = np.asarray(res.jobs["job_id"])
    jct = np.asarray(res.jobs["jct_s"], dtype=np.float64)
    sel = (ids >= window[0]) & (ids < window[1])
    return {
        "policy": policy,
        "rate_per_hour": rate,
        "seed": seed,
        "window_first": window[0],
        "window_end": window[1],
        "window_avg_jct_h": float(np.nanmean(jct[sel])) / 3600.0,
        "avg_jct_h": float(res.summary["avg_jct_s"]) / 3600.0,
        "makespan_h": float(res.summary["makespan_s"]) / 3600.0,
        "jobs_completed": int(res.summary["jobs_completed"]),
        "wall_s": float(res.summary["wall_s"]),
    }


def run_all(args: argparse.Namespace) -> pd.DataFrame:
    plan = [(p, r, s) for r in args.rates for s in args.seeds for p in args.policies]
    window = (args.window[0], args.window[1])
    if args.workers == 1:
        rows = [run(p, r, s, args.jobs, window) for p, r, s in tqdm(plan, desc="gavel runs")]
        return pd.DataFrame(rows)
    with ProcessPoolExecutor(
        args.workers, initializer=die_with_parent, initargs=(os.getpid(),)
    ) as pool:
        futures = [pool.submit(run, p, r, s, args.jobs, window) for p, r, s in plan]
        rows = [f.result() for f in tqdm(futures, desc="gavel runs", unit="run")]
    return pd.DataFrame(rows)


def ratios(df: pd.DataFrame) -> dict[str, float]:
    """Per (pair, rate): the agnostic policy's windowed average JCT over the aware one's
    (mean over seeds of each), as a gain in % ((ratio - 1) x 100)."""
    mean = df.groupby(["policy", "rate_per_hour"])["window_avg_jct_h"].mean()
    out = {}
    for aware, agnostic in PAIRS.items():
        for rate in sorted(df["rate_per_hour"].unique()):
            if (aware, rate) in mean.index and (agnostic, rate) in mean.index:
                label = (
                    f"{aware.removeprefix('gavel-').removesuffix('-history').upper()} {rate:g}/h"
                )
                out[label] = (mean[(agnostic, rate)] / mean[(aware, rate)] - 1.0) * 100.0
    return out


def _window(df: pd.DataFrame) -> tuple[int, int]:
    return int(df["window_first"].iloc[0]), int(df["window_end"].iloc[0])


def plot(df: pd.DataFrame, out: Path) -> None:
    first, end = _window(df)
    mean = df.groupby(["policy", "rate_per_hour"])["window_avg_jct_h"].mean().unstack(0)
    fig, ax = plt.subplots(figsize=(6, 4))
    for policy in mean.columns:
        style = "--" if policy.endswith("-agnostic") else "-"
        ax.plot(mean.index, mean[policy], style, marker="o", label=policy)
    ax.set_xlabel("input job rate (jobs/hour)")
    ax.set_ylabel(f"average JCT of jobs {first}-{end - 1} (hours)")
    ax.set_title(f"{SCENARIO} (mean over seeds)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "jct_vs_rate.png", dpi=120)
    plt.close(fig)


def command_line(args: argparse.Namespace) -> str:
    command = "python experiments/reproduce_gavel.py"
    for flag, value, default in (
        ("--rates", args.rates, list(RATES)),
        ("--seeds", args.seeds, list(SEEDS)),
        ("--policies", args.policies, list(DEFAULT_POLICIES)),
        ("--window", args.window, list(WINDOW)),
    ):
        if list(value) != default:
            command += f" {flag} " + " ".join(f"{v:g}" if isinstance(v, float) else str(v)
                                              for v in value)  # fmt: skip
    if args.jobs != JOBS:
        command += f" --jobs {args.jobs}"
    return command


def write_report(df: pd.DataFrame, out: Path, command: str) -> str:
    g = df.groupby(["rate_per_hour", "policy"])
    stats = g["window_avg_jct_h"].agg(["mean", "std", "count"]).reset_index()
    seeds = sorted(df["seed"].unique())
    first, end = _window(df)
    lines = [
        "# Gavel: heterogeneity-aware vs heterogeneity-agnostic policies",
        "",
        f"Generated by `{command}`; the {len(df)} runs took {df['wall_s'].sum():.0f} s in "
        "all (wall time per run, summed)."
        + f" Scenario `{SCENARIO}` with {int(df['jobs_completed'].max())} jobs per run, "
        f"seeds {', '.join(map(str, seeds))}; the average JCT is over jobs "
        f"{first}-{end - 1} (after the first arrivals fill the cluster, before arrivals "
        "stop), in hours, mean over seeds. "
        "Job speeds per GPU type come from the engine's model (docs/concepts.md, 'GPU "
        "types'), fitted to Gavel's measured throughputs, not from GPUs.",
        "",
        "![average JCT against the input job rate](jct_vs_rate.png)",
        "",
        "| rate (jobs/h) | policy | avg JCT (h) | std over seeds (h) |",
        "|---:|---|---:|---:|",
    ]
    for r in stats.itertuples():
        std = "-" if r.count < 2 or not math.isfinite(r.std) else f"{r.std:.1f}"
        lines.append(f"| {r.rate_per_hour:g} | `{r.policy}` | {r.mean:.1f} | {std} |")
    claims = [
        Claim(
            "Abstract and 7: heterogeneity-aware policies improve average JCT by up to 3.5x "
            "over heterogeneity-agnostic ones (Gavel's own continuous-single data: LAS "
            "96.0 h vs 29.0 h at 5.6 jobs/h, 3.3x); gain = (agnostic / aware - 1) x 100",
            up_to(250.0),
            ratios(df),
            "`gavel-las` vs `gavel-las-agnostic` (and `gavel-ftf-history` vs "
            "`gavel-ftf-history-agnostic` where run) on `gavel-continuous-single`, per input "
            "rate",
            reason="the gain falls with the input rate here, where Gavel's grows until "
            "agnostic LAS breaks down: our runs hold 1,000 jobs and measure jobs 200-799, not "
            "the steady state of Gavel's longer stream (it measures jobs 4000-5000), so the "
            "backlog of long jobs that overwhelms the agnostic policy does not build (every "
            "run here ends; at 6 jobs/h the agnostic makespan is 1.7-2.0x the aware one). At "
            "low rates the agnostic LP, seeing every type alike, leaves jobs on K80s and "
            "P100s while V100s idle. Runs of Gavel's length (--jobs 5000 --window 4000 "
            "5000) were not made: hours on 2 cores",
        )
    ]
    lines += ["", *claims_section("Claims (section 7): paper vs ours", "", claims)]
    text = "\n".join(lines) + "\n"
    (out / "report.md").write_text(text)
    return text


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", type=float, nargs="+", default=list(RATES))
    ap.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    ap.add_argument("--policies", nargs="+", default=list(DEFAULT_POLICIES), choices=POLICIES)
    ap.add_argument("--jobs", type=int, default=JOBS, help="jobs per run")
    ap.add_argument("--window", type=int, nargs=2, default=list(WINDOW), metavar=("FIRST", "END"))
    ap.add_argument("--workers", type=int, default=2, help="parallel runs (processes)")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--report-only", action="store_true", help="report.md from runs.csv")
    args = ap.parse_args(argv)
    if not 0 <= args.window[0] < args.window[1] <= args.jobs:
        ap.error(f"--window must be FIRST END with 0 <= FIRST < END <= --jobs, got {args.window}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.report_only:
        df = pd.read_csv(args.out / "runs.csv")
        args.rates = sorted(df["rate_per_hour"].unique().tolist())
        args.seeds = sorted(int(s) for s in df["seed"].unique())
        args.policies = [p for p in POLICIES if p in set(df["policy"])]
        args.window = list(_window(df))
        print(write_report(df, args.out, command_line(args)))
        return
    df = run_all(args)
    df.to_csv(args.out / "runs.csv", index=False)
    plot(df, args.out)
    print(write_report(df, args.out, command_line(args)))


if __name__ == "__main__":
    main()
