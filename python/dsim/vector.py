"""A native batched env (dsim/batch.h) as a gymnasium.vector.VectorEnv.

gymnasium.make_vec("dsim/Walker-v0", num_envs=64, substeps=960) gives this
(its vector entry point): N envs of one class stepped by one C call, OpenMP
across envs, bitwise what N separate envs give for any thread count.
Autoreset is Gymnasium's default, next step: the step after an env's
episode ended resets it (its action ignored; reward 0). Seeds: reset(seed=s)
gives env i the library seed s + i, and its later episodes s + i + N,
s + i + 2N, ...; reset(seed=[s0, s1, ...]) sets each. Spaces, scaling,
clipping and info["metric"] as dsim.gym.DsimGymEnv (no image observations
here); info["clipped"] counts each env's out-of-range action entries.
The envs run forward only (physics.gradients false unless the config sets
it); with device="cuda" (or "cuda:N") every env is then one instance of one
batched engine on that GPU, all stepped together by each call.
"""
from __future__ import annotations

import json

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from . import _lib
from ._lib import DsimError, ptr, real_dtype
from ._spaces import make_spaces, to_rgb8
from ._spaces import action_scale as _action_scale
from ._spaces import clip_action as _clip
from .env import check_array, config_text, env_id

__all__ = ["DsimVectorEnv"]


def _forward_only(text: str) -> str:
    """physics.gradients false unless the config sets it: a vector env has no
    backward, so its envs keep no tape, and on the batched engine (a CUDA
    device) they then share one engine, env i its instance i."""
    cfg = json.loads(text)
    envsec = cfg["env"]
    physics = envsec.get("physics")
    if "physics.gradients" in envsec or (isinstance(physics, dict) and "gradients" in physics):
        return text
    if physics is None:
        physics = envsec["physics"] = {}
    if not isinstance(physics, dict):
        return text  # the library names the bad group
    physics["gradients"] = False
    return json.dumps(cfg)


class _Probe:  # what make_spaces / _action_scale read of an env
    def __init__(self, p):
        self.obs_size = _lib.env_obs_size(p)
        self.action_size = _lib.env_action_size(p)
        self.action_kind = _lib.env_action_kind(p)
        self.action_scale = _lib.env_action_scale(p)
        self.width, self.height = _lib.env_image_size(p)


class DsimVectorEnv(gymnasium.vector.VectorEnv):
    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": ["rgb_array"]}

    def __init__(self, env_name: str, num_envs: int = 1, render_mode: str | None = None, config=None,
                 action_scale: float | None = None, max_episode_steps: int | None = None, device: str = "cpu",
                 **overrides):
        self.env_name = env_name
        self.id = env_id(env_name)
        if max_episode_steps is not None:
            raise DsimError(self.id, "max_episode_steps: set the horizon with physics.substeps instead")
        if render_mode not in (None, "rgb_array"):
            raise DsimError(self.id, f"render_mode {render_mode!r} not supported (only 'rgb_array')")
        if int(num_envs) < 1:
            raise DsimError(self.id, f"num_envs must be >= 1, got {num_envs}")
        self.render_mode = render_mode
        self.num_envs = int(num_envs)
        text = _forward_only(config_text(env_name, config, overrides, self.id))
        self._p = None
        self.device = str(device)
        self._p = _lib.batch_create(self.id, text, self.num_envs, self.device, 0, "batched env")
        e0 = _lib.batch_env(self._p, 0)
        probe = _Probe(e0)
        self.config = json.loads(_lib.resolved_config(e0))["env"]
        self.scale = _action_scale(probe, action_scale, env_name)
        self.single_observation_space, self.single_action_space = make_spaces(probe, False)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.obs_size, self.action_size = probe.obs_size, probe.action_size
        n = self.num_envs
        self._obs = np.empty((n, self.obs_size), real_dtype)
        self._rew = np.empty(n, real_dtype)
        self._done = np.empty(n, np.uint8)
        self._status = np.empty(n, np.int32)
        self._metric = np.empty(n, real_dtype)
        self._act = np.empty((n, self.action_size), real_dtype)
        self._true = np.ones(n, bool)
        self._p_obs, self._p_rew, self._p_done = ptr(self._obs), ptr(self._rew), ptr(self._done)
        self._p_status, self._p_metric = ptr(self._status), ptr(self._metric)
        self.closed = False

    def env(self, i: int):
        """Handle (ctypes pointer) of env i, for dsim's C functions."""
        return _lib.batch_env(self._p, int(i))

    def set_param(self, i: int, name: str, values):
        """Env i's named physical parameter (before its episode's first step)."""
        e = self.env(i)
        if not e:
            raise DsimError(self.id, f"env index {i} outside [0, {self.num_envs})")
        rc, cur = _lib.env_param(e, name)
        if rc:
            _lib.raise_env(e, self.id, f"env {i}: unknown parameter {name!r}", rc)
        v = np.ascontiguousarray(values, dtype=real_dtype).reshape(-1)
        if v.size == 1 and cur.size > 1:
            v = np.full(cur.size, v[0], real_dtype)
        if v.size != cur.size:
            raise DsimError(self.id, f"env {i}: parameter {name!r} has {cur.size} values, got {v.size}")
        rc = _lib.env_set_param(e, name.encode(), ptr(v), v.size)
        if rc:
            _lib.raise_env(e, self.id, f"env {i}: cannot set {name!r}", rc)

    def _raise(self, what: str, rc: int):
        _lib.raise_batch(self._p, self.id, what, rc)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed if seed is None or isinstance(seed, (int, np.integer)) else None)
        if self._p is None:
            raise DsimError(self.id, "the vector env is closed")
        n = self.num_envs
        if seed is None:
            seeds = self.np_random.integers(0, 2**62, size=n, dtype=np.uint64)
        elif isinstance(seed, (int, np.integer)):
            seeds = np.arange(n, dtype=np.uint64) + np.uint64(seed)
        else:
            seeds = np.asarray(seed, dtype=np.uint64)
            if seeds.shape != (n,):
                raise DsimError(self.id, f"seed list has {seeds.size} values; expected {n}")
        seeds = np.ascontiguousarray(seeds)
        mask = None
        options = options or {}
        if "reset_mask" in options:
            mask = np.ascontiguousarray(options["reset_mask"], dtype=np.uint8)
            if mask.shape != (n,):
                raise DsimError(self.id, f"reset_mask has shape {mask.shape}; expected ({n},)")
        rc = _lib.batch_reset(self._p, ptr(seeds), ptr(mask) if mask is not None else None, self._p_obs, None,
                              self._p_status)
        if rc:
            self._raise("reset failed", rc)
        _lib.batch_metric(self._p, self._p_metric)
        return self._obs.copy(), {"metric": self._metric.copy(), "_metric": self._true.copy()}

    def step(self, actions):
        if self._p is None:
            raise DsimError(self.id, "the vector env is closed")
        a = actions
        if type(a) is not np.ndarray or a.dtype != real_dtype or not a.flags.c_contiguous:
            if not isinstance(a, np.ndarray):
                a = np.asarray(a)
            if a.dtype.kind != "f":
                raise DsimError(self.id, f"actions have dtype {a.dtype}; expected a floating dtype")
            a = np.ascontiguousarray(a, dtype=real_dtype)
        if a.shape != (self.num_envs, self.action_size):
            check_array(self.id, "actions", a, (self.num_envs, self.action_size))
        clipped = _clip(a, self._act, self.scale)
        n_out = np.count_nonzero(np.abs(a) > 1.0, axis=1) if clipped else None
        a = self._act
        rc = _lib.batch_step(self._p, a.ctypes.data, self._p_obs, None, self._p_rew, self._p_done, self._p_status,
                             _lib.DS_BATCH_AUTORESET)
        terminated = np.zeros(self.num_envs, bool)
        info = {}
        if rc:
            st = self._status
            bad = np.flatnonzero((st < 0) & (st != _lib.DS_ERR_DIVERGED) & (st != _lib.DS_ERR_INVERTED))
            if bad.size:
                self._raise(f"step failed in env {int(bad[0])}", int(st[bad[0]]))
            terminated = st < 0  # diverged: ends the episode; the next step resets it
            info["error"] = np.array([_lib.env_error(self.env(i)) if terminated[i] else ""
                                      for i in range(self.num_envs)], dtype=object)
            info["_error"] = terminated.copy()
        _lib.batch_metric(self._p, self._p_metric)
        info["metric"] = self._metric.copy()
        info["_metric"] = self._true.copy()
        info["clipped"] = n_out if clipped else np.zeros(self.num_envs, np.int64)
        info["_clipped"] = self._true.copy()
        return self._obs.copy(), self._rew.copy(), terminated, self._done.astype(bool), info

    def render(self):
        if self.render_mode != "rgb_array":
            return None
        frames = []
        for i in range(self.num_envs):
            e = self.env(i)
            w, h = _lib.env_image_size(e)
            img = np.empty((h, w, 4), real_dtype)
            _lib.env_render(e, ptr(img))
            frames.append(to_rgb8(img))
        return tuple(frames)

    def close_extras(self, **kwargs):
        if self._p is not None:
            _lib.batch_destroy(self._p)
            self._p = None

    def __del__(self):
        try:
            self.close_extras()
        except Exception:
            pass
