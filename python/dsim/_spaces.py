"""What the single env (dsim.gym) and the batched env (dsim.vector) share:
their Gymnasium spaces, action scaling and frame conversion. Both import it;
neither imports the other's internals through it.
"""
from __future__ import annotations

import numpy as np
from gymnasium import spaces

from . import _lib
from ._lib import real_dtype

__all__ = ["OBS_BOUND", "action_scale", "make_spaces", "to_rgb8"]

# Bounds of the state observation: +-1e4 (m, m/s) per coordinate, beyond any
# state a scene reaches without diverging (a diverged step ends the episode).
OBS_BOUND = 1.0e4


def action_scale(env, scale):
    """The factor a [-1, 1] action is multiplied by: `scale` when given, else 5
    (m/s per unit) for an initial-condition action (control-cloth), 1 for
    activations and rest-length scales. env: anything with action_kind."""
    if scale is not None:
        return float(scale)
    return 5.0 if env.action_kind == _lib.DS_ACTION_INITIAL else 1.0


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
