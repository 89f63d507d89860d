"""Scaling curve: wall time and peak memory of generated workloads as jobs and GPUs grow.

Replays 1k, 10k, 100k and 1M Dally-style Poisson jobs (offered load 0.9, the
``dally-poisson-*`` generator) on 512, 4,096 and 16,384 GPUs (8, 64 and 256 racks of the
``dally-8rack`` layout: 8 machines x 8 A100s per rack) under ``fcfs`` and ``dally``.

Each cell runs in its own single-threaded process, so its peak memory (``ru_maxrss``) is its
own; ``base MB`` is that process's resident size after imports, before the workload is built.
A cell that passes ``--timeout`` CPU seconds is reported as ``>S`` and the larger job counts
of that (policy, GPUs) row are skipped. ``sim s`` is wall time, ``CPU s`` the process's CPU
time (the figure to compare on a shared machine); ``us/job`` is CPU microseconds per job.

Usage: python experiments/benchmarks/bench_scaling.py [--jobs 1000 10000 ...] [--gpus 512 4096 ...]
       [--policies fcfs dally] [--timeout S] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import yaml
from bench_out import markdown_copy  # a neighbour script

JOBS = (1_000, 10_000, 100_000, 1_000_000)
GPUS = (512, 4_096, 16_384)
POLICIES = ("fcfs", "dally")
GPUS_PER_RACK = 64
CLUSTER_YAML = Path(__file__).resolve().parents[2] / "configs" / "clusters" / "dally-8rack.yaml"
ONE_CORE = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}


def _rss_mb() -> float:
    # ru_maxrss is KiB on Linux, bytes on macOS.
    scale = 1 / 1024 if sys.platform != "darwin" else 1 / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def scenario(jobs: int, gpus: int) -> dict:
    """The generated scenario for ``jobs`` on ``gpus`` (a multiple of 64)."""
    if gpus % GPUS_PER_RACK:
        raise SystemExit(f"--gpus: {gpus} is not a multiple of {GPUS_PER_RACK} (8 x 8 per rack)")
    cluster = yaml.safe_load(CLUSTER_YAML.read_text())
    cluster.update(name=f"dally-{gpus // GPUS_PER_RACK}rack", racks=gpus // GPUS_PER_RACK)
    return {
        "name": f"scaling-{jobs}jobs-{gpus}gpu",
        "cluster": cluster,
        "workload": {"kind": "dally", "num_jobs": jobs, "arrival": "poisson", "load": 0.9},
        "seed": 1,
    }


def run_once(jobs: int, gpus: int, policy: str) -> dict:
    """One cell in this process (what ``--once`` prints)."""
    from dlcluster_gym.api import prepare
    from dlcluster_gym.scheduler import make_policy
    from dlcluster_gym.sim.engine import Engine

    base = _rss_mb()
    t0 = time.perf_counter()
    cfg, cluster, job_list, rng = prepare(scenario(jobs, gpus))
    load_s = time.perf_counter() - t0
    engine = Engine(cfg, cluster, job_list, make_policy(policy), rng)
    t1, c1 = time.perf_counter(), time.process_time()
    res = engine.run()
    sim_s = time.perf_counter() - t1
    cpu_s = time.process_time() - c1
    s = res.summary
    return {
        "policy": policy,
        "jobs": jobs,
        "gpus": gpus,
        "load_s": round(load_s, 2),
        "sim_s": round(sim_s, 2),
        "cpu_s": round(cpu_s, 2),
        "us_per_job": round(cpu_s / jobs * 1e6, 1),
        "events": s["sim_events"],
        "peak_mb": round(_rss_mb()),
        "base_mb": round(base),
        "avg_jct_s": s["avg_jct_s"],
        "jobs_completed": s["jobs_completed"],
    }


def cell(jobs: int, gpus: int, policy: str, timeout: float) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--once", f"{jobs}:{gpus}:{policy}"]
    limit = max(1, math.ceil(timeout))
    try:
        out = subprocess.run(
            cmd,
            env={**os.environ, **ONE_CORE},
            capture_output=True,
            text=True,
            timeout=6 * timeout,  # the CPU limit below is the real one; this guards a stall
            check=False,
            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CPU, (limit, limit + 5)),
        )
    except subprocess.TimeoutExpired:
        return {"policy": policy, "jobs": jobs, "gpus": gpus, "timeout_s": timeout}
    if out.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return {"policy": policy, "jobs": jobs, "gpus": gpus, "timeout_s": timeout}
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if out.returncode != 0 or not lines:
        err = (out.stderr.strip().splitlines() or ["no output"])[-1]
        return {"policy": policy, "jobs": jobs, "gpus": gpus, "error": err}
    return json.loads(lines[-1])


def _row(r: dict) -> str:
    head = f"| {r['policy']} | {r['gpus']:,} | {r['jobs']:,} |"
    if "timeout_s" in r:
        return f"{head} > {r['timeout_s']:g} | | | | | |"
    if "error" in r:
        return f"{head} error: {r['error']} | | | | | |"
    return (
        f"{head} {r['sim_s']:.1f} | {r['cpu_s']:.1f} | {r['load_s']:.1f} | {r['us_per_job']:.0f} | "
        f"{r['events']:,} | {r['peak_mb']:,} ({r['base_mb']}) |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, nargs="*", default=list(JOBS))
    ap.add_argument("--gpus", type=int, nargs="*", default=list(GPUS))
    ap.add_argument("--policies", nargs="*", default=list(POLICIES))
    ap.add_argument("--timeout", type=float, default=600.0, help="CPU seconds per cell")
    ap.add_argument("--json", action="store_true", help="one JSON object per cell")
    ap.add_argument("--out", metavar="FILE", help="also write the output as a markdown page")
    ap.add_argument("--once", metavar="JOBS:GPUS:POLICY", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.once:
        jobs, gpus, policy = args.once.split(":")
        print(json.dumps(run_once(int(jobs), int(gpus), policy)))
        return
    with markdown_copy(args.out, "Scaling with jobs and cluster size"):
        table(args)


def table(args: argparse.Namespace) -> None:
    """One row per policy x GPUs x jobs (a row stops at its first timeout or error)."""
    print(
        f"# numpy {np.__version__}; one single-threaded process per cell; load average "
        f"{os.getloadavg()[0]:.1f} at the start."
    )
    if not args.json:
        print(
            "| policy | GPUs | jobs | sim s | CPU s | load s | us/job | events | peak MB (base) |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for policy in args.policies:
        for gpus in args.gpus:
            for jobs in sorted(args.jobs):
                r = cell(jobs, gpus, policy, args.timeout)
                print(json.dumps(r) if args.json else _row(r), flush=True)
                if "timeout_s" in r or "error" in r:
                    break  # larger job counts of this row would only take longer
    print(f"# Load average {os.getloadavg()[0]:.1f} at the end.")


if __name__ == "__main__":
    main()
