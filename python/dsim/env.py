"""dsim.Env: one environment over the C API (dsim/env.h), with numpy arrays
passed to the library without copies.

Config: ``Env("walker", config="my.json", substeps=960, **{"material.k_mu": 1e3})``.
A keyword names a key of the config's "env" section (``dsim config --keys
ENV`` lists them): its dotted path (``"physics.substeps"``, or
``physics__substeps`` as a Python keyword) or, when that is unique, its last
part (``substeps``). The library checks every value as it checks a config
file, and its message names the key.
"""
from __future__ import annotations

import difflib
import json
import os

import numpy as np

from . import _lib
from ._lib import DsimError, ptr, real_dtype

__all__ = ["Env", "classes", "class_keys", "config_text", "env_id"]


def classes() -> list[str]:
    """Names of every registered env class (bundled, then registered from C)."""
    return _lib.class_names()


def env_id(name: str) -> str:
    """Gymnasium id of an env class: walker-springs -> dsim/WalkerSprings-v0."""
    return "dsim/" + "".join(p[:1].upper() + p[1:] for p in name.replace("_", "-").split("-") if p) + "-v0"


def class_keys(name: str) -> list[str]:
    """Every config key of the env section of class `name` (dotted paths)."""
    keys = _lib.class_key_paths(name)
    if keys is None:
        raise DsimError(name, f"unknown env class (registered: {', '.join(classes())})", _lib.DS_ERR_NOTFOUND)
    return keys


def _resolve(name: str, key: str, keys: list[str]) -> str:
    """A keyword -> a dotted key path (unknown names pass through, for the
    library to reject with its own message)."""
    k = key.replace("__", ".")
    if k in keys:
        return k
    hits = [p for p in keys if p.split(".")[-1] == k or p.endswith("." + k)]
    if len(hits) == 1:
        return hits[0]
    if len(hits) > 1:
        raise DsimError(name, f"config key {key!r} is ambiguous: {', '.join(hits)}; give the dotted path")
    if "." not in k:  # a keyword names a key by its last part: the library's suggestion compares whole paths
        near = suggest(k, keys)
        if near:
            raise DsimError(name, "cannot create the env", _lib.DS_ERR_CONFIG,
                            f'unknown key "env.{k}" (did you mean "env.{near}"?)')
    return k  # the library rejects it with its own message (and its suggestion)


def suggest(key: str, keys: list[str]) -> str | None:
    """The dotted key whose last part is nearest to `key` (a keyword
    argument's name: substepz -> physics.substeps), or None."""
    leaves = {}
    for p in keys:
        leaves.setdefault(p.split(".")[-1], p)
    near = difflib.get_close_matches(key, list(leaves), n=1, cutoff=0.75)
    return leaves[near[0]] if near else None


def config_text(name: str, config=None, overrides: dict | None = None, label: str | None = None) -> str:
    """The run config text (JSON) for class `name`: the file `config` (a
    path, or a dict of a whole config) with `overrides` applied to its env
    section."""
    label = label or name
    if config is None:
        cfg = {}
    elif isinstance(config, dict):
        cfg = json.loads(json.dumps(config))
    else:
        try:
            with open(os.fspath(config)) as f:
                cfg = json.load(f)
        except (OSError, ValueError) as e:
            raise DsimError(label, f"cannot read config {config!r}: {e}") from None
    if not isinstance(cfg, dict):
        raise DsimError(label, "a config is a JSON object")
    envsec = cfg.setdefault("env", {})
    if "name" in envsec and envsec["name"] != name:
        raise DsimError(label, f"config {config!r} is for env {envsec['name']!r}, not {name!r}")
    envsec["name"] = name
    if overrides:
        keys = class_keys(name)
        for key, value in overrides.items():
            path = _resolve(label, key, keys).split(".")
            node = envsec
            for part in path[:-1]:
                nxt = node.setdefault(part, {})
                if not isinstance(nxt, dict):
                    raise DsimError(label, f"config key {key!r}: {part!r} is not a group")
                node = nxt
            if isinstance(value, np.ndarray):
                value = value.tolist()
            elif isinstance(value, np.generic):
                value = value.item()
            node[path[-1]] = value
    try:
        return json.dumps(cfg)
    except TypeError as e:
        raise DsimError(label, f"config value not JSON-serialisable: {e}") from None


def check_array(label: str, what: str, a, shape: tuple, dtype=None) -> np.ndarray:
    """a as it is, if it is an ndarray of `dtype` (the library's real type),
    C-contiguous and of `shape`; otherwise a DsimError naming what is wrong."""
    dtype = real_dtype if dtype is None else np.dtype(dtype)
    if not isinstance(a, np.ndarray):
        raise DsimError(label, f"{what} must be a numpy array of {dtype} and shape {shape}, got {type(a).__name__}")
    if a.dtype != dtype:
        raise DsimError(label, f"{what} has dtype {a.dtype}; expected {dtype}")
    if a.shape != shape:
        raise DsimError(label, f"{what} has shape {a.shape}; expected {shape}")
    if not a.flags.c_contiguous:
        raise DsimError(label, f"{what} is not C-contiguous (use np.ascontiguousarray)")
    return a


def _named(p, label: str, name: str, grad: bool, what: str) -> np.ndarray:
    rc, values = _lib.env_param(p, name, grad)
    if rc:
        _lib.raise_env(p, label, f"unknown parameter {name!r}" if rc == _lib.DS_ERR_NOTFOUND else f"{what} {name!r}",
                       rc)
    return values


def param_of(p, label: str, name: str) -> np.ndarray:
    """A copy of env p's named parameter."""
    return _named(p, label, name, False, "parameter")


def param_grad_of(p, label: str, name: str) -> np.ndarray:
    """A copy of env p's gradient of the named parameter (last backward)."""
    return _named(p, label, name, True, "gradient of")


def set_param_of(p, label: str, name: str, values):
    """Env p's named parameter (one value for all, or every value)."""
    cur = param_of(p, label, name)
    v = np.ascontiguousarray(values, dtype=real_dtype).reshape(-1)
    if v.size == 1 and cur.size > 1:
        v = np.full(cur.size, v[0], real_dtype)
    if v.size != cur.size:
        raise DsimError(label, f"parameter {name!r} has {cur.size} values, got {v.size}")
    rc = _lib.env_set_param(p, name.encode(), ptr(v), v.size)
    if rc:
        _lib.raise_env(p, label, f"cannot set parameter {name!r}", rc)


class Owned:
    """A library object this Python object owns: close() (also on garbage
    collection and at the end of a with block) destroys it with _destroy;
    handle raises once it is closed (_what names it)."""
    _destroy = None
    _what = "object"

    def close(self):
        if getattr(self, "_p", None):
            type(self)._destroy(self._p)
            self._p = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def handle(self):
        if not self._p:
            raise DsimError(self.label, f"the {self._what} is closed")
        return self._p


class Env(Owned):
    """One dsim environment (a dsEnv). Methods mirror dsim/env.h; errors are
    DsimError naming the env and carrying the library's message."""

    def __init__(self, name: str, config=None, label: str | None = None, device: str = "cpu", **overrides):
        """device: where the physics runs, "cpu" (default), "cuda" or "cuda:N"
        (ds_env_set_device: the episode's state, tape and adjoints on that GPU,
        and its frames, image losses and image observations rendered there)."""
        self.name = name
        self.label = label or name
        text = config_text(name, config, overrides, self.label)
        self._p = None
        self._p = p = _lib.env_create(self.label, text)
        self.device = device
        if device != "cpu":
            rc = _lib.env_set_device(p, str(device).encode())
            if rc:
                msg = _lib.env_error(p)
                self.close()
                raise DsimError(self.label, f"device {device}", rc, msg)
        self.action_size = _lib.env_action_size(p)
        self.action_kind = _lib.env_action_kind(p)
        self.action_scale = _lib.env_action_scale(p)
        self.num_steps = _lib.env_num_steps(p)
        self.width, self.height = _lib.env_image_size(p)
        cfg = json.loads(_lib.resolved_config(p))["env"]
        self.config = cfg
        self.obs_image = bool(cfg.get("observation", {}).get("image", False))
        self._reward = _lib.REAL()
        self._done = _lib.INT()
        self._done_flag = False

    _destroy = staticmethod(_lib.env_destroy)
    _what = "env"

    def _fail(self, what: str, rc: int):
        _lib.raise_env(self._p, self.label, what, rc)

    # -- episode ----------------------------------------------------------------
    def reset(self, seed: int = 0, image: bool = False):
        """Observation at substep 0 (and the RGBA image, h x w x 4, with image=True)."""
        p = self.handle
        obs = np.empty(self.obs_size, real_dtype)
        img = np.empty((self.height, self.width, 4), real_dtype) if image and self.obs_image else None
        rc = _lib.env_reset(p, int(seed) & 0xFFFFFFFFFFFFFFFF, ptr(obs), ptr(img) if img is not None else None)
        if rc:
            self._fail("reset failed", rc)
        self._done_flag = False
        return (obs, img) if image else obs

    def step(self, action: np.ndarray, obs: np.ndarray | None = None, image: np.ndarray | None = None):
        """One control step: (obs, reward, done). action: ndarray of the real
        dtype, shape (action_size,), C-contiguous (checked; passed without a
        copy). obs / image: optional output arrays to fill."""
        p = self._p
        if not p:
            raise DsimError(self.label, "the env is closed")
        if (type(action) is not np.ndarray or action.dtype != real_dtype or action.shape != (self.action_size,)
                or not action.flags.c_contiguous):
            check_array(self.label, "action", action, (self.action_size,))
        if self._done_flag:
            raise DsimError(self.label, f"step after the episode ended ({self.num_steps} steps); call reset",
                            _lib.DS_ERR_STATE)
        if obs is None:
            obs = np.empty(self.obs_size, real_dtype)
        rc = _lib.env_step(p, action.ctypes.data, obs.ctypes.data, image.ctypes.data if image is not None else None,
                           self._reward, self._done)
        if rc:
            if rc == _lib.DS_ERR_RANGE:
                bad = np.flatnonzero(~np.isfinite(action))
                self._fail(f"bad action (non-finite at {bad[:8].tolist()})" if bad.size else "bad action", rc)
            self._fail("step failed", rc)
        done = bool(self._done.value)
        self._done_flag = done
        return obs, self._reward.value, done

    def step_raw(self, action_ptr: int, obs_ptr: int) -> int:
        """The bare C call (for overhead measurements): returns the code."""
        return _lib.env_step(self._p, action_ptr, obs_ptr, None, self._reward, self._done)

    @property
    def steps_taken(self) -> int:
        return _lib.env_steps_taken(self.handle)

    # -- queries ----------------------------------------------------------------
    def metric(self) -> float:
        v = _lib.REAL()
        rc = _lib.env_metric(self.handle, v)
        if rc:
            self._fail("metric", rc)
        return v.value

    def metric_goal(self) -> float:
        return _lib.env_metric_goal(self.handle)

    def loss(self) -> float:
        v = _lib.REAL()
        rc = _lib.env_loss(self.handle, v)
        if rc:
            self._fail("loss", rc)
        return v.value

    def target(self) -> np.ndarray:
        t = np.empty(3, real_dtype)
        rc = _lib.env_target(self.handle, ptr(t))
        if rc:
            self._fail("target", rc)
        return t

    def render(self) -> np.ndarray:
        """RGBA image of the current state (h x w x 4, values in [0, 1])."""
        img = np.empty((self.height, self.width, 4), real_dtype)
        rc = _lib.env_render(self.handle, ptr(img))
        if rc:
            self._fail("render", rc)
        return img

    # The model can be rebuilt by a reset (control-cloth draws its sheet size per
    # episode), so these are read from the env each time rather than cached.
    @property
    def obs_size(self) -> int:
        return _lib.env_obs_size(self.handle)

    @property
    def num_particles(self) -> int:
        return _lib.env_num_particles(self.handle)

    @property
    def state_size(self) -> int:
        return _lib.env_state_size(self.handle)

    def get_state(self) -> np.ndarray:
        s = np.empty(self.state_size, real_dtype)
        rc = _lib.env_get_state(self.handle, ptr(s), self.state_size)
        if rc:
            self._fail("get_state", rc)
        return s

    def set_state(self, state: np.ndarray):
        check_array(self.label, "state", state, (self.state_size,))
        rc = _lib.env_set_state(self.handle, ptr(state), self.state_size)
        if rc:
            self._fail("set_state", rc)
        self._done_flag = _lib.env_steps_taken(self._p) >= self.num_steps

    # -- parameters and gradients -------------------------------------------------
    def param(self, name: str) -> np.ndarray:
        """A copy of the named physical parameter ("tet.k_mu", "gravity", ...)."""
        return param_of(self.handle, self.label, name)

    def set_param(self, name: str, values):
        """Set a named parameter (before the first step of an episode)."""
        set_param_of(self.handle, self.label, name, values)

    def param_grad(self, name: str) -> np.ndarray:
        """d(loss)/d(parameter) of the last backward (a copy)."""
        return param_grad_of(self.handle, self.label, name)

    def backward_loss(self, first_step: int = 0):
        """(loss, d loss / d actions (steps_taken x action_size)) by the adjoint."""
        g = np.zeros((self.steps_taken, self.action_size), real_dtype)
        loss = _lib.REAL()
        rc = _lib.env_backward_loss_from(self.handle, int(first_step), loss, ptr(g))
        if rc:
            self._fail("backward failed", rc)
        return loss.value, g

    def backward_adjoints(self, adj_obs=None, adj_reward=None):
        """d L / d actions for L = sum_k adj_obs[k].obs_k + adj_reward[k] r_k."""
        k = self.steps_taken
        if adj_obs is not None:
            check_array(self.label, "adj_obs", adj_obs, (k, self.obs_size))
        if adj_reward is not None:
            check_array(self.label, "adj_reward", adj_reward, (k,))
        g = np.zeros((k, self.action_size), real_dtype)
        rc = _lib.env_backward_adjoints(self.handle, ptr(adj_obs) if adj_obs is not None else None, None,
                                        ptr(adj_reward) if adj_reward is not None else None, ptr(g))
        if rc:
            self._fail("backward failed", rc)
        return g
