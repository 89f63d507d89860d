"""Run the documented training examples and keep what they print as markdown pages that
docs/agents.md includes, so the figures quoted beside the examples come from a run.

Usage:
  python experiments/agents/example_results.py first-script   # examples/train_scheduler.py
  python experiments/agents/example_results.py rllib          # the RLlib example, 8192 steps

Pages: ``experiments/results/agents/example_train_scheduler.md`` and
``experiments/results/agents/example_rllib.md`` (``--out`` to write elsewhere).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from bench_out import markdown_copy

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "experiments" / "results" / "agents"
RLLIB_SEEDS = (101, 102)


def _example(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def first_script() -> None:
    """``examples/train_scheduler.py`` with its defaults: held-out average JCTs."""
    import time

    t0 = time.perf_counter()
    got = _example("train_scheduler").main()
    wall = time.perf_counter() - t0
    print("# `examples/train_scheduler.py` with its defaults (held-out seeds 101-103 of its "
          f"env; average JCT in hours), {wall:.0f} s of wall time.")  # fmt: skip
    print("| random | teacher (`las-slots`) | cloned | after PPO | clone's agreement |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {got['random']:.2f} h | {got['las-slots']:.2f} h | {got['cloned']:.2f} h | "
          f"{got['after PPO']:.2f} h | {got['agreement']:.3f} |")  # fmt: skip


def rllib(timesteps: int) -> None:
    """The RLlib example's defaults for ``timesteps`` steps, beside the masked random policy
    on the same held-out seeds."""
    import gymnasium as gym

    from dlcluster_gym.agents import rllib_example
    from dlcluster_gym.agents.imitation import average_jct_h

    seeds = ",".join(map(str, RLLIB_SEEDS))
    with contextlib.redirect_stdout(io.StringIO()):  # its own summary: the table below
        s = rllib_example.main(["--timesteps", str(timesteps), "--held-out-seeds", seeds])
    env = gym.make(s["env_id"], **s["env_kwargs"])
    rand = average_jct_h(env, "random", list(RLLIB_SEEDS))
    print(f"# `python -m dlcluster_gym.agents.rllib_example --timesteps {timesteps}` (env "
          f"`{s['env_id']}`, `{s['env_kwargs']['scenario']}`, 2 env runners x 2 envs; average "
          f"JCT on held-out seeds {seeds}).")  # fmt: skip
    print("| env steps | iterations | training wall s | env steps/s | agent avg JCT | "
          "masked random avg JCT |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|---:|")
    print(f"| {s['timesteps']} | {s['iterations']} | {s['train_wall_s']:.1f} | "
          f"{s['steps_per_s']:.0f} | {s['held_out_avg_jct_h']:.2f} h | {rand:.2f} h |")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("which", choices=("first-script", "rllib"))
    ap.add_argument("--timesteps", type=int, default=8192, help="rllib: env steps")
    ap.add_argument("--out", help="markdown page (default: experiments/results/agents/...)")
    args = ap.parse_args()
    if args.timesteps < 1:
        ap.error(f"--timesteps must be positive, got {args.timesteps}")
    name = {"first-script": "example_train_scheduler", "rllib": "example_rllib"}[args.which]
    out = args.out or str(RESULTS / f"{name}.md")
    title = {"first-script": "A first training script", "rllib": "RLlib example"}[args.which]
    with markdown_copy(out, title):
        if args.which == "first-script":
            first_script()
        else:
            rllib(args.timesteps)
    print(f"wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
