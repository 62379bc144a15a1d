"""dsim.Lockstep: N envs of one class reset, stepped and gone back through
together (dsim/batch.h, a lockstep batch). With device="cuda" (or the
config key physics.batched_engine on the CPU) they are the instances of
one batched engine with its tape: one pass forward and one backward for
all, what gradient-based identification or control of many bodies needs on
a GPU. On the CPU engine each env keeps its own engine and the backward
runs across threads.

    ls = dsim.Lockstep("control-fem", 64, device="cuda", substeps=640)
    obs = ls.reset(seeds)                       # N x obs_size
    for k in range(ls.num_steps):
        obs, rewards = ls.step(actions[:, k])   # actions: N x T x action_size
    losses, grad_actions = ls.backward_loss()   # N, N x T x action_size
    ls.param_grad(3, "tet.k_mu")                # env 3's gradient

Every env's parameters are its own (set_param(i, ...) before the first
step). Results equal N separate envs': bit for bit forward on the CPU,
gradients to rounding on one engine (test_batch_lockstep, test_torch).
"""
from __future__ import annotations

import json

import numpy as np

from . import _lib
from ._lib import DsimError, ptr, real_dtype
from .env import Owned, check_array, config_text, param_of, param_grad_of, set_param_of

__all__ = ["Lockstep"]


class Lockstep(Owned):
    _destroy = staticmethod(_lib.batch_destroy)
    _what = "lockstep batch"

    def __init__(self, name: str, num_envs: int, config=None, device: str = "cpu", label: str | None = None,
                 **overrides):
        self.name = name
        self.label = label or name
        if int(num_envs) < 1:
            raise DsimError(self.label, f"num_envs must be >= 1, got {num_envs}")
        self.num_envs = int(num_envs)
        text = config_text(name, config, overrides, self.label)
        self._p = None
        self._p = _lib.batch_create(self.label, text, self.num_envs, str(device), _lib.DS_BATCH_LOCKSTEP,
                                    "lockstep batch")
        self.device = str(device)
        e0 = _lib.batch_env(self._p, 0)
        self.action_size = _lib.env_action_size(e0)
        self.obs_size = _lib.env_obs_size(e0)
        self.num_steps = _lib.env_num_steps(e0)
        self.config = json.loads(_lib.resolved_config(e0))["env"]
        n = self.num_envs
        self._status = np.zeros(n, np.int32)
        self._step_status = np.zeros(n, np.int32)  # the last step's (failed())
        self._rew = np.zeros(n, real_dtype)

    def env(self, i: int):
        """Handle (ctypes pointer) of env i, for dsim's C functions."""
        if not 0 <= int(i) < self.num_envs:
            raise DsimError(self.label, f"env index {i} outside [0, {self.num_envs})")
        return _lib.batch_env(self.handle, int(i))

    def _fail(self, what: str, rc: int):
        _lib.raise_batch(self._p, self.label, what, rc)

    # -- episode ----------------------------------------------------------------
    def reset(self, seeds=0, image: np.ndarray | None = None) -> np.ndarray:
        """Every env's observation at substep 0 (N x obs_size); seeds: one per
        env, or an int s (env i gets s + i). image: as in step."""
        n = self.num_envs
        if np.ndim(seeds) == 0:
            s = (int(seeds) + np.arange(n, dtype=np.uint64)).astype(np.uint64)
        else:
            s = np.ascontiguousarray(seeds, dtype=np.uint64).reshape(-1)
            if s.size != n:
                raise DsimError(self.label, f"seeds: {s.size} values for {n} envs")
        obs = np.empty((n, self.obs_size), real_dtype)
        if image is not None and not (image.flags.c_contiguous and image.dtype == real_dtype):
            raise DsimError(self.label, "reset: image must be a C-contiguous array of the library's reals")
        rc = _lib.batch_reset(self.handle, ptr(s), None, ptr(obs), ptr(image) if image is not None else None,
                              ptr(self._status))
        if rc:
            self._fail("reset failed", rc)
        self._step_status[:] = 0
        return obs

    def step(self, actions, image: np.ndarray | None = None):
        """One step of every env: (obs N x obs_size, rewards N). image: an
        N x h x w x 4 array to receive the image observations (the config's
        observation.image on). A failed env raises DsimError naming it (the
        other envs have stepped); step_each reports failures instead."""
        obs, rew, status = self.step_each(actions, image)
        if status.any():
            self._fail("step failed", int(status[np.flatnonzero(status)[0]]))
        return obs, rew

    def step_each(self, actions, image: np.ndarray | None = None):
        """step() that does not raise when envs fail: (obs, rewards, status),
        status[i] 0 or env i's negative error code (e.g. DS_ERR_INVERTED, its
        message in error(i)); a failed env's reward is 0 and its obs row is
        not written, and it refuses further steps (DS_ERR_STATE) until reset.
        Bad arguments still raise."""
        a = check_array(self.label, "actions", np.ascontiguousarray(actions, dtype=real_dtype),
                        (self.num_envs, self.action_size))
        obs = np.empty((self.num_envs, self.obs_size), real_dtype)
        if image is not None and not (image.flags.c_contiguous and image.dtype == real_dtype):
            raise DsimError(self.label, "step: image must be a C-contiguous array of the library's reals")
        self._status[:] = 0
        rc = _lib.batch_step(self.handle, ptr(a), ptr(obs), ptr(image) if image is not None else None,
                             ptr(self._rew), None, ptr(self._status), 0)
        status = np.minimum(self._status, 0)  # positive codes say "stepped" or "reset"
        self._step_status = status
        if rc and not status.any():  # a failure of the whole call, not of an env
            self._fail("step failed", rc)
        return obs, self._rew.copy(), status

    def failed(self) -> np.ndarray:
        """Per env, whether its last step (step or step_each) since the last
        reset failed: a bool array of N, True where that step's status was
        an error code (the env needs a reset)."""
        return self._step_status < 0

    def error(self, i: int) -> str:
        """Env i's last error message ("" when none)."""
        return _lib.env_error(self.env(i))

    @property
    def steps_taken(self) -> int:
        return _lib.env_steps_taken(self.env(0))

    def loss(self) -> np.ndarray:
        """Every env's built-in loss of the episode so far (N)."""
        out = np.empty(self.num_envs, real_dtype)
        for i in range(self.num_envs):
            v = _lib.REAL()
            rc = _lib.env_loss(self.env(i), v)
            if rc:
                _lib.raise_env(self.env(i), self.label, f"env {i}: loss", rc)
            out[i] = v.value
        return out

    # -- parameters and gradients -----------------------------------------------------
    def param(self, i: int, name: str) -> np.ndarray:
        return param_of(self.env(i), f"{self.label}: env {i}", name)

    def set_param(self, i: int, name: str, values):
        set_param_of(self.env(i), f"{self.label}: env {i}", name, values)

    def param_grad(self, i: int, name: str) -> np.ndarray:
        return param_grad_of(self.env(i), f"{self.label}: env {i}", name)

    def backward_loss(self):
        """(losses N, d loss_i / d actions_i: N x steps_taken x action_size)."""
        n, T, A = self.num_envs, self.num_steps, self.action_size
        g = np.zeros((n, T, A), real_dtype)
        losses = np.empty(n, real_dtype)
        rc = _lib.batch_backward_loss(self.handle, ptr(losses), ptr(g), ptr(self._status))
        if rc:
            self._fail("backward failed", rc)
        return losses, g[:, : self.steps_taken].copy()

    def backward_adjoints(self, adj_obs=None, adj_reward=None) -> np.ndarray:
        """d L / d actions (N x k x action_size) for L = sum over envs and steps
        of adj_obs[i, k].obs_ik + adj_reward[i, k] r_ik (k = steps taken)."""
        n, T, A, k = self.num_envs, self.num_steps, self.action_size, self.steps_taken
        ao = ar = None
        if adj_obs is not None:
            a = check_array(self.label, "adj_obs", np.ascontiguousarray(adj_obs, dtype=real_dtype),
                            (n, k, self.obs_size))
            ao = np.zeros((n, T, self.obs_size), real_dtype)
            ao[:, :k] = a
        if adj_reward is not None:
            a = check_array(self.label, "adj_reward", np.ascontiguousarray(adj_reward, dtype=real_dtype), (n, k))
            ar = np.zeros((n, T), real_dtype)
            ar[:, :k] = a
        g = np.zeros((n, T, A), real_dtype)
        rc = _lib.batch_backward_adjoints(self.handle, ptr(ao) if ao is not None else None, None,
                                          ptr(ar) if ar is not None else None, ptr(g), ptr(self._status))
        if rc:
            self._fail("backward failed", rc)
        return g[:, :k].copy()
