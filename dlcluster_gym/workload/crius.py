"""The model mix of Crius workloads (Crius 8.1): which large models a job draws, by weight.

Crius draws each job's model from Table 2 (Wide-ResNet, BERT, MoE) at random; Fig. 15 shows
the size mix, which the text does not give. Ours: a family uniformly, then a size with
weights that fall with size (``DEFAULT_SIZE_WEIGHTS``: small models dominate, as in a
production mix); or uniform over a workload's ``models`` / ``model_weights``. The jobs
themselves (GPU amount and type, length) depend on the cluster and the parallelism plans and
are built by ``dlcluster_gym.scenario.crius``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dlcluster_gym.errors import ConfigError, UnknownNameError
from dlcluster_gym.workload.large_models import FAMILIES, LARGE_MODELS, parse_large_model

# Per family, weights of its sizes from the smallest up (normalised per family).
DEFAULT_SIZE_WEIGHTS = (0.35, 0.25, 0.2, 0.12, 0.08)


def default_model_mix() -> tuple[tuple[str, ...], np.ndarray]:
    """(model names, probabilities): families uniform, sizes by ``DEFAULT_SIZE_WEIGHTS``."""
    names: list[str] = []
    probs: list[float] = []
    for fam in FAMILIES:
        sizes = sorted(
            (m for m in LARGE_MODELS.values() if m.family == fam), key=lambda m: m.params
        )
        w = np.asarray(DEFAULT_SIZE_WEIGHTS[: len(sizes)])
        w = w / w.sum() / len(FAMILIES)
        names += [m.name for m in sizes]
        probs += w.tolist()
    return tuple(names), np.asarray(probs)


def model_mix(
    models: Sequence[str] | None, model_weights: Sequence[float] | None = None
) -> tuple[tuple[str, ...], np.ndarray]:
    """(model names, probabilities) of a workload's ``models`` and ``model_weights`` (uniform
    when no weights are given); the default mix when ``models`` is None."""
    if models is None:
        return default_model_mix()
    names = tuple(models)
    if not names:
        raise ConfigError("crius workload: models must not be empty")
    for name in names:
        try:
            parse_large_model(name)
        except UnknownNameError as exc:
            raise ConfigError(f"crius workload models: {exc}") from None
    w = np.ones(len(names)) if model_weights is None else np.asarray(model_weights)
    if w.size != len(names):
        raise ConfigError(
            f"crius workload: model_weights has {w.size} entries for {len(names)} models"
        )
    return names, w / w.sum()


def choice_probs(values: Sequence, weights: Sequence[float] | None, field: str) -> np.ndarray:
    """Probabilities of ``values`` from their ``weights`` (uniform when None); ``field`` names
    the weights in the error for a length mismatch."""
    if weights is None:
        return np.full(len(values), 1.0 / len(values))
    w = np.asarray(weights, dtype=np.float64)
    if w.size != len(values):
        raise ConfigError(f"crius workload: {field} has {w.size} entries for {len(values)} values")
    return w / w.sum()


def next_pow2(n: int) -> int:
    """The smallest power of two >= ``n`` (1 for ``n`` <= 1)."""
    return 1 << max(int(n) - 1, 0).bit_length()
