"""Occupancy renders: a text map (``ansi``) and a rack x machine x GPU image (``rgb_array``)."""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np

from dlcluster_gym.cluster.topology import Cluster

_SYMBOLS = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
CELL = 8  # pixels per GPU
GAP = 2  # pixels between machines and racks
FREE_RGB = (40, 40, 40)
BACKGROUND_RGB = (255, 255, 255)


def render_ansi(cluster: Cluster, owner: np.ndarray, now: float) -> str:
    """One line per machine, racks separated: ``.`` a free GPU, else the job id's last digit
    in base 62 (so neighbouring jobs usually differ)."""
    lines = [f"t={now:.0f}s  busy {int((owner >= 0).sum())}/{cluster.num_gpus} GPUs"]
    for r in range(cluster.num_racks):
        lines.append(f"rack {r}")
        for m in cluster.rack_machines(r).tolist():
            cells = "".join(
                "." if j < 0 else _SYMBOLS[j % len(_SYMBOLS)]
                for j in owner[cluster.machine_gpus(m)]
            )
            lines.append(f"  m{m:<4d} {cells}")
    return "\n".join(lines) + "\n"


def _colours(owner: np.ndarray) -> np.ndarray:
    """A stable colour per job id (golden-ratio hues), dark grey for free GPUs."""
    hue = (owner * 0.618033988749895) % 1.0
    h6 = hue * 6.0
    x = 1.0 - np.abs(h6 % 2.0 - 1.0)
    sector = h6.astype(np.int64)
    rgb = np.zeros((owner.size, 3))
    table = [(1, 0), (0, 1), (2, 0), (1, 2), (0, 2), (2, 1)]  # (full channel, x channel)
    for s, (full, part) in enumerate(table):
        sel = sector == s
        rgb[sel, full] = 1.0
        rgb[sel, part] = x[sel]
    out = (60 + 195 * rgb).astype(np.uint8)
    out[owner < 0] = FREE_RGB
    return out


def render_rgb(cluster: Cluster, owner: np.ndarray) -> np.ndarray:
    """An ``(H, W, 3)`` uint8 image: one row of cells per rack, machines side by side, one
    cell per GPU coloured by the job holding it."""
    mpr = int(cluster.rack_num_machines.max())
    gpm = cluster.max_gpus_per_machine
    width = mpr * (gpm * CELL + GAP) + GAP
    height = cluster.num_racks * (CELL + GAP) + GAP
    img = np.empty((height, width, 3), dtype=np.uint8)
    img[:] = BACKGROUND_RGB
    colours = _colours(owner)
    for r in range(cluster.num_racks):
        y = GAP + r * (CELL + GAP)
        for i, m in enumerate(cluster.rack_machines(r).tolist()):
            x0 = GAP + i * (gpm * CELL + GAP)
            for k, g in enumerate(cluster.machine_gpus(m).tolist()):
                x = x0 + k * CELL
                img[y : y + CELL - 1, x : x + CELL - 1] = colours[g]
    return img


HUMAN_RENDERING = importlib.util.find_spec("pygame") is not None


class HumanWindow:
    """``render_mode="human"``: the ``rgb_array`` frame in a pygame window. Without pygame the
    env cannot be made in this mode: a one-line ConfigError when it is made."""

    @staticmethod
    def require_pygame(env_name: str) -> None:
        """Raise the ConfigError that says how to get ``human`` rendering, if pygame is absent."""
        if importlib.util.find_spec("pygame") is None:
            from dlcluster_gym.errors import ConfigError

            raise ConfigError(
                f"{env_name}: render_mode 'human' needs pygame (pip install pygame); "
                "'ansi' and 'rgb_array' work without it"
            )

    def __init__(self, env_name: str, fps: int) -> None:
        self.require_pygame(env_name)
        self.fps = fps
        self.window: Any = None
        self.clock: Any = None

    def show(self, frame: np.ndarray) -> None:
        import pygame

        if self.window is None:
            pygame.init()
            pygame.display.init()
            self.window = pygame.display.set_mode((frame.shape[1], frame.shape[0]))
            self.clock = pygame.time.Clock()
        surface = pygame.surfarray.make_surface(np.ascontiguousarray(frame.swapaxes(0, 1)))
        self.window.blit(surface, (0, 0))
        pygame.event.pump()
        pygame.display.flip()
        self.clock.tick(self.fps)

    def close(self) -> None:
        if self.window is not None:
            import pygame

            pygame.display.quit()
            self.window = None
