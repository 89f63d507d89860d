"""One torch thread for the agents' small networks, unless the user chose a thread count.

The agents' policies are 2 x 64 MLPs evaluated on one observation at a time (or mini-batches
of a few hundred): torch's default of one intra-op thread per core only adds synchronisation,
and on a shared 2-core machine it made MaskablePPO training several times slower
(docs/agents.md, "Training speed"). Every place in ``agents`` that builds or loads a model
calls :func:`use_one_thread` first.

The rule, in order:

1. ``DLCLUSTER_TORCH_THREADS=N`` set: N threads (a positive integer; anything else is an
   error).
2. ``OMP_NUM_THREADS`` (or ``MKL_NUM_THREADS``) set: torch already follows it; left alone.
3. ``torch.set_num_threads`` already called with a count other than torch's default: left
   alone. Torch does not record such a call, so it is recognised by the intra-op count
   differing from the inter-op one (both start at the same default, and only the intra-op
   count follows ``torch.set_num_threads``); a call with exactly the default count cannot be
   told apart and is overridden (use ``DLCLUSTER_TORCH_THREADS`` to keep it).
4. Otherwise one thread.

It also turns off ``torch.distributions``' argument checks (:func:`skip_distribution_checks`):
a masked PPO policy builds one categorical distribution per action head at every step, and
checking their logits took a fifth of MaskablePPO's rollout time on the Scheduler env. The
checks only raise on invalid parameters (NaN logits of a diverged network); they change no
number, so training and evaluation give the same results with them off (tested).
"""

from __future__ import annotations

import os

from dlcluster_gym.errors import ConfigError

THREADS_ENV = "DLCLUSTER_TORCH_THREADS"
"""Environment variable that sets the agents' torch thread count explicitly."""
_TORCH_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def _requested() -> int | None:
    raw = os.environ.get(THREADS_ENV, "").strip()
    if not raw:
        return None
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise ConfigError(f"{THREADS_ENV} must be a positive integer, got {raw!r}")
    return n


def skip_distribution_checks() -> None:
    """Turn off the argument checks of every ``torch.distributions`` object built from now
    on in this process (``Distribution.set_default_validate_args(False)``)."""
    import torch

    torch.distributions.Distribution.set_default_validate_args(False)


def use_one_thread() -> int:
    """Set torch's intra-op thread count by the rule above (one thread unless the user chose
    otherwise) and skip the distributions' argument checks; returns the thread count in
    effect."""
    import torch

    skip_distribution_checks()

    requested = _requested()
    if requested is not None:
        if torch.get_num_threads() != requested:
            torch.set_num_threads(requested)
        return requested
    if any(os.environ.get(k, "").strip() for k in _TORCH_ENV):
        return torch.get_num_threads()
    current = torch.get_num_threads()
    if current != torch.get_num_interop_threads():  # chosen by the user (or set to 1 before)
        return current
    if current != 1:
        torch.set_num_threads(1)
    return 1
