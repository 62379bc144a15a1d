"""Stable-Baselines3 adapter: a dsim batched env (dsim.vector.DsimVectorEnv)
as an SB3 VecEnv. SB3 expects same-step autoreset (the observation returned
with done=True is the next episode's first; the last one is in
info["terminal_observation"]), so envs whose episode ended are reset in the
same call (ds_batch_reset with a mask); seeds continue as in the vector env
(s + i, s + i + N, ...).

    from dsim.sb3 import SB3VecEnv
    venv = SB3VecEnv(gymnasium.make_vec("dsim/Walker-v0", num_envs=8))
    PPO("MlpPolicy", venv).learn(10_000)
"""
from __future__ import annotations

import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv

from . import _lib
from ._lib import ptr

__all__ = ["SB3VecEnv"]


class SB3VecEnv(VecEnv):
    def __init__(self, venv, seed: int = 0):
        self.venv = venv.unwrapped
        super().__init__(self.venv.num_envs, self.venv.single_observation_space, self.venv.single_action_space)
        self._seed = seed
        self._actions = None
        self.render_mode = None
        self.episode_metric = []  # metric at the end of every finished episode, in order

    def reset(self):
        obs, _ = self.venv.reset(seed=self._seed)
        self._seed += self.num_envs * 1000003  # a later reset() starts other episodes
        return obs

    def step_async(self, actions):
        self._actions = np.asarray(actions, dtype=_lib.real_dtype)  # clipped (and counted) by the vector env

    def step_wait(self):
        v = self.venv
        obs, rew, term, trunc, info = v.step(self._actions)
        done = term | trunc
        clipped = info["clipped"]
        infos = [{"clipped": int(clipped[i])} for i in range(self.num_envs)]
        if done.any():
            metric = info["metric"]
            for i in np.flatnonzero(done):
                infos[i]["terminal_observation"] = obs[i].copy()
                infos[i]["TimeLimit.truncated"] = bool(trunc[i] and not term[i])
                infos[i]["metric"] = float(metric[i])
                self.episode_metric.append(float(metric[i]))
            mask = np.ascontiguousarray(done, dtype=np.uint8)
            rc = _lib.batch_reset(v._p, None, ptr(mask), v._p_obs, None, v._p_status)
            if rc:
                v._raise("reset failed", rc)
            obs = v._obs.copy()
        return obs, rew.astype(np.float32), done, infos

    def close(self):
        self.venv.close()

    def get_attr(self, attr_name, indices=None):
        return [getattr(self.venv, attr_name) for _ in self._get_indices(indices)]

    def set_attr(self, attr_name, value, indices=None):
        setattr(self.venv, attr_name, value)

    def env_method(self, method_name, *method_args, indices=None, **method_kwargs):
        return [getattr(self.venv, method_name)(*method_args, **method_kwargs) for _ in self._get_indices(indices)]

    def env_is_wrapped(self, wrapper_class, indices=None):
        return [False for _ in self._get_indices(indices)]

    def seed(self, seed=None):
        if seed is not None:
            self._seed = int(seed)
        return [self._seed + i for i in range(self.num_envs)]
