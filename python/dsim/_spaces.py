"""What the single env (dsim.gym) and the batched env (dsim.vector) share:
their Gymnasium spaces, action scaling and frame conversion. Both import it;
neither imports the other's internals through it.
"""
from __future__ import annotations

import numpy as np
from gymnasium import spaces

from . import _lib
from ._lib import real_dtype

__all__ = ["OBS_BOUND", "action_scale", "clip_action", "make_spaces", "to_rgb8"]

# Bounds of the state observation: +-1e4 (m, m/s) per coordinate, beyond any
# state a scene reaches without diverging (a diverged step ends the episode).
OBS_BOUND = 1.0e4


def action_scale(env, scale, name: str | None = None):
    """The factor a [-1, 1] action is multiplied by: `scale` when given, else
    the class's own (ds_env_action_scale: 0.3 for control-fem's and beam's
    tet muscles, 5 m/s or N s per unit for control-cloth's initial velocity
    and rigid-toss's impulse, 1 for the others; a plugin class sets
    dsEnvClass.action_scale). env: anything with action_scale (the library's
    value); name: its class, unused (kept for callers)."""
    if scale is not None:
        return float(scale)
    return float(env.action_scale)


def clip_action(a: np.ndarray, out: np.ndarray, scale: float) -> int:
    """out = clip(a, -1, 1) * scale; returns how many entries were outside
    [-1, 1]. An action with a NaN or an infinity is passed on unclipped
    (count 0), for the library to refuse with its message."""
    n = int(np.count_nonzero(np.abs(a) > 1.0))
    if n and np.isfinite(a).all():
        np.clip(a, -1.0, 1.0, out=out)
        a = out
    else:
        n = 0
    if scale != 1.0:
        np.multiply(a, scale, out=out)
        return n
    if a is not out:
        out[...] = a
    return n


def to_rgb8(img: np.ndarray) -> np.ndarray:
    """RGBA in [0, 1] (h x w x 4) -> uint8 RGB (h x w x 3)."""
    return (np.clip(img[..., :3], 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def make_spaces(env, image_obs: bool):
    """(observation space, action space) of an env (anything with obs_size,
    action_size, width, height)."""
    state = spaces.Box(-OBS_BOUND, OBS_BOUND, (env.obs_size,), real_dtype)
    action = spaces.Box(-1.0, 1.0, (env.action_size,), real_dtype)
    if image_obs:
        image = spaces.Box(0, 255, (env.height, env.width, 3), np.uint8)
        obs = spaces.Dict({"state": state, "image": image})
    else:
        obs = state
    return obs, action
