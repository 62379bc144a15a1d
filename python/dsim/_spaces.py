"""What the single env (dsim.gym) and the batched env (dsim.vector) share:
their Gymnasium spaces, action scaling and frame conversion. Both import it;
neither imports the other's internals through it.
"""
from __future__ import annotations

import numpy as np
from gymnasium import spaces

from . import _lib
from ._lib import real_dtype

__all__ = ["OBS_BOUND", "CLASS_SCALE", "action_scale", "clip_action", "make_spaces", "to_rgb8"]

# Bounds of the state observation: +-1e4 (m, m/s) per coordinate, beyond any
# state a scene reaches without diverging (a diverged step ends the episode).
OBS_BOUND = 1.0e4


# The activation range a Box action of [-1, 1] maps to, per class, where the
# physics cannot take the whole [-1, 1]. Tet muscles (control-fem, beam)
# contract by a fraction a of their rest shape: a gear whose every tet
# contracts by 0.5 inverts a tet as it lands (so do random +-0.5 patterns),
# the beam at a = 1 inverts one in its first step; at 0.3 none of uniform
# random, all +1, all -1 or random +-1 patterns inverts one
# (python/tests/test_rl.py runs every class with random and corner actions).
CLASS_SCALE = {"control-fem": 0.3, "beam": 0.3}


def action_scale(env, scale, name: str | None = None):
    """The factor a [-1, 1] action is multiplied by: `scale` when given, else 5
    (m/s per unit) for an initial-condition action (control-cloth), the
    class's safe range for activations (CLASS_SCALE: control-fem and beam
    0.3), and 1 for the other activations and rest-length scales (walker,
    walker-springs). rigid-toss's impulse: 5 N s per unit. env: anything with action_kind; name: its class."""
    if scale is not None:
        return float(scale)
    if name in CLASS_SCALE:
        return CLASS_SCALE[name]
    return 5.0 if env.action_kind == _lib.DS_ACTION_INITIAL else 1.0


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
