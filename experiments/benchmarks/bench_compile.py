"""First-run compilation of the numba kernels: how long the first ``reset()`` of a
link-sharing scenario takes with an empty kernel cache (compiling) and with a filled one
(loading), each in a fresh single-threaded process, wall and CPU seconds.

Usage: python experiments/benchmarks/bench_compile.py [--scenario NAME] [--repeat N] [--out FILE]

The cache is a temporary folder (``NUMBA_CACHE_DIR``), so the machine's own cache is neither
used nor touched. ``--out`` keeps the printed table as a markdown page
(``experiments/results/performance/compile.md``, included by docs/performance.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from bench_out import markdown_copy  # a neighbour script

CHILD = """
import json, resource, sys, time
t0 = time.perf_counter()
import gymnasium as gym
import dlcluster_gym  # noqa: F401  (registers the envs)
env = gym.make("DLCluster/Scheduler-v2", scenario=sys.argv[1])
t1 = time.perf_counter()
env.reset(seed=0)
t2 = time.perf_counter()
cpu = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"import_make_s": t1 - t0, "reset_s": t2 - t1,
                  "cpu_s": cpu.ru_utime + cpu.ru_stime}))
"""


def _child(scenario: str, cache: str) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": cache, "NUMBA_NUM_THREADS": "1",
           "OMP_NUM_THREADS": "1"}  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", CHILD, scenario], env=env, capture_output=True, text=True
    )
    if out.returncode:
        raise SystemExit(f"bench_compile: the child process failed:\n{out.stderr.strip()}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scenario", default="cassini-testbed-poisson",
                    help="a link-sharing scenario (default: %(default)s)")  # fmt: skip
    ap.add_argument("--repeat", type=int, default=1, help="cold/warm pairs (default: 1)")
    ap.add_argument("--out", help="also write the table to this markdown file")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error(f"--repeat must be at least 1, got {args.repeat}")
    cold, warm = [], []
    with markdown_copy(args.out, "First-run compilation of the kernels"):
        for i in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="dlcluster-numba-") as cache:
                cold.append(_child(args.scenario, cache))
                warm.append(_child(args.scenario, cache))
            print(f"pair {i + 1}/{args.repeat} done", file=sys.stderr, flush=True)
        print(f"# First `reset()` of `DLCluster/Scheduler-v2` on `{args.scenario}` in a fresh "
              f"process, median of {args.repeat} (an empty kernel cache compiles every kernel; "
              "a filled one loads them).")  # fmt: skip
        print("| kernel cache | first reset, wall s | process CPU s | import + make, wall s |")
        print("|---|---:|---:|---:|")
        for label, runs in (("empty (compiles)", cold), ("filled (loads)", warm)):
            med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
            print(f"| {label} | {med['reset_s']:.1f} | {med['cpu_s']:.1f} | "
                  f"{med['import_make_s']:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
