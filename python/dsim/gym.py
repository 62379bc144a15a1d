"""Gymnasium environments for every dsim env class.

gymnasium.make("dsim/Walker-v0", config="my.json", substeps=960,
render_mode="rgb_array", image_obs=False, action_scale=None, reward="dense")

- Observation: the env's state vector (observation.state: com or full) as a
  Box of the library's real dtype; with image_obs=True a Dict of "state" and
  "image" (uint8 h x w x 3, the soft rasterizer's render at the step's end).
  Bounds: +-1e4 (m, m/s) per coordinate, beyond any state a scene reaches
  without diverging (a diverged step ends the episode instead).
- Action: Box [-1, 1]^A, clipped to it (entries outside counted in
  info["clipped"]; non-finite ones refused) and multiplied by the action
  scale before it enters the physics: activations of walker (1), control-fem
  and beam (0.3: their tets invert beyond), spring rest-length scales of
  walker-springs (L (1 + a), 1), control-cloth's initial velocity and
  rigid-toss's impulse (5 m/s, 5 N s per unit); action_scale overrides it
  (the class's scale comes from the library: ds_env_action_scale,
  dsEnvClass.action_scale; docs/python.md).
- Episode: the env's horizon (physics.substeps / control_interval steps);
  its end is reported as truncated (a time limit), never terminated, except
  when the simulation diverges (terminated, info["error"]). info["metric"]
  is the class's metric (ds_env_metric) after the step.
- Reward: minus the loss terms of the step (dsim/env.h "Loss and reward");
  reward="dense" (config key loss.reward): the step's progress by the
  metric (forward displacement, or decrease of the distance to the target).
"""
from __future__ import annotations

import functools

import gymnasium
import numpy as np

from . import _lib
from ._lib import DsimError, real_dtype
from ._spaces import OBS_BOUND, make_spaces, to_rgb8
from ._spaces import action_scale as _action_scale
from ._spaces import clip_action as _clip
from .env import Env, check_array, classes, env_id
from .vector import DsimVectorEnv

__all__ = ["DsimGymEnv", "register_envs", "OBS_BOUND"]

_step = _lib.env_step
_metric = _lib.env_metric


class DsimGymEnv(gymnasium.Env):
    """A dsim env class as a gymnasium.Env (see the module's doc)."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}

    def __init__(self, env_name: str, render_mode: str | None = None, config=None, image_obs: bool = False,
                 action_scale: float | None = None, device: str = "cpu", **overrides):
        self.env_name = env_name
        self.id = env_id(env_name)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise DsimError(self.id, f"render_mode {render_mode!r} not supported (only 'rgb_array')")
        self.render_mode = render_mode
        if image_obs:
            overrides["observation.image"] = True
        self.env = Env(env_name, config=config, label=self.id, device=device, **overrides)
        self.image_obs = image_obs
        self.scale = _action_scale(self.env, action_scale, env_name)
        self.observation_space, self.action_space = make_spaces(self.env, image_obs)
        dt = float(self.env.config["physics"]["dt"]) * int(self.env.config["physics"]["control_interval"])
        self.metadata = dict(self.metadata, render_fps=max(1, int(round(1.0 / dt))))
        self._img = np.empty((self.env.height, self.env.width, 4), real_dtype) if image_obs else None
        self._act = np.empty(self.env.action_size, real_dtype)
        self._ashape = (self.env.action_size,)
        self._osize = self.env.obs_size
        self._img_p = self._img.ctypes.data if self._img is not None else None
        self._metric = _lib.REAL()

    def _obs(self, state):
        if self.image_obs:
            return {"state": state, "image": to_rgb8(self._img)}
        return state

    def _reset_c(self, c_seed: int):
        if self.image_obs:
            obs, img = self.env.reset(c_seed, image=True)
            self._img[...] = img
            return obs
        return self.env.reset(c_seed)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        c_seed = int(self.np_random.integers(0, 2**63 - 1))
        options = options or {}
        unknown = set(options) - {"params", "c_seed"}
        if unknown:
            raise DsimError(self.id, f"unknown reset option(s) {sorted(unknown)} (known: params, c_seed)")
        if "c_seed" in options:
            c_seed = int(options["c_seed"])
        obs = self._reset_c(c_seed)
        params = options.get("params") or {}
        if params:
            for name, values in params.items():
                self.env.set_param(name, values)
            obs = self._reset_c(c_seed)  # the observation of the changed initial state (values are kept)
            for name, values in params.items():  # control-cloth re-places its sheet at a reset
                self.env.set_param(name, values)
        return self._obs(obs), {"metric": self.env.metric(), "seed": c_seed}

    def step(self, action):
        e = self.env
        a = action
        if (type(a) is not np.ndarray or a.dtype != real_dtype or a.shape != self._ashape
                or not a.flags.c_contiguous):
            if not isinstance(a, np.ndarray):
                a = np.asarray(a)
            if a.dtype.kind != "f":
                raise DsimError(self.id, f"action has dtype {a.dtype}; expected a floating dtype "
                                f"({real_dtype}, float32 is converted)")
            a = np.ascontiguousarray(a, dtype=real_dtype)
            if a.shape != self._ashape:
                check_array(self.id, "action", a, self._ashape)
        clipped = _clip(a, self._act, self.scale)
        a = self._act
        if e._done_flag or not e._p:
            e.step(a)  # raises: step after the episode ended / closed
        obs = np.empty(self._osize, real_dtype)
        rc = _step(e._p, a.ctypes.data, obs.ctypes.data, self._img_p, e._reward, e._done)
        if rc:
            if rc in (_lib.DS_ERR_DIVERGED, _lib.DS_ERR_INVERTED):  # ends the episode; reset to go on
                err = DsimError(self.id, "the simulation failed", rc, _lib.env_error(e._p))
                obs[:] = 0
                if self._img is not None:
                    self._img[...] = 0
                e._done_flag = True
                return self._obs(obs), 0.0, True, False, {"metric": float("nan"), "error": str(err),
                                                          "clipped": clipped}
            e.step(a)  # the same failure again, raised with the library's message
        done = e._done.value != 0
        e._done_flag = done
        _metric(e._p, self._metric)
        return self._obs(obs), e._reward.value, False, done, {"metric": self._metric.value, "clipped": clipped}

    def render(self):
        if self.render_mode != "rgb_array":
            return None
        return to_rgb8(self.env.render())

    def close(self):
        self.env.close()
        super().close()


def register_envs():
    """Register every env class of the library with Gymnasium (idempotent):
    dsim/<CamelCase>-v0, with the batched env as its vector entry point."""
    registry = gymnasium.envs.registration.registry
    ids = []
    for name in classes():
        gid = env_id(name)
        ids.append(gid)
        if gid in registry:
            continue
        gymnasium.register(id=gid, entry_point=functools.partial(DsimGymEnv, name),
                           vector_entry_point=functools.partial(DsimVectorEnv, name), disable_env_checker=False)
    return ids
