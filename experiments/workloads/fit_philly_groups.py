"""Fit the VC part of the generators' ``groups`` option to Philly, and measure Philly's signal.

Usage: python experiments/workloads/fit_philly_groups.py [--traces-dir DIR] [--out PAGE]

Reads Pollux's Philly trace (its ``cluster`` column is the virtual cluster, VC) and, for two
populations of jobs (the Dally fit's filter, whose constants the generators use, and every
job), prints and writes to ``experiments/results/workload/philly_groups.md``:

- the VC job shares (VCs with fewer than ``--min-vc-jobs`` jobs dropped);
- the share of the variance of the normal scores of log(duration) explained by the VC and by
  (VC, GPU count): in sample (eta^2), bias-corrected ((SS_b - (k - 1) MS_w) / SS_t, the
  figure ``r_vc`` is set to) and the one-way random-effects ICC; the corrected VC share on the
  first and second halves of the trace in time; the out-of-sample R^2 of log(duration) of the
  (VC, GPUs) means of the first half on the second;
- the Spearman correlation with the true duration of a predictor a scheduler could run: the
  mean duration of the 20 jobs of the same (VC, GPUs), or the same VC, that finished most
  recently before the job was submitted (arrival + duration < its submission), in arrival
  order; over the jobs that have at least one such finished job (coverage).

Philly has no users or job names, so the group effect (``r_group``) cannot be fitted here.
The literals to paste into ``dlcluster_gym/workload/groups.py`` are printed at the end.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats

from dlcluster_gym.cluster.topology import Cluster
from dlcluster_gym.config import WorkloadGroups
from dlcluster_gym.scenario.sizing import iteration_time_s, size_jobs
from dlcluster_gym.workload import traces as tr
from dlcluster_gym.workload.generators import FIT_MAX_GPUS, FIT_MIN_DURATION_S, dally_jobs
from dlcluster_gym.workload.groups import (
    DEFAULT_HABIT,
    DEFAULT_P_NEW_GROUP,
    DEFAULT_R_GROUP,
    DEFAULT_USERS_PER_VC,
    PHILLY_MIN_VC_JOBS,
    PHILLY_R_VC,
    HistoryAgg,
    VarianceShare,
    history_predictor,
    normal_scores,
    variance_share,
)
from dlcluster_gym.workload.profiles import model_profile

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "experiments" / "results" / "workload" / "philly_groups.md"
HISTORY = 20  # finished jobs per key the predictor averages
GENERATED_JOBS = 20_000  # jobs of the generated workload measured for comparison
AGGS: tuple[HistoryAgg, ...] = ("mean", "median", "geomean")


@dataclass(frozen=True)
class PhillyGroupsFit:
    """What :func:`fit_philly_groups` measures on one population of Philly jobs."""

    population: str
    num_jobs: int  # jobs in the population, before dropping small VCs
    dropped_jobs: int  # jobs of VCs with fewer than min_vc_jobs jobs
    vc_ids: tuple[str, ...]  # kept VCs, largest first
    vc_jobs: tuple[int, ...]
    vc_shares: tuple[float, ...]
    by_vc: VarianceShare  # normal scores of log(duration) by VC
    by_vc_gpus: VarianceShare  # normal scores of log(duration) by (VC, GPUs)
    by_vc_halves: tuple[float, float]  # by_vc.corrected on the first / second half in time
    oos_r2_vc_gpus: float  # log(duration), (VC, GPUs) means of the first half -> second half
    # Spearman with the true duration of the latest-20-finished predictor, by key ("VC, GPUs"
    # or "VC") and aggregation (AGGS); coverage: fraction of jobs with a finished job of its key
    spearman: dict[tuple[str, str], float]
    coverage: dict[str, float]


def _spearman(pred: np.ndarray, truth: np.ndarray) -> tuple[float, float]:
    """Spearman of ``pred`` with ``truth`` where ``pred`` is defined, and that fraction."""
    ok = np.isfinite(pred)
    if ok.sum() < 3:
        return float("nan"), float(ok.mean())
    return float(stats.spearmanr(pred[ok], truth[ok]).statistic), float(ok.mean())


def _oos_r2(y: np.ndarray, keys: Sequence[object], train: np.ndarray) -> float:
    """R^2 on the jobs not in ``train`` of the per-key means of ``y`` over ``train`` (a key
    unseen in ``train``: the overall mean of ``train``)."""
    sums: dict[object, list[float]] = {}
    for i in np.flatnonzero(train).tolist():
        s = sums.setdefault(keys[i], [0.0, 0.0])
        s[0] += float(y[i])
        s[1] += 1.0
    base = float(y[train].mean())
    test = np.flatnonzero(~train)
    pred = np.array([sums[keys[i]][0] / sums[keys[i]][1] if keys[i] in sums else base
                     for i in test.tolist()])  # fmt: skip
    yt = y[test]
    return 1.0 - float(((yt - pred) ** 2).sum()) / float(((yt - yt.mean()) ** 2).sum())


def fit_philly_groups(
    traces_dir: str | Path | None = None,
    population: str = "dally",
    min_vc_jobs: int = PHILLY_MIN_VC_JOBS,
) -> PhillyGroupsFit:
    """Philly's per-VC duration statistics on ``population``: ``"dally"`` the Dally fit's
    filter (num_gpus >= 2, duration >= 600 s, demands rounded up to a power of two, at most
    64 GPUs), ``"all"`` every job (raw GPU counts)."""
    jobs = tr.load_philly(tr.PHILLY_CSV, traces_dir)
    if jobs.vcs is None:
        raise SystemExit(f"{jobs.path}: no `cluster` (VC) column")
    gpus, dur, arr = jobs.num_gpus.astype(np.int64), jobs.duration_s, jobs.arrival_s
    vcs = np.asarray(jobs.vcs, dtype=object)
    if population == "dally":
        gpus = np.exp2(np.ceil(np.log2(gpus))).astype(np.int64)
        keep = (jobs.num_gpus >= 2) & (dur >= FIT_MIN_DURATION_S) & (gpus <= FIT_MAX_GPUS)
    elif population == "all":
        keep = np.ones(dur.size, dtype=bool)
    else:
        raise ValueError(f"population must be 'dally' or 'all', got {population!r}")
    gpus, dur, arr, vcs = gpus[keep], dur[keep], arr[keep], vcs[keep]
    count = Counter(vcs.tolist())
    big = np.array([count[v] >= min_vc_jobs for v in vcs.tolist()], dtype=bool)
    num_jobs, dropped = int(keep.sum()), int((~big).sum())
    gpus, dur, arr, vcs = gpus[big], dur[big], arr[big], vcs[big]
    ranked = sorted(((c, v) for v, c in count.items() if c >= min_vc_jobs), reverse=True)
    vc_jobs = tuple(c for c, _ in ranked)
    total = sum(vc_jobs)
    z = normal_scores(np.log(dur))
    cell = [(v, int(g)) for v, g in zip(vcs.tolist(), gpus.tolist(), strict=True)]
    order = np.argsort(arr, kind="stable")
    first = np.zeros(dur.size, dtype=bool)
    first[order[: dur.size // 2]] = True
    halves = [
        variance_share(normal_scores(np.log(dur[m])), vcs[m].tolist()).corrected
        for m in (first, ~first)
    ]
    spearman: dict[tuple[str, str], float] = {}
    coverage: dict[str, float] = {}
    for key, labels in (("VC, GPUs", cell), ("VC", vcs.tolist())):
        for agg in AGGS:
            pred = history_predictor(arr, dur, labels, HISTORY, agg)
            spearman[key, agg], coverage[key] = _spearman(pred, dur)
    return PhillyGroupsFit(
        population=population,
        num_jobs=num_jobs,
        dropped_jobs=dropped,
        vc_ids=tuple(v for _, v in ranked),
        vc_jobs=vc_jobs,
        vc_shares=tuple(round(c / total, 4) for c in vc_jobs),
        by_vc=variance_share(z, vcs.tolist()),
        by_vc_gpus=variance_share(z, cell),
        by_vc_halves=(float(halves[0]), float(halves[1])),
        oos_r2_vc_gpus=_oos_r2(np.log(dur), cell, first),
        spearman=spearman,
        coverage=coverage,
    )


@dataclass(frozen=True)
class GeneratedCheck:
    """The same measures on a Dally workload generated with the default ``groups``."""

    num_jobs: int
    shares: dict[str, float]  # corrected variance share by "VC", "VC, GPUs", "group"
    spearman: dict[str, float]  # latest-20-finished predictor, geometric mean, by key


def check_generated(num_jobs: int = GENERATED_JOBS, seed: int = 1) -> GeneratedCheck:
    """Generate ``num_jobs`` Dally jobs with ``groups: {}`` (Poisson, load 0.9, dally-4rack)
    and measure them as the trace: a job's duration is its run time at packed consolidation,
    its finish time arrival + duration."""
    cluster = Cluster("dally-4rack")
    jobs = size_jobs(dally_jobs(num_jobs, cluster.num_gpus, np.random.default_rng(seed),
                                "poisson", groups=WorkloadGroups()), cluster)  # fmt: skip
    cache: dict[tuple[str, int], float] = {}
    dur = np.empty(len(jobs))
    for i, j in enumerate(jobs):
        key = (j.model, j.num_gpus)
        if key not in cache:
            cache[key] = iteration_time_s(model_profile(j.model), j.num_gpus, cluster)
        dur[i] = j.iterations * cache[key]
    arr = np.array([j.arrival_s for j in jobs])
    keys = {
        "VC": [j.vc for j in jobs],
        "VC, GPUs": [(j.vc, j.num_gpus) for j in jobs],
        "group": [j.job_name for j in jobs],
    }
    z = normal_scores(np.log(dur))
    return GeneratedCheck(
        num_jobs=len(jobs),
        shares={k: variance_share(z, v).corrected for k, v in keys.items()},
        spearman={
            k: _spearman(history_predictor(arr, dur, v, HISTORY, "geomean"), dur)[0]
            for k, v in keys.items()
        },
    )


POPULATIONS = {
    "dally": "Dally filter: >= 2 GPUs, >= 600 s, demands rounded up to a power of two, <= 64 GPUs",
    "all": "every job (raw GPU counts)",
}


def _share_row(name: str, s: VarianceShare) -> str:
    return f"| {name} | {s.num_groups} | {s.eta2:.3f} | {s.corrected:.3f} | {s.icc:.3f} |"


def report(
    fits: Sequence[PhillyGroupsFit], gen: GeneratedCheck, command: str, min_vc_jobs: int
) -> str:
    """The markdown page."""
    main = fits[0]
    out = [
        "# Philly's virtual clusters: duration signal and the fitted `groups` defaults",
        "",
        f"Written by `{command}`.",
        "",
        "Source: `pollux_adaptdl/traces/philly.csv` (its `cluster` column is the virtual "
        f"cluster, VC). VCs with fewer than {min_vc_jobs} jobs of a population are dropped.",
        "Variance shares are of the normal scores of log(duration): in sample (eta^2 = "
        "SS_between / SS_total), bias-corrected ((SS_between - (k - 1) MS_within) / SS_total, "
        "job-weighted: the figure `r_vc` is set to) and the one-way random-effects ICC (each "
        "VC weighted equally). The predictor is the mean (or median, or geometric mean) "
        f"duration of the {HISTORY} jobs of the same key that finished most recently before "
        "the job was submitted (arrival + duration < its submission), evaluated in arrival "
        "order over the jobs with at least one such job (coverage).",
        "",
    ]
    for f in fits:
        kept = sum(f.vc_jobs)
        out += [
            f"## Population: {POPULATIONS[f.population]}",
            "",
            f"{f.num_jobs:,} jobs; {len(f.vc_ids)} VCs kept ({kept:,} jobs), "
            f"{f.dropped_jobs:,} jobs of smaller VCs dropped.",
            "",
            "| VC | jobs | share |",
            "|---|---:|---:|",
            *(
                f"| `{v}` | {c:,} | {s:.4f} |"
                for v, c, s in zip(f.vc_ids, f.vc_jobs, f.vc_shares, strict=True)
            ),
            "",
            "| grouping | groups | eta^2 | corrected | ICC |",
            "|---|---:|---:|---:|---:|",
            _share_row("VC", f.by_vc),
            _share_row("(VC, GPUs)", f.by_vc_gpus),
            "",
            f"- VC share (corrected) on the first / second half in time: "
            f"{f.by_vc_halves[0]:.3f} / {f.by_vc_halves[1]:.3f}",
            f"- out-of-sample R^2 of log(duration), (VC, GPUs) means of the first half on the "
            f"second: {f.oos_r2_vc_gpus:.3f}",
            "",
            f"Spearman of the latest-{HISTORY}-finished predictor with the true duration:",
            "",
            "| key | coverage | " + " | ".join(AGGS) + " |",
            "|---|---:|" + "---:|" * len(AGGS),
            *(
                f"| ({k}) | {f.coverage[k]:.3f} | "
                + " | ".join(f"{f.spearman[k, a]:.3f}" for a in AGGS)
                + " |"
                for k in f.coverage
            ),
            "",
        ]
    out += [
        "## The `groups` defaults",
        "",
        f"Fitted (population: {POPULATIONS[main.population]}, the jobs whose marginal the "
        f"Dally generator reproduces): {len(main.vc_shares)} VCs with job shares "
        f"{', '.join(f'{s:.4f}' for s in main.vc_shares)}; `r_vc` = "
        f"{main.by_vc.corrected:.3f} (the code's defaults: `PHILLY_VC_SHARES`, `PHILLY_R_VC` "
        f"= {PHILLY_R_VC} in `dlcluster_gym/workload/groups.py`).",
        "",
        "Not fitted (Philly has no users or job names), modelling choices: `r_group` = "
        f"{DEFAULT_R_GROUP}, `p_new_group` = {DEFAULT_P_NEW_GROUP}, `users_per_vc` = "
        f"{DEFAULT_USERS_PER_VC}, `habit` = {DEFAULT_HABIT}.",
        "",
        "## A generated workload with these defaults",
        "",
        f"{gen.num_jobs:,} Dally-style jobs with `groups: {{}}` (Poisson at load 0.9 on "
        "`dally-4rack`, seed 1), measured as the trace (duration: run time at packed "
        "consolidation; finish: arrival + duration). The group share is what the VC and the "
        "recurring group explain together (`r_vc + r_group` by construction).",
        "",
        f"| key | variance share (corrected) | Spearman, latest-{HISTORY} geometric mean |",
        "|---|---:|---:|",
        *(f"| {k} | {gen.shares[k]:.3f} | {gen.spearman[k]:.3f} |" for k in gen.shares),
        "",
    ]
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces-dir", default=None, help="trace root (default: ../shared/traces)")
    ap.add_argument("--min-vc-jobs", type=int, default=PHILLY_MIN_VC_JOBS)
    ap.add_argument("--out", type=Path, default=PAGE, help="markdown page to write")
    args = ap.parse_args()
    fits = [fit_philly_groups(args.traces_dir, p, args.min_vc_jobs) for p in POPULATIONS]
    gen = check_generated()
    for f in fits:
        print(f"== {POPULATIONS[f.population]}")
        print(f"  jobs {f.num_jobs}, dropped {f.dropped_jobs}, VCs {len(f.vc_ids)}")
        print("  VC shares: " + ", ".join(
            f"{v} {s:.4f}" for v, s in zip(f.vc_ids, f.vc_shares, strict=True)))  # fmt: skip
        for name, s in (("VC", f.by_vc), ("(VC, GPUs)", f.by_vc_gpus)):
            print(f"  by {name}: eta2 {s.eta2:.3f}, corrected {s.corrected:.3f}, ICC {s.icc:.3f}")
        print(f"  VC corrected, halves: {f.by_vc_halves[0]:.3f} / {f.by_vc_halves[1]:.3f}")
        print(f"  out-of-sample R^2 (VC, GPUs): {f.oos_r2_vc_gpus:.3f}")
        for k, cov in f.coverage.items():
            aggs = ", ".join(f"{a} {f.spearman[k, a]:.3f}" for a in AGGS)
            print(f"  Spearman latest-{HISTORY} by ({k}), coverage {cov:.3f}: {aggs}")
    print(f"== generated: {gen.num_jobs} Dally jobs with groups: {{}}")
    for k in gen.shares:
        print(f"  by {k}: share {gen.shares[k]:.3f}, Spearman (geomean) {gen.spearman[k]:.3f}")
    main_fit = fits[0]
    print("\nLiterals for dlcluster_gym/workload/groups.py:")
    print(f"PHILLY_GROUPS_FIT_NUM_JOBS = {sum(main_fit.vc_jobs)}")
    print(f"PHILLY_VC_SHARES = {main_fit.vc_shares}")
    print(f"PHILLY_R_VC = {round(main_fit.by_vc.corrected, 3)}")
    argv = [Path(sys.argv[0]).as_posix(), *sys.argv[1:]]
    command = "python " + shlex.join(argv)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report(fits, gen, command, args.min_vc_jobs))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
