"""dsim.learn: policies trained with the simulator's gradients (docs/learning.md).

    import dsim.learn as dl
    ro = dl.Rollout("walker-springs", 16, reward="dense")     # N envs with gradients
    obs, state = ro.reset(seed=0)
    for k in range(H):                                         # closed loop
        obs, reward, state = ro.step(policy(obs), state)       # tensors in one graph
    (-reward_sum).backward()                                   # through policy and physics

    dl.train_bptt("walker-springs", num_envs=16, horizon=8, iterations=100)
    dl.train_shac("walker-springs", num_envs=16, horizon=8, iterations=100)

How the gradient gets through. Step k maps (state_k, a_k) to (obs_{k+1},
r_k, state_{k+1}); a policy makes a_k = pi(obs_k). The backward of
L(obs_1..H, r_0..H-1, state_H) needs, for step k, the adjoint of its end
state: lambda_{k+1} = dL/d(state_{k+1}), which holds the adjoint of
obs_{k+1} *including* what flows back through pi into a_{k+1}, i.e. after
step k+1's backward. So the closed-loop backward alternates physics and
policy step by step, from the last step back:
    grad_a_k, lambda_k = window backward of step k (adj_obs = dL/dobs_{k+1},
                         adj_reward = dL/dr_k, adj_final = lambda_{k+1})
and torch's autograd schedules exactly that: each step is one autograd node
(_StepFn) whose backward is one C call (ds_batch_backward_window, one step,
all N envs across threads), and torch carries lambda through the state
tensor that links the nodes. The whole window costs its substeps once, as a
single backward would. With open-loop actions (no policy between steps)
Rollout.window does the H steps as one node and one C call.

Observations here are state observations (observation.state "full",
"com" or, for articulated models, "joints"), or with images=True the
rendered frames; Rollout.observe(state) is the state observation as a
differentiable function of a state tensor (used at a window's start set from
a tensor, and by an image policy's critic, which reads the state).
goal=True conditions the policy on the episode's goal, which every reset
draws per env from its seed (control-fem: x ~ U[goal.x_min, goal.x_max)):
with images the env's goal image is stacked on every frame (N x 8 x h x w:
frame RGBA, then goal RGBA); with state observations the goal's centre
(ds_env_target, 3 values, m) is appended. The goal is a constant of the
episode: no gradient flows into it.
The fluid envs (smoke-control; smoke-plume has no actions) have no state
observation: they learn from their frames (images=True), their state is
the fluid's (face velocities, density, temperature) and their reward is
sparse (minus the last frame's image loss).
Tensors are float64 on the CPU (the library's precision).
"""
from __future__ import annotations

import copy
import csv
import math
import os
import sys
import time
from typing import NamedTuple

import numpy as np
import torch

from . import _lib
from ._lib import DsimError, ptr, real_dtype
from .lockstep import Lockstep

__all__ = ["Rollout", "MLPPolicy", "CNNPolicy", "Critic", "CNNCritic", "CRITIC_OBS", "RunningNorm", "train_bptt",
           "train_shac", "evaluate", "lr_factor", "LR_SCHEDULES", "ON_FAILURE", "episode_rng", "goal_of"]

_TDTYPE = torch.float64 if real_dtype == np.float64 else torch.float32


def _np(t) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu().numpy()
    return np.ascontiguousarray(t, dtype=real_dtype)


def goal_of(batch: Lockstep, images: bool, image_shape=None) -> torch.Tensor:
    """The current episode's goal of every env of a Lockstep (after a reset),
    a constant: images, its goal image channels first (N x 4 x h x w, RGBA,
    image_shape (4, h, w)); otherwise the target centre (N x 3, m,
    ds_env_target)."""
    rows = []
    for i in range(batch.num_envs):
        e = batch.env(i)
        if images:
            c, h, w = image_shape
            p = _lib.env_goal_image(e)
            if not p:
                raise DsimError(batch.label, f"env {i}: no goal image (reset first)")
            rows.append(np.ctypeslib.as_array(p, shape=(h, w, c)).transpose(2, 0, 1).copy())
        else:
            t = np.empty(3, real_dtype)
            rc = _lib.env_target(e, ptr(t))
            if rc:
                _lib.raise_env(e, batch.label, f"env {i}: target", rc)
            rows.append(t)
    return torch.from_numpy(np.stack(rows))


class Rollout:
    """N envs of one class with gradients (a dsim.Lockstep on the CPU
    engine), stepped with torch tensors whose graph reaches the physics.
    images=True: the observation is the rendered frame of every step
    (N x 4 x h x w, RGBA in [0, 1]; observation.image on), differentiable
    through the rasterizer; otherwise the state observation. goal=True: the
    episode's goal is part of the observation (the module's docstring)."""

    def __init__(self, name: str, num_envs: int, config=None, label: str | None = None, images: bool = False,
                 goal: bool = False, **overrides):
        overrides.setdefault("gradients", True)
        if images:
            overrides.setdefault("observation__image", True)
        self.batch = Lockstep(name, num_envs, config=config, label=label, **overrides)
        phys = self.batch.config["physics"]
        if phys["control_interval"] % phys["checkpoint_every"] and "checkpoint_every" not in overrides:
            # a window's start (a step boundary) must be a checkpoint of the
            # tape: one per step
            self.batch.close()
            overrides["checkpoint_every"] = phys["control_interval"]
            self.batch = Lockstep(name, num_envs, config=config, label=label, **overrides)
        b = self.batch
        self.name, self.label, self.num_envs = name, b.label, b.num_envs
        self.obs_size, self.action_size, self.num_steps = b.obs_size, b.action_size, b.num_steps
        e0 = b.env(0)
        self.state_size = _lib.env_state_size(e0)
        self.action_scale = float(_lib.env_action_scale(e0))
        self.obs_kind = b.config.get("observation", {}).get("state", "com")
        self.images = bool(images)
        render = b.config.get("render", {})
        self.image_shape = (4, int(render.get("height", 0)), int(render.get("width", 0)))
        if self.images:
            if not b.config.get("observation", {}).get("image"):
                raise DsimError(self.label, "dsim.learn images=True needs observation.image true")
            self._state_obs_size = self.obs_size
            self.obs_size = int(np.prod(self.image_shape))
        elif b.config.get("observation", {}).get("image"):
            raise DsimError(self.label, "dsim.learn takes state observations here: set observation.image false, "
                            "or images=True for image observations")
        if self.obs_size == 0:
            raise DsimError(self.label, "dsim.learn needs a state observation (observation.state full, com or joints), "
                            "or images=True (the fluid envs, smoke-control and smoke-plume, observe their frames)")
        self.goal = bool(goal)
        self._env_obs_size = b.obs_size  # what the library's observation adjoint takes
        self._goal = None                # the episode's goal per env (N x 4 x h x w, or N x 3)
        self._goal_pos = None            # images and goal: its centre too (N x 3)
        # the state observation's size (observe(); with images, what a critic on the state sees)
        self.state_obs_size = self._env_obs_size + (3 if self.goal else 0) if self._env_obs_size else 0
        if self.goal:
            self.obs_size += self.obs_size if self.images else 3
        c, h, w = self.image_shape
        self.obs_shape = (c * (2 if self.goal else 1), h, w) if self.images else (self.obs_size,)
        self.epoch = 0  # bumped by every reset / set_state: older graphs are stale
        self._status = np.zeros(self.num_envs, np.int32)

    # -- episode --------------------------------------------------------------------
    @property
    def steps_taken(self) -> int:
        return self.batch.steps_taken

    def reset(self, seed=0):
        """(obs N x obs_size (images: N x 4 x h x w), state N x state_size) at
        substep 0, as constants."""
        img = self._image_buffer()
        obs = self.batch.reset(seed, image=img)
        self.epoch += 1
        # a class may rebuild its model at a reset (control-cloth draws its
        # size D per episode): the state's size is the episode's, one for all
        sizes = [_lib.env_state_size(self.batch.env(i)) for i in range(self.num_envs)]
        i = next((i for i, n in enumerate(sizes) if n != sizes[0]), None)
        if i is not None:
            raise DsimError(self.label, f"dsim.learn: env {i}'s state has {sizes[i]} values this episode, env 0's "
                            f"{sizes[0]}: the envs' models differ (control-cloth draws its size per episode: set "
                            "scene.size_min = scene.size_max)", _lib.DS_ERR_STATE)
        self.state_size = sizes[0]
        if self.goal:
            self._goal = goal_of(self.batch, self.images, self.image_shape)
            if self.images:  # the goal's centre too: the state observation's (observe) goal
                self._goal_pos = goal_of(self.batch, False)
        return self.with_goal(self._obs_tensor(obs, img)), self.state()

    def with_goal(self, obs: torch.Tensor) -> torch.Tensor:
        """obs (N x ... or N x H x ...) with the episode's goal appended
        (images: stacked on the channels), a constant; obs as it is
        without goal=True."""
        if not self.goal:
            return obs
        g = self._goal
        if obs.dim() > g.dim():  # a window's N x H x ...
            g = g.unsqueeze(1).expand(-1, obs.shape[1], *g.shape[1:])
        return torch.cat([obs, g.to(obs.dtype)], dim=obs.dim() - (3 if self.images else 1))

    def _image_buffer(self):
        c, h, w = self.image_shape
        return np.empty((self.num_envs, h, w, c), real_dtype) if self.images else None

    def _obs_tensor(self, obs: np.ndarray, img) -> torch.Tensor:
        """The observation as the policy sees it: images channels first."""
        if img is None:
            return torch.from_numpy(obs)
        return torch.from_numpy(img).permute(0, 3, 1, 2).contiguous()

    def _adj_image(self, g_obs, H: int):
        """An observation adjoint (N x H x 4 x h x w) as the library's image
        adjoint (N x H x h x w x 4); None stays None."""
        if g_obs is None or not self.images:
            return None
        c, h, w = self.image_shape
        return _np(g_obs.reshape(self.num_envs, H, c, h, w).permute(0, 1, 3, 4, 2))

    def state(self) -> torch.Tensor:
        """The current states (N x state_size; dsim/env.h state layout), a constant."""
        s = np.empty((self.num_envs, self.state_size), real_dtype)
        for i in range(self.num_envs):
            rc = _lib.env_get_state(self.batch.env(i), ptr(s[i]), self.state_size)
            if rc:
                _lib.raise_env(self.batch.env(i), self.label, f"env {i}: get_state", rc)
        return torch.from_numpy(s)

    def set_state(self, state: torch.Tensor) -> torch.Tensor:
        """Every env to its row of state (at a step boundary of its episode,
        not ahead of it); returns state itself: steps taken from here are
        differentiable with respect to it."""
        s = _np(state).reshape(self.num_envs, self.state_size)
        for i in range(self.num_envs):
            rc = _lib.env_set_state(self.batch.env(i), ptr(s[i]), self.state_size)
            if rc:
                _lib.raise_env(self.batch.env(i), self.label, f"env {i}: set_state", rc)
        self.epoch += 1
        return state

    def observe(self, state: torch.Tensor) -> torch.Tensor:
        """The state observation of state (N x state_obs_size), differentiable:
        full: positions then velocities; com: the mass-weighted means of both;
        joints: an articulation's q then qd (the state's last entries); with
        goal=True the goal's centre appended. Without images it is the
        observation the policy sees; with images=True it is what a critic on
        the state sees (critic_obs="state"), not the frame."""
        if not self.state_obs_size:
            raise DsimError(self.label, f"dsim.learn: {self.name} has no state observation (observation.state "
                            f"{self.obs_kind!r}); its frames are its observation", _lib.DS_ERR_INVALID)
        n3 = 3 * _lib.env_num_particles(self.batch.env(0))
        x, v = state[:, 1:1 + n3], state[:, 1 + n3:1 + 2 * n3]
        if self.obs_kind == "joints":
            o = state[:, state.shape[1] - self._env_obs_size:]
        elif self.obs_kind == "full":
            o = torch.cat([x, v], dim=1)
        else:
            m = torch.from_numpy(np.stack([self.batch.param(i, "particle.mass") for i in range(self.num_envs)]))
            w = (m / m.sum(dim=1, keepdim=True)).to(state.dtype)
            com = (x.reshape(len(x), -1, 3) * w[:, :, None]).sum(1)
            vel = (v.reshape(len(v), -1, 3) * w[:, :, None]).sum(1)
            o = torch.cat([com, vel], dim=1)
        if self.images:
            return torch.cat([o, self._goal_pos.to(o.dtype)], dim=1) if self.goal else o
        return self.with_goal(o)

    def step(self, actions: torch.Tensor, state: torch.Tensor):
        """One step of every env from state (the current one: what reset,
        set_state or the last step returned) with actions (N x action_size,
        physical units): (obs N x obs_size, reward N, next state)."""
        obs, rew, nxt = _StepFn.apply(self, self.epoch, actions, state)
        return self.with_goal(obs), rew, nxt

    def window(self, state0: torch.Tensor, actions: torch.Tensor):
        """Open loop: set state0 (N x state_size) and step actions (N x H x
        action_size): (obs N x H x obs_size, rewards N x H, final state); its
        backward is one C call for the H steps."""
        obs, rew, fin = _WindowFn.apply(self, state0, actions)
        return self.with_goal(obs), rew, fin

    # -- the C window backward ---------------------------------------------------------
    def backward_window(self, first: int, num_steps: int, adj_obs=None, adj_reward=None, adj_final=None):
        """(grad_actions N x H x A, grad_states0 N x S) of ds_batch_backward_window
        (with images, adj_obs is the adjoint of the image observations)."""
        n, H = self.num_envs, int(num_steps)
        ai = self._adj_image(adj_obs, H)
        if self.images:
            adj_obs = None
        ao = _np(adj_obs).reshape(n, H, self._env_obs_size) if adj_obs is not None else None
        ar = _np(adj_reward).reshape(n, H) if adj_reward is not None else None
        af = _np(adj_final).reshape(n, self.state_size) if adj_final is not None else None
        ga = np.zeros((n, H, self.action_size), real_dtype)
        gs = np.zeros((n, self.state_size), real_dtype)
        rc = _lib.batch_backward_window(self.batch.handle, int(first), H, ptr(ao) if ao is not None else None,
                                        ptr(ai) if ai is not None else None,
                                        ptr(ar) if ar is not None else None, ptr(af) if af is not None else None,
                                        ptr(ga), ptr(gs), ptr(self._status))
        if rc:
            _lib.raise_batch(self.batch.handle, self.label, "backward window failed", rc)
        return ga, gs

    def _check_live(self, epoch: int, last: int):
        if epoch != self.epoch or self.steps_taken < last:
            raise DsimError(self.label, "dsim.learn: the envs were reset or set to another state after this "
                            "step was taken; its tape is gone (detach states at window starts)")


class _StepFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ro: Rollout, epoch: int, actions: torch.Tensor, state: torch.Tensor):
        ro._check_live(epoch, 0)
        k = ro.steps_taken
        img = ro._image_buffer()
        obs, rew = ro.batch.step(_np(actions).reshape(ro.num_envs, ro.action_size), image=img)
        ctx.ro, ctx.epoch, ctx.k = ro, epoch, k
        return ro._obs_tensor(obs, img), torch.from_numpy(rew), ro.state()

    @staticmethod
    def backward(ctx, g_obs, g_rew, g_state):
        ro = ctx.ro
        ro._check_live(ctx.epoch, ctx.k + 1)
        ga, gs = ro.backward_window(ctx.k, 1, g_obs.unsqueeze(1) if ro.images else g_obs, g_rew, g_state)
        return None, None, torch.from_numpy(ga[:, 0]), torch.from_numpy(gs)


class _WindowFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ro: Rollout, state0: torch.Tensor, actions: torch.Tensor):
        a = _np(actions).reshape(ro.num_envs, -1, ro.action_size)
        H = a.shape[1]
        ro.set_state(state0)
        k0 = ro.steps_taken
        obs = []
        rew = np.empty((ro.num_envs, H), real_dtype)
        for k in range(H):
            img = ro._image_buffer()
            o, rew[:, k] = ro.batch.step(a[:, k], image=img)
            obs.append(ro._obs_tensor(o, img))
        ctx.ro, ctx.epoch, ctx.k0, ctx.H = ro, ro.epoch, k0, H
        ctx.s0, ctx.a = _np(state0).copy(), a.copy()
        return torch.stack(obs, 1), torch.from_numpy(rew), ro.state()

    @staticmethod
    def backward(ctx, g_obs, g_rew, g_state):
        ro = ctx.ro
        if ctx.epoch != ro.epoch or ro.steps_taken < ctx.k0 + ctx.H:
            # the envs moved on in the same episode since (another window
            # from an earlier state, as gradcheck runs): replay this one from
            # its inputs, which rebuilds its tape; the envs stay at its end
            ro.set_state(torch.from_numpy(ctx.s0))
            for k in range(ctx.H):
                ro.batch.step(ctx.a[:, k])
        ga, gs = ro.backward_window(ctx.k0, ctx.H, g_obs, g_rew, g_state)
        return None, torch.from_numpy(gs), torch.from_numpy(ga)


# ---- policies and critics ---------------------------------------------------------------
class RunningNorm(torch.nn.Module):
    """Observation normalisation by running mean and variance (Chan's
    parallel update), frozen in the graph: (obs - mean) / sqrt(var + eps),
    clipped to +-clip."""

    def __init__(self, size: int, eps: float = 1e-8, clip: float = 10.0):
        super().__init__()
        self.register_buffer("mean", torch.zeros(size, dtype=_TDTYPE))
        self.register_buffer("var", torch.ones(size, dtype=_TDTYPE))
        self.register_buffer("count", torch.tensor(1e-4, dtype=_TDTYPE))
        self.eps, self.clip = eps, clip

    @torch.no_grad()
    def update(self, x: torch.Tensor):
        x = x.reshape(-1, self.mean.numel())
        bm, bv, bn = x.mean(0), x.var(0, unbiased=False), x.shape[0]
        delta, tot = bm - self.mean, self.count + bn
        self.mean += delta * bn / tot
        self.var = (self.var * self.count + bv * bn + delta ** 2 * self.count * bn / tot) / tot
        self.count = tot

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ((x - self.mean) / torch.sqrt(self.var + self.eps)).clamp(-self.clip, self.clip)


def _mlp(sizes, act=torch.nn.ELU, layer_norm: bool = False):
    """Linear layers with `act` between them (and a LayerNorm before each
    activation with layer_norm)."""
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            if layer_norm:
                layers.append(torch.nn.LayerNorm(sizes[i + 1]))
            layers.append(act())
    return torch.nn.Sequential(*layers).to(_TDTYPE)


LOGSTD_RANGE = (-5.0, 2.0)  # the exploration noise's log standard deviation is clamped to this


class _Policy(torch.nn.Module):
    """a = scale tanh(u): forward() is the deterministic policy (u = the
    network's output, what evaluate() and deployment use); sample() is the
    training policy, u + sigma eps with eps ~ N(0, I) from a given generator
    and sigma = exp(logstd) a learned, state-independent vector (with
    noise_std; reparameterised, so the simulator's gradient reaches mean and
    sigma alike), or forward() when the policy has no noise."""

    def _init_noise(self, action_size: int, noise_std: float | None):
        self.logstd = None
        if noise_std:
            if not noise_std > 0:
                raise ValueError(f"noise_std: {noise_std}; expected a number > 0 (None or 0: no noise)")
            self.logstd = torch.nn.Parameter(torch.full((action_size,), math.log(noise_std), dtype=_TDTYPE))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.action_scale * torch.tanh(self.pre(obs))

    def sample(self, obs: torch.Tensor, gen: torch.Generator | None) -> torch.Tensor:
        u = self.pre(obs)
        if self.logstd is not None:
            eps = torch.randn(u.shape, generator=gen, dtype=u.dtype)
            u = u + torch.exp(self.logstd.clamp(*LOGSTD_RANGE)) * eps
        return self.action_scale * torch.tanh(u)


class MLPPolicy(_Policy):
    """Policy a = scale tanh(MLP(norm(obs))) (physical units); noise_std: the
    training policy's initial exploration noise (see _Policy)."""

    def __init__(self, obs_size: int, action_size: int, hidden=(64, 64), action_scale: float = 1.0,
                 noise_std: float | None = None, layer_norm: bool = False):
        super().__init__()
        self.norm = RunningNorm(obs_size)
        self.net = _mlp([obs_size, *hidden, action_size], layer_norm=layer_norm)
        with torch.no_grad():  # start near the zero action: small last layer
            self.net[-1].weight.mul_(0.1)
            self.net[-1].bias.zero_()
        self.action_scale = float(action_scale)
        self._init_noise(action_size, noise_std)

    def pre(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(self.norm(obs))


def _cnn(c: int, h: int, w: int, channels) -> tuple[torch.nn.Module, int]:
    """Stride-2 4 x 4 convolutions (ELU) flattened: (the module, its feature count)."""
    layers, cin = [], c
    for cout in channels:
        layers += [torch.nn.Conv2d(cin, cout, 4, stride=2, padding=1), torch.nn.ELU()]
        cin = cout
    cnn = torch.nn.Sequential(*layers, torch.nn.Flatten()).to(_TDTYPE)
    with torch.no_grad():
        nfeat = cnn(torch.zeros(1, c, h, w, dtype=_TDTYPE)).shape[1]
    return cnn, nfeat


class CNNPolicy(_Policy):
    """Deterministic policy from pixels: a = scale tanh(MLP(CNN(image))) with
    the image N x 4 x h x w (RGBA in [0, 1], as Rollout(images=True) gives
    it): three stride-2 convolutions (ELU), then the MLP. `norm` normalises
    the CNN's features by running statistics (so trainers that update a
    policy's norm from observations work on the features): one mean and
    variance per channel over all positions (feature_norm "channel", the
    default), or per feature ("feature": a position that sees only the
    background has a variance near 0, and the gear entering it gives
    features of +-clip)."""

    def __init__(self, image_shape, action_size: int, hidden=(64,), action_scale: float = 1.0, channels=(16, 32, 32),
                 noise_std: float | None = None, layer_norm: bool = False, feature_norm: str = "channel"):
        super().__init__()
        if feature_norm not in ("channel", "feature"):
            raise ValueError(f"CNNPolicy feature_norm: {feature_norm!r}; expected 'channel' or 'feature'")
        self.cnn, nfeat = _cnn(*image_shape, channels)
        self.features = nfeat
        self.norm = _FeatureNorm(self.cnn, channels[-1] if feature_norm == "channel" else nfeat)
        self.head = _mlp([nfeat, *hidden, action_size], layer_norm=layer_norm)
        with torch.no_grad():
            self.head[-1].weight.mul_(0.1)
            self.head[-1].bias.zero_()
        self.net = torch.nn.ModuleList([self.cnn, self.head])
        self.action_scale = float(action_scale)
        self._init_noise(action_size, noise_std)

    def pre(self, obs: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(obs))


class _FeatureNorm(torch.nn.Module):
    """The CNN's features, normalised by a RunningNorm; update() takes images
    (what the trainers pass) and updates the statistics of their features."""

    def __init__(self, cnn: torch.nn.Module, size: int):
        super().__init__()
        self.cnn = [cnn]  # not a submodule twice: CNNPolicy owns it
        self.rn = RunningNorm(size)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        """The features of images x as N x (F / size) x size, the statistics'
        index last: one per channel (size = channels) or per feature (size = F)."""
        f = self.cnn[0](x)
        return f.reshape(f.shape[0], self.rn.mean.numel(), -1).transpose(1, 2)

    @torch.no_grad()
    def update(self, x: torch.Tensor):
        self.rn.update(self._split(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rn(self._split(x)).transpose(1, 2).flatten(1)


class Critic(torch.nn.Module):
    """State value V(obs), sharing the policy's observation normaliser."""

    def __init__(self, obs_size: int, norm: RunningNorm, hidden=(64, 64), layer_norm: bool = False):
        super().__init__()
        self.norm = norm
        self.net = _mlp([obs_size, *hidden, 1], layer_norm=layer_norm)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(self.norm(obs)).squeeze(-1)


class CNNCritic(torch.nn.Module):
    """State value V(image) from frames with an encoder of its own (the
    policy's convolutions, not shared: an actor step must not move the
    features the critic reads), for envs whose only observation is their
    frames (critic_obs="pixels"). Its features are not normalised; `norm`
    does nothing (the trainers update a critic's norm from its inputs)."""

    def __init__(self, image_shape, hidden=(64, 64), layer_norm: bool = False, channels=(16, 32, 32)):
        super().__init__()
        cnn, nfeat = _cnn(*image_shape, channels)
        self.net = torch.nn.Sequential(cnn, *_mlp([nfeat, *hidden, 1], layer_norm=layer_norm))
        self.norm = _NoNorm()

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs).squeeze(-1)


class _NoNorm(torch.nn.Module):
    def update(self, x):
        pass

    def forward(self, x):
        return x


CRITIC_OBS = ("auto", "state", "pixels")

# ---- training ------------------------------------------------------------------------------
LR_SCHEDULES = ("constant", "linear")
ON_FAILURE = ("restart", "end")  # what a window in which an env fails does (train_bptt)


class _Log:
    """CSV rows (one per update) and a progress line on stderr; append=True
    continues an existing log (a resumed run) without a second header."""

    def __init__(self, path: str | None, fields, total: int, progress: bool, append: bool = False):
        append = append and bool(path) and os.path.exists(path)
        if append:  # a log from an older version keeps its columns (new ones are left out)
            with open(path, newline="") as f:
                fields = next(csv.reader(f), None) or fields
        self.f = open(path, "a" if append else "w", newline="") if path else None
        self.w = csv.DictWriter(self.f, fieldnames=fields, extrasaction="ignore") if self.f else None
        if self.w and not append:
            self.w.writeheader()
        self.total, self.progress, self.t0 = total, progress, time.time()

    def row(self, r: dict):
        if self.w:
            self.w.writerow(r)
            self.f.flush()
        if self.progress:
            it = r["iteration"] + 1
            bar = "#" * int(30 * it / self.total)
            sys.stderr.write(f"\r[{bar:<30}] {it}/{self.total} steps {r['env_steps']} "
                             f"return/step {r['reward_per_step']:.4g} loss {r['actor_loss']:.4g} "
                             f"{time.time() - self.t0:.0f}s")
            if it == self.total:
                sys.stderr.write("\n")

    def close(self):
        if self.f:
            self.f.close()


def lr_factor(schedule: str, it: int, iterations: int) -> float:
    """The learning rate of update `it` (0-based, of `iterations`) over the
    initial one: constant 1; linear 1 - it / iterations (SHAC's decay: the
    last update's is 1 / iterations, the value at the end 0)."""
    return 1.0 if schedule == "constant" else max(0.0, 1.0 - it / iterations)


@torch.no_grad()
def _polyak(target: torch.nn.Module, critic: torch.nn.Module, tau: float):
    """Soft update of the target critic's weights: theta' <- (1 - tau) theta' + tau theta
    (tau = 1 copies the critic)."""
    for pt, p in zip(target.net.parameters(), critic.net.parameters()):
        pt.mul_(1.0 - tau).add_(p, alpha=tau)


def _td_targets(vals: torch.Tensor, rew: torch.Tensor, gamma: float, lam: float) -> torch.Tensor:
    """TD(lambda) targets of a window, N x H, from the values at obs_0..obs_H
    (N x (H + 1)) and the rewards (N x H):
        G_k = r_k + gamma ((1 - lambda) V(obs_{k+1}) + lambda G_{k+1}),  G_H = V(obs_H)."""
    H = rew.shape[1]
    target = torch.empty_like(rew)
    g = vals[:, -1]
    for k in reversed(range(H)):
        g = rew[:, k] + gamma * ((1 - lam) * vals[:, k + 1] + lam * g)
        target[:, k] = g
    return target


def _fit_critic(s: dict, obs_l, rew: torch.Tensor, ended: bool, a, failed=None) -> float:
    """The critic regressed on the window's TD(lambda) targets (computed with
    the target critic when there is one), critic_iters Adam steps; then the
    target's soft update. obs_l: the critic's inputs, H + 1 of them (the
    window's observations, or their states' observations for critic_obs
    "state"). failed: a mask of envs whose next step failed: their value
    at obs_H is failure_value (the targets bootstrap from it, and obs_H is
    regressed on it). Returns the last step's loss."""
    critic = s["critic"]
    vnet = s["target"] if s["target"] is not None else critic
    xs = [o.detach() for o in obs_l]
    if critic.norm is not s["policy"].norm:  # its own statistics (the policy's moved in the rollout)
        critic.norm.update(torch.stack(xs[:-1], 1).flatten(0, 1))
    with torch.no_grad():
        vals = torch.stack([vnet(o) for o in xs], 1)     # N x (H + 1)
        if ended:
            vals[:, -1] = 0                              # nothing after the episode's last step
        if failed is not None:
            vals[failed, -1] = a["failure_value"]
        y = _td_targets(vals, rew.detach(), a["gamma"], a["lam"]).reshape(-1)
    x = torch.stack(xs[:-1], 1).flatten(0, 1)            # (N H) x obs (x h x w)
    if failed is not None:  # the last states before a failure, whose value is known
        x = torch.cat([x, xs[-1][failed]])
        y = torch.cat([y, torch.full((int(failed.sum()),), float(a["failure_value"]), dtype=y.dtype)])
    closs = 0.0
    for _ in range(a["critic_iters"]):
        s["copt"].zero_grad()
        cl = ((critic(x) - y) ** 2).mean()
        cl.backward()
        s["copt"].step()
        closs = float(cl.detach())
    if s["target"] is not None:
        _polyak(s["target"], critic, a["target_tau"])
    return closs


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


def _is_num(x) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and math.isfinite(x)


def _check_numbers(env: str, a: dict):
    """The trainers' counts and rates: refused with the key and the range
    rather than failing later inside torch (horizon 0 stacks nothing) or
    silently doing nothing (critic_iters 0 fits no critic)."""
    ints = (("iterations", 0, "a whole number >= 0"), ("horizon", 1, "a whole number of steps >= 1"),
            ("critic_iters", 1, "a whole number of critic passes >= 1"))
    for key, lo, what in ints:
        v = a[key]
        if not _is_int(v) or v < lo:
            raise DsimError(env, f"dsim.learn {key}: {v!r}; expected {what}")
    nums = (("gamma", lambda x: 0 < x <= 1, "a number in (0, 1]"), ("lam", lambda x: 0 <= x <= 1, "a number in [0, 1]"),
            ("lr", lambda x: x > 0, "a number > 0"), ("critic_lr", lambda x: x > 0, "a number > 0"),
            ("clip", lambda x: x >= 0, "a number >= 0 (0: no clipping)"))
    for key, ok, what in nums:
        v = a[key]
        if not _is_num(v) or not ok(v):
            raise DsimError(env, f"dsim.learn {key}: {v!r}; expected {what}")


def _check_options(env: str, a: dict, use_critic: bool):
    _check_numbers(env, a)
    if a["lr_schedule"] not in LR_SCHEDULES:
        raise DsimError(env, f"dsim.learn lr_schedule: {a['lr_schedule']!r}; expected one of {', '.join(LR_SCHEDULES)}")
    tau = a["target_tau"]
    if tau is not None and not (_is_num(tau) and 0 <= tau <= 1):
        raise DsimError(env, f"dsim.learn target_tau: {tau}; expected a number in (0, 1] (None or 0: no target critic)")
    if tau and not use_critic:
        raise DsimError(env, "dsim.learn target_tau: needs a critic (train_shac, or train_bptt with "
                        "terminal_value=True)")
    noise = a["noise_std"]
    if noise is not None and not (_is_num(noise) and noise > 0):  # (train_* pass 0 as None)
        raise DsimError(env, f"dsim.learn noise_std: {noise!r}; expected a number > 0 (None or 0: no noise)")
    b = a["betas"]
    if len(b) != 2 or not all(_is_num(x) and 0 <= x < 1 for x in b):
        raise DsimError(env, f"dsim.learn betas: {b!r}; expected two numbers in [0, 1)")
    e = a["encoder_lr"]
    if e is not None and not (_is_num(e) and e > 0):
        raise DsimError(env, f"dsim.learn encoder_lr: {e!r}; expected a number > 0 (None: lr)")
    if a["critic_obs"] not in CRITIC_OBS:
        raise DsimError(env, f"dsim.learn critic_obs: {a['critic_obs']!r}; expected one of {', '.join(CRITIC_OBS)}")
    c = a["action_cost"]
    if not (_is_num(c) and c >= 0):
        raise DsimError(env, f"dsim.learn action_cost: {c!r}; expected a number >= 0 (0: no action penalty)")
    if a["on_failure"] not in ON_FAILURE:
        raise DsimError(env, f"dsim.learn on_failure: {a['on_failure']!r}; expected one of {', '.join(ON_FAILURE)}")
    fv = a["failure_value"]
    if not _is_num(fv):
        raise DsimError(env, f"dsim.learn failure_value: {fv!r}; expected a finite number (the value of a failed "
                        "env's last state)")
    if fv != 0 and a["on_failure"] != "end":
        raise DsimError(env, "dsim.learn failure_value: needs on_failure='end' (under 'restart' a failed window "
                        "makes no update)")
    kb = a["keep_best"]
    if not (_is_int(kb) and kb >= 0):
        raise DsimError(env, f"dsim.learn keep_best: {kb!r}; expected a whole number of episodes >= 0 (0: off)")


def _critic_kind(ro: Rollout, asked: str) -> str:
    """What the critic reads: "obs" (state observations: the policy's own
    input), "state" (an image policy: the state observation, Rollout.observe)
    or "pixels" (the frames, through a CNNCritic); "auto": "obs" without
    images, else "state" where the env has a state observation."""
    if not ro.images:
        if asked == "pixels":
            raise DsimError(ro.label, "dsim.learn critic_obs: 'pixels' needs images=True (the policy sees the state)")
        return "obs"
    if asked == "auto":
        return "state" if ro.state_obs_size else "pixels"
    if asked == "state" and not ro.state_obs_size:
        raise DsimError(ro.label, f"dsim.learn critic_obs: 'state', but {ro.name} has no state observation "
                        f"(observation.state {ro.obs_kind!r}); use 'pixels' or 'auto'")
    return asked


def _build(ro: Rollout, a: dict, use_critic: bool) -> dict:
    """Policy, critic, its target copy (same normaliser, same weights) and the optimisers."""
    hidden, ln, noise = a["hidden"], a["layer_norm"], a["noise_std"]
    if ro.images:  # pixels in: a CNN encoder
        policy = CNNPolicy(ro.obs_shape, ro.action_size, hidden, ro.action_scale, noise_std=noise,
                           layer_norm=ln)  # 8 channels with the goal
    else:
        policy = MLPPolicy(ro.obs_size, ro.action_size, hidden, ro.action_scale, noise_std=noise, layer_norm=ln)
    policy.goal = ro.goal  # evaluate() gives it the goal too
    critic = target = None
    if use_critic:
        kind = a["critic_obs"]

        def make(norm):
            if kind == "obs":      # state observations: the policy's input and normaliser
                return Critic(ro.obs_size, policy.norm, hidden, ln)
            if kind == "state":    # an image policy's critic on the state observation (asymmetric)
                return Critic(ro.state_obs_size, norm, hidden, ln)
            return CNNCritic(ro.obs_shape, hidden, ln)
        critic = make(RunningNorm(ro.state_obs_size) if kind == "state" else None)
        if a["target_tau"]:
            target = make(critic.norm)  # the same statistics
            target.net.load_state_dict(critic.net.state_dict())
            target.net.requires_grad_(False)  # moved by _polyak only
    # the networks and logstd; a CNN's own group when encoder_lr sets its rate ("base_lr": the
    # rate before the schedule's factor)
    groups = [dict(params=list(policy.parameters()), lr=a["lr"], base_lr=a["lr"])]
    if ro.images and a["encoder_lr"]:
        enc = {id(p) for p in policy.cnn.parameters()}
        groups = [dict(params=list(policy.cnn.parameters()), lr=a["encoder_lr"], base_lr=a["encoder_lr"]),
                  dict(params=[p for p in policy.parameters() if id(p) not in enc], lr=a["lr"], base_lr=a["lr"])]
    opt = torch.optim.Adam(groups, betas=a["betas"])
    copt = torch.optim.Adam(critic.net.parameters(), lr=a["critic_lr"], betas=a["betas"]) if critic else None
    return dict(policy=policy, critic=critic, target=target, opt=opt, copt=copt, it=-1, env_steps=0, episode=0,
                best=None, recent=[], failures=[])


def _track_best(s: dict, a: dict, it: int):
    """keep_best: after a training episode ends, the mean return of the
    last ceil(keep_best / num_envs) episode batches (keep_best episodes or
    a few more); when it is the highest so far, a copy of the policy as it
    is now (weights, observation statistics, noise), the policy those
    episodes' updates led to."""
    k = -(-a["keep_best"] // a["num_envs"])
    s["recent"] = (s["recent"] + [float(s["ep_return"].mean())])[-k:]
    if len(s["recent"]) < k:
        return
    m = sum(s["recent"]) / k
    if s["best"] is None or m > s["best"]["return"]:
        s["best"] = dict(policy=copy.deepcopy(s["policy"].state_dict()), iteration=it, env_steps=s["env_steps"],
                         episodes=k * a["num_envs"], **{"return": m})


def _save(path, s: dict, a: dict):
    """Everything a run needs to go on (resume=path): networks, the target
    critic, optimisers, the schedule's position (iteration), env steps and
    episode count, and the arguments."""
    if not path:
        return
    sd = lambda m: m.state_dict() if m is not None else None  # noqa: E731
    torch.save({"iteration": s["it"], "env_steps": s["env_steps"], "episode": s["episode"],
                "best": s["best"], "recent": s["recent"], "failures": s["failures"],
                "policy": sd(s["policy"]), "critic": sd(s["critic"]), "target_critic": sd(s["target"]),
                "optimizers": [o.state_dict() for o in (s["opt"], s["copt"]) if o is not None],
                "args": {k: (list(v) if isinstance(v, tuple) else v) for k, v in a.items()}}, path)


def _restore(path: str, s: dict, a: dict):
    """A checkpoint of the same method, env and networks into s (in place)."""
    ck = torch.load(path, weights_only=False)
    # checkpoints written before these options (critic_obs: an image policy's critic read its CNN's features)
    before = dict(goal=False, noise_std=None, layer_norm=False, critic_obs="obs", encoder_lr=None, action_cost=0.0)
    for key in ("method", "env", "num_envs", "target_tau", "goal", "noise_std", "layer_norm", "critic_obs",
                "encoder_lr", "action_cost"):
        old = ck["args"].get(key, before.get(key))
        if old != a[key]:
            raise DsimError(path, f"resume: the checkpoint's {key} is {old!r}, this run's {a[key]!r}")
    for key, mod in (("policy", s["policy"]), ("critic", s["critic"]), ("target_critic", s["target"])):
        if mod is not None:
            mod.load_state_dict(ck[key])
    for o, st in zip([o for o in (s["opt"], s["copt"]) if o is not None], ck["optimizers"]):
        o.load_state_dict(st)
    s.update(it=ck["iteration"], env_steps=ck["env_steps"], episode=ck["episode"] + 1,  # envs start a new episode
             best=ck.get("best"), recent=list(ck.get("recent", [])), failures=list(ck.get("failures", [])))


class _Window(NamedTuple):
    """What _rollout_window simulated: obs[0] and states[0] are the start's,
    then one entry per completed step (rew and act: one per completed step).
    error: the DsimError of the step that failed (None: every step
    completed); failed: with keep_before_failure, the bool mask of the envs
    whose step failed when steps before it completed (the window can be
    learned from), else None; attempted: the steps simulated, the failed
    one included."""
    obs: list
    rew: list
    states: list
    act: list
    error: Exception | None
    failed: torch.Tensor | None
    attempted: int


def _rollout_window(ro: Rollout, policy, obs, state, H: int, perturb=None, rng=None, gen=None,
                    keep_before_failure: bool = False) -> _Window:
    """H closed-loop steps (fewer at the episode's end) of the training
    policy (policy.sample: with its exploration noise, drawn from gen).
    perturb(ro, k, rng) runs before step k (the episode's step index). A
    step that fails (DsimError) ends the window before it: every env's
    lists stop there (their tape is intact, so the window can still be
    differentiated) and the error is returned, with the failed envs' mask
    under keep_before_failure when steps before it completed."""
    obs_l, rew_l, st_l, act_l = [obs], [], [state], []
    for _ in range(min(H, ro.num_steps - ro.steps_taken)):
        if perturb is not None:
            perturb(ro, ro.steps_taken, rng)
        policy.norm.update(obs.detach())
        act = policy.sample(obs, gen)
        try:
            obs, r, state = ro.step(act, state)
        except DsimError as e:
            mask = ro.batch.failed() if keep_before_failure and rew_l else None
            failed = torch.from_numpy(mask) if mask is not None and mask.any() else None
            return _Window(obs_l, rew_l, st_l, act_l, e, failed, len(rew_l) + 1)
        obs_l.append(obs)
        rew_l.append(r)
        st_l.append(state)
        act_l.append(act)
    return _Window(obs_l, rew_l, st_l, act_l, None, None, len(rew_l))


def _action_costs(act_l, scale: float, cost: float) -> torch.Tensor:
    """The action penalty of each env and step of a window (N x H):
    cost * mean_j (a_j / scale)^2, the actions a (physical units, |a_j| <=
    scale) relative to the policy's bound, so cost is dimensionless: at
    cost c a step at full actuation on every action costs c reward units."""
    a = torch.stack(act_l, 1) / scale                            # N x H x A
    return cost * (a * a).mean(2)


def _actor_step(s: dict, obs_l, rew: torch.Tensor, ended: bool, a: dict, failed=None):
    """One Adam step of the policy on -mean(sum_k gamma^k r_k + gamma^H V(obs_H)) / H
    (V: the target critic if any, else the critic, else 0; obs_l: the
    critic's inputs, differentiable in the window's actions; failed: a mask
    of envs whose next step failed, whose V(obs_H) is the constant
    failure_value); (loss, grad norm). Only the policy's parameters move:
    the critic's encoder is never the policy's, so the actor cannot raise V
    by changing what V reads."""
    H, n = rew.shape[1], rew.shape[0]
    disc = a["gamma"] ** torch.arange(H, dtype=_TDTYPE)
    vnet = s["target"] if s["target"] is not None else s["critic"]
    last_v = vnet(obs_l[-1]) if vnet is not None and not ended else torch.zeros(n, dtype=_TDTYPE)
    if failed is not None:
        last_v = torch.where(failed, torch.full_like(last_v, a["failure_value"]), last_v)
    actor_loss = -((rew * disc).sum(1) + a["gamma"] ** H * last_v).mean() / H
    s["opt"].zero_grad()
    actor_loss.backward()
    params = s["policy"].parameters()
    gn = torch.nn.utils.clip_grad_norm_(params, a["clip"]) if a["clip"] > 0 else torch.tensor(0.0)
    s["opt"].step()
    return float(actor_loss.detach()), float(gn)


def _noise_of(policy) -> float:
    """The mean standard deviation of the training policy's noise (0: none)."""
    if policy.logstd is None:
        return 0.0
    return float(torch.exp(policy.logstd.detach().clamp(*LOGSTD_RANGE)).mean())


def episode_rng(seed: int, episode: int) -> np.random.Generator:
    """The generator the trainers hand to randomize and perturb for an
    episode: a function of (seed, episode) alone, so a run, and a resumed
    run, draws the same perturbations."""
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, int(episode)])


def _train(a: dict, log_csv, checkpoint, checkpoint_every: int, progress: bool, callback, config, overrides,
           overwrite: bool = False, resume: str | None = None, randomize=None, perturb=None):
    env, num_envs, iterations = a["env"], a["num_envs"], a["iterations"]
    use_critic = a["method"] == "shac" or a["terminal_value"]
    _check_options(env, a, use_critic)
    if not overwrite:  # before any work: a finished run's log or policy is never lost
        for path, what in ((log_csv, "log_csv"), (checkpoint, "checkpoint")):
            if path and os.path.exists(path) and not (resume and (path == resume or what == "log_csv")):
                raise DsimError(path, f"{what}: exists; refusing to replace it (overwrite=True replaces it)",
                                _lib.DS_ERR_IO)
    torch.manual_seed(a["seed"])
    np.random.seed(a["seed"])
    ro = Rollout(env, num_envs, config=config, goal=a["goal"], **overrides)
    a["critic_obs"] = _critic_kind(ro, a["critic_obs"])
    if a["encoder_lr"] is not None and not ro.images:
        raise DsimError(env, "dsim.learn encoder_lr: needs images=True (the CNN's learning rate)")
    s = _build(ro, a, use_critic)
    if resume:
        _restore(resume, s, a)
    policy = s["policy"]
    log = _Log(log_csv, ["iteration", "env_steps", "reward_per_step", "actor_loss", "critic_loss", "grad_norm",
                         "seconds", "lr", "noise_std", "episode_return", "failures"], iterations, progress,
               append=bool(resume))
    for f, what in ((randomize, "randomize"), (perturb, "perturb")):
        if f is not None and not callable(f):
            raise DsimError(env, f"{what}: {f!r}; expected a function or None", _lib.DS_ERR_INVALID)

    def new_episode():
        s["ep_return"] = torch.zeros(num_envs, dtype=_TDTYPE)  # each env's rewards so far this episode
        s["rng"] = episode_rng(a["seed"], s["episode"])
        seed = a["seed"] * 100003 + s["episode"] * num_envs
        out = ro.reset(seed)
        if randomize is None:
            return out
        # parameters may be set between episodes only (at substep 0); the
        # second reset starts the episode from them (initial_position too)
        randomize(ro, s["episode"], s["rng"])
        return ro.reset(seed)

    obs, state = new_episode()
    history, t0 = [], time.time()
    for it in range(s["it"] + 1, iterations):
        f = lr_factor(a["lr_schedule"], it, iterations)
        for o, lr0 in ((s["opt"], a["lr"]), (s["copt"], a["critic_lr"])):
            for g in (o.param_groups if o is not None else ()):
                g["lr"] = g.get("base_lr", lr0) * f
        if ro.steps_taken >= ro.num_steps:
            s["episode"] += 1
            obs, state = new_episode()
        gen = torch.Generator().manual_seed((int(a["seed"]) & 0xFFFFFFFF) * 1000003 + it)  # resumes draw alike
        w = _rollout_window(ro, policy, obs.detach(), state.detach(), a["horizon"], perturb, s["rng"], gen,
                            a["on_failure"] == "end")
        s["env_steps"] += w.attempted * num_envs  # the steps simulated, a failed one included
        failed = w.failed  # on_failure "end": the update learns from the steps before the failed one
        if w.error is not None:
            s["failures"].append(dict(iteration=it, env_steps=s["env_steps"], error=str(w.error),
                                      steps_kept=len(w.rew) if failed is not None else 0))
            if failed is None:  # a diverged or inverted env and nothing to learn from: every env starts over
                s["episode"] += 1
                obs, state = new_episode()
                continue
        obs_l, rew_l, st_l, act_l = w.obs, w.rew, w.states, w.act
        rew = torch.stack(rew_l, 1)                               # N x H
        ended = failed is None and ro.steps_taken >= ro.num_steps  # (a cut window bootstraps)
        s["ep_return"] += rew.detach().sum(1)                    # the task's return (logs, keep_best)
        task_reward = float(rew.detach().mean())
        if a["action_cost"]:  # the objective of actor and critic: the reward less the action penalty
            rew = rew - _action_costs(act_l, policy.action_scale, a["action_cost"])
        # the critic's inputs: the observations, or (critic_obs "state") their states' observations
        cobs_l = [ro.observe(st) for st in st_l] if a["critic_obs"] == "state" else obs_l
        actor_loss, gn = _actor_step(s, cobs_l, rew, ended, a, failed)
        closs = _fit_critic(s, cobs_l, rew, ended, a, failed) if s["critic"] is not None else 0.0
        obs, state = obs_l[-1].detach(), st_l[-1].detach()
        s["it"] = it
        if failed is not None:  # the failed envs need a reset, and a lockstep batch resets together
            s["episode"] += 1
            obs, state = new_episode()
        if ended and a["keep_best"]:
            _track_best(s, a, it)
        row = dict(iteration=it, env_steps=s["env_steps"], reward_per_step=task_reward,
                   actor_loss=actor_loss, critic_loss=closs, grad_norm=gn, seconds=time.time() - t0,
                   lr=a["lr"] * f, noise_std=_noise_of(policy), failures=len(s["failures"]),
                   episode_return=float(s["ep_return"].mean()) if ended else None)
        history.append(row)
        log.row(row)
        if callback:
            callback(it, policy, s["env_steps"])
        if checkpoint and checkpoint_every and (it + 1) % checkpoint_every == 0:
            _save(checkpoint, s, a)
    _save(checkpoint, s, a)
    log.close()
    best, best_policy = s["best"], None
    if best is not None:
        best_policy = copy.deepcopy(policy)
        best_policy.load_state_dict(best["policy"])
    return dict(policy=policy, critic=s["critic"], target_critic=s["target"], history=history, rollout=ro,
                failures=s["failures"],
                best_policy=best_policy, best=None if best is None else {k: v for k, v in best.items() if k != "policy"})


_COMMON_ARGS = ("env", "num_envs", "horizon", "iterations", "gamma", "lam", "lr", "critic_lr", "clip", "seed",
                "critic_iters", "lr_schedule", "keep_best", "critic_obs", "encoder_lr", "action_cost", "on_failure",
                "failure_value")


def _run(method: str, terminal_value: bool, kw: dict):
    """train_bptt's and train_shac's common body: their arguments (kw, the
    caller's locals) as _train's settings dict and files."""
    a = {k: kw[k] for k in _COMMON_ARGS}
    a.update(method=method, terminal_value=terminal_value, hidden=tuple(kw["hidden"]),
             target_tau=kw["target_tau"] or None, goal=bool(kw["goal"]), noise_std=kw["noise_std"] or None,
             betas=tuple(kw["betas"]), layer_norm=bool(kw["layer_norm"]))
    return _train(a, kw["log_csv"], kw["checkpoint"], kw["checkpoint_every"], kw["progress"], kw["callback"],
                  kw["config"], kw["overrides"], kw["overwrite"], kw["resume"], kw["randomize"], kw["perturb"])


def train_bptt(env: str, num_envs: int = 16, horizon: int = 8, iterations: int = 100, gamma: float = 0.99,
               lr: float = 1e-3, clip: float = 1.0, seed: int = 0, hidden=(64, 64), terminal_value: bool = False,
               critic_lr: float = 1e-3, lam: float = 0.95, critic_iters: int = 8, lr_schedule: str = "constant",
               target_tau: float | None = None, noise_std: float | None = None, betas=(0.9, 0.999),
               layer_norm: bool = False, keep_best: int = 0, log_csv: str | None = None, checkpoint: str | None = None,
               checkpoint_every: int = 0, resume: str | None = None, progress: bool = False, callback=None,
               config=None, overwrite: bool = False, randomize=None, perturb=None, goal: bool = False,
               critic_obs: str = "auto", encoder_lr: float | None = None, action_cost: float = 0.0,
               on_failure: str = "restart", failure_value: float = 0.0, **overrides):
    """Truncated back-propagation through time: each update rolls the N envs
    `horizon` steps on from where the last window ended (a new episode at
    the end of one), and steps the policy on -mean(sum_k gamma^k r_k +
    gamma^H V(obs_H)) / H, differentiated through policy and physics; V is 0,
    or a TD(lambda) critic with terminal_value. lr_schedule "linear" decays
    both learning rates linearly to 0 over the iterations; target_tau (with
    terminal_value) keeps a target critic, soft-updated by that fraction after
    each critic fit, which gives V in the actor loss and the TD targets.
    callback(iteration, policy, env_steps) runs after every update
    (evaluations). Domain randomisation: randomize(rollout, episode, rng)
    runs at the start of every episode, after a reset, and the episode is
    reset again after it, so per-env parameters it sets hold for the
    episode (e.g. rollout.batch.set_param(i, "contact.mu", [mu]), or
    "initial_position" and "initial_velocity" for the start);
    perturb(rollout, k, rng) before each step k of an episode (e.g. external
    forces through dsim.residual.set_forces(rollout.batch, ...)); rng is
    episode_rng(seed, episode), the same for both within an episode.
    goal=True: the policy sees the episode's goal (Rollout's goal=; each env
    its own, drawn at every reset; with images the CNN takes 8 channels).
    critic_obs (with a critic; images=True): what the critic reads, "state"
    (the state observation, Rollout.observe, with the goal's centre under
    goal=True: an asymmetric actor-critic, the policy alone sees pixels),
    "pixels" (the frames, through a CNNCritic with an encoder of its own)
    or "auto" (the default: "state" where the env has a state observation,
    the fluid envs "pixels"); without images the critic reads the policy's
    observation. encoder_lr (images=True): the learning rate of the CNN's
    convolutions (None: lr, as the rest of the policy), decayed by the same
    schedule. action_cost=c (0: off): actor and critic learn the reward
    less c * mean_j (a_j / action_scale)^2 each step (a control penalty, as
    in Gym's locomotion tasks; differentiated like the reward); the logged
    rewards, episode returns and keep_best stay the task's own.
    on_failure: what a window in which an env fails (an inverted tet, a
    divergence) does. "restart" (the default): no update, every env starts
    a new episode. "end": the failed envs' episodes end at the state before
    the failed step, whose value is failure_value (a constant, e.g. a
    negative number to penalise failures; the actor's terminal value and
    the critic's bootstrap target there, and the critic is regressed on it
    at that state); the window is cut there for every env (the others
    bootstrap from the critic as at any window's end), the update is made
    on the steps before the failed one (their gradient is intact), and
    then every env starts over. A failure in a window's first step makes no
    update under either. Each failure is recorded in "failures" (iteration,
    env_steps, error, steps_kept: the window steps learned from).
    noise_std: train a stochastic policy, scale tanh(u + sigma eps) with
    sigma a learned per-action vector starting at noise_std (clamped to
    exp(LOGSTD_RANGE)), eps drawn from a generator seeded by (seed,
    iteration); the returned policy's forward() is the noise-free one (None:
    deterministic training, the default). betas: Adam's (beta1, beta2) for
    actor and critic (SHAC's paper used (0.7, 0.95)). layer_norm: a LayerNorm
    before each hidden activation of policy and critic. keep_best=K (0:
    off): keep a copy of the policy whenever the mean return of the last K
    training episodes (rounded up to whole batches of num_envs; PPO's
    measure, exploration noise included) is the highest so far; returned
    as "best_policy" with "best" = {"return", "iteration", "env_steps",
    "episodes"}, None until K episodes have ended (checkpoints carry it).
    Returns {"policy", "critic", "target_critic", "history"
    (the CSV rows), "rollout", "best_policy", "best"}. log_csv and checkpoint name files that must
    not exist unless overwrite=True (DsimError before any work); resume=path
    goes on from a checkpoint of the same method, env and networks up to
    `iterations` (the envs start a new episode; a log_csv is appended to,
    the checkpoint may be the resumed file)."""
    return _run("bptt", terminal_value, locals())


def train_shac(env: str, num_envs: int = 16, horizon: int = 8, iterations: int = 100, gamma: float = 0.99,
               lam: float = 0.95, lr: float = 1e-3, critic_lr: float = 1e-3, clip: float = 1.0, seed: int = 0,
               hidden=(64, 64), critic_iters: int = 8, lr_schedule: str = "constant", target_tau: float | None = None,
               noise_std: float | None = None, betas=(0.9, 0.999), layer_norm: bool = False, keep_best: int = 0,
               log_csv: str | None = None, checkpoint: str | None = None, checkpoint_every: int = 0,
               resume: str | None = None, progress: bool = False, callback=None, config=None, overwrite: bool = False,
               randomize=None, perturb=None, goal: bool = False, critic_obs: str = "auto",
               encoder_lr: float | None = None, action_cost: float = 0.0, on_failure: str = "restart",
               failure_value: float = 0.0, **overrides):
    """Short-horizon actor-critic (SHAC, Xu et al. 2022): the actor as in
    train_bptt with the critic's value at the horizon's end; the critic
    regressed on TD(lambda) targets of each window. lr_schedule, target_tau,
    noise_std, betas, layer_norm, keep_best, resume, the files, randomize,
    perturb, goal, critic_obs, encoder_lr, action_cost, on_failure and
    failure_value: as train_bptt."""
    return _run("shac", True, locals())


@torch.no_grad()
def evaluate(policy, env: str, num_envs: int = 4, seed: int = 1000, config=None, goal: bool | None = None,
             on_error: str = "raise", details: bool = False, **overrides):
    """Mean over envs of the undiscounted return of one whole episode (a
    CNNPolicy sees the rendered frames). goal: give the policy the
    episode's goal as Rollout(goal=True) does (None: as it was trained,
    its .goal); env i is reset with seed + i.

    on_error: "raise" (a step that fails, e.g. an inverted tet or a
    non-finite state, raises DsimError naming the env and step) or "end"
    (that env's episode ends at the failed step: its return is the sum of
    the rewards before it, the other envs run on). details=True returns
    {"mean", "returns" (N), "failed_step" (N; -1 for an env that finished),
    "errors" (the failed envs' messages)} instead of the mean."""
    if on_error not in ("raise", "end"):
        raise DsimError(env, f"on_error: {on_error!r}; expected 'raise' or 'end'", _lib.DS_ERR_INVALID)
    overrides.setdefault("gradients", False)
    images = isinstance(policy, CNNPolicy)
    if images:
        overrides.setdefault("observation__image", True)
    goal = bool(getattr(policy, "goal", False)) if goal is None else bool(goal)
    ls = Lockstep(env, num_envs, config=config, **overrides)
    render = ls.config.get("render", {})
    shape = (num_envs, int(render.get("height", 0)), int(render.get("width", 0)), 4)
    g = None

    def as_obs(o, img):
        o = torch.from_numpy(img).permute(0, 3, 1, 2).contiguous() if images else torch.from_numpy(o)
        return torch.cat([o, g], dim=1) if g is not None else o

    img = np.empty(shape, real_dtype) if images else None
    o0 = ls.reset(seed, image=img)
    if goal:
        g = goal_of(ls, images, (4, shape[1], shape[2]))
    obs = as_obs(o0, img)
    total = np.zeros(num_envs)
    failed_step = np.full(num_envs, -1)
    errors = []
    for k in range(ls.num_steps):
        img = np.zeros(shape, real_dtype) if images else None
        act = _np(policy(obs)).copy()
        act[failed_step >= 0] = 0  # an ended env's row: finite, and refused by its env anyway
        o, r, status = ls.step_each(act, image=img)
        new = (status < 0) & (failed_step < 0)
        if new.any():
            if on_error == "raise":
                i = int(np.flatnonzero(new)[0])
                raise DsimError(ls.label, f"evaluate: env {i}", int(status[i]), ls.error(i))
            for i in np.flatnonzero(new):
                failed_step[i] = k
                errors.append(f"env {i}: {ls.error(i)}")
        live = failed_step < 0
        o[~live] = 0  # rows the failed envs did not write
        obs = as_obs(o, img)
        total[live] += r[live]
        if not live.any():
            break
    mean = float(total.mean())
    return dict(mean=mean, returns=total, failed_step=failed_step, errors=errors) if details else mean
