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
rendered frames; Rollout.observe(state) is the observation as a differentiable
function of a state tensor (used at a window's start set from a tensor).
The fluid envs (smoke-control; smoke-plume has no actions) have no state
observation: they learn from their frames (images=True), their state is
the fluid's (face velocities, density, temperature) and their reward is
sparse (minus the last frame's image loss).
Tensors are float64 on the CPU (the library's precision).
"""
from __future__ import annotations

import csv
import os
import sys
import time

import numpy as np
import torch

from . import _lib
from ._lib import DsimError, ptr, real_dtype
from .lockstep import Lockstep

__all__ = ["Rollout", "MLPPolicy", "CNNPolicy", "Critic", "RunningNorm", "train_bptt", "train_shac", "evaluate"]

_TDTYPE = torch.float64 if real_dtype == np.float64 else torch.float32


def _np(t) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu().numpy()
    return np.ascontiguousarray(t, dtype=real_dtype)


class Rollout:
    """N envs of one class with gradients (a dsim.Lockstep on the CPU
    engine), stepped with torch tensors whose graph reaches the physics.
    images=True: the observation is the rendered frame of every step
    (N x 4 x h x w, RGBA in [0, 1]; observation.image on), differentiable
    through the rasterizer; otherwise the state observation."""

    def __init__(self, name: str, num_envs: int, config=None, label: str | None = None, images: bool = False,
                 **overrides):
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
        return self._obs_tensor(obs, img), self.state()

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
        """The observation of state (N x obs_size), differentiable: full:
        positions then velocities; com: the mass-weighted means of both;
        joints: an articulation's q then qd (the state's last obs_size
        entries)."""
        n3 = 3 * _lib.env_num_particles(self.batch.env(0))
        x, v = state[:, 1:1 + n3], state[:, 1 + n3:1 + 2 * n3]
        if self.obs_kind == "joints":
            return state[:, state.shape[1] - self.obs_size:]
        if self.obs_kind == "full":
            return torch.cat([x, v], dim=1)
        m = torch.from_numpy(np.stack([self.batch.param(i, "particle.mass") for i in range(self.num_envs)]))
        w = (m / m.sum(dim=1, keepdim=True)).to(state.dtype)
        com = (x.reshape(len(x), -1, 3) * w[:, :, None]).sum(1)
        vel = (v.reshape(len(v), -1, 3) * w[:, :, None]).sum(1)
        return torch.cat([com, vel], dim=1)

    def step(self, actions: torch.Tensor, state: torch.Tensor):
        """One step of every env from state (the current one: what reset,
        set_state or the last step returned) with actions (N x action_size,
        physical units): (obs N x obs_size, reward N, next state)."""
        return _StepFn.apply(self, self.epoch, actions, state)

    def window(self, state0: torch.Tensor, actions: torch.Tensor):
        """Open loop: set state0 (N x state_size) and step actions (N x H x
        action_size): (obs N x H x obs_size, rewards N x H, final state); its
        backward is one C call for the H steps."""
        return _WindowFn.apply(self, state0, actions)

    # -- the C window backward ---------------------------------------------------------
    def backward_window(self, first: int, num_steps: int, adj_obs=None, adj_reward=None, adj_final=None):
        """(grad_actions N x H x A, grad_states0 N x S) of ds_batch_backward_window
        (with images, adj_obs is the adjoint of the image observations)."""
        n, H = self.num_envs, int(num_steps)
        ai = self._adj_image(adj_obs, H)
        if self.images:
            adj_obs = None
        ao = _np(adj_obs).reshape(n, H, self.obs_size) if adj_obs is not None else None
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


def _mlp(sizes, act=torch.nn.ELU):
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(act())
    return torch.nn.Sequential(*layers).to(_TDTYPE)


class MLPPolicy(torch.nn.Module):
    """Deterministic policy a = scale tanh(MLP(norm(obs))) (physical units)."""

    def __init__(self, obs_size: int, action_size: int, hidden=(64, 64), action_scale: float = 1.0):
        super().__init__()
        self.norm = RunningNorm(obs_size)
        self.net = _mlp([obs_size, *hidden, action_size])
        with torch.no_grad():  # start near the zero action: small last layer
            self.net[-1].weight.mul_(0.1)
            self.net[-1].bias.zero_()
        self.action_scale = float(action_scale)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.action_scale * torch.tanh(self.net(self.norm(obs)))


class CNNPolicy(torch.nn.Module):
    """Deterministic policy from pixels: a = scale tanh(MLP(CNN(image))) with
    the image N x 4 x h x w (RGBA in [0, 1], as Rollout(images=True) gives
    it): three stride-2 convolutions (ELU), then the MLP. `norm` is a
    RunningNorm of the CNN's features (so trainers that update a policy's
    norm from observations work on the features)."""

    def __init__(self, image_shape, action_size: int, hidden=(64,), action_scale: float = 1.0, channels=(16, 32, 32)):
        super().__init__()
        c, h, w = image_shape
        layers, cin = [], c
        for cout in channels:
            layers += [torch.nn.Conv2d(cin, cout, 4, stride=2, padding=1), torch.nn.ELU()]
            cin = cout
        self.cnn = torch.nn.Sequential(*layers, torch.nn.Flatten()).to(_TDTYPE)
        with torch.no_grad():
            nfeat = self.cnn(torch.zeros(1, c, h, w, dtype=_TDTYPE)).shape[1]
        self.features = nfeat
        self.norm = _FeatureNorm(self.cnn, nfeat)
        self.head = _mlp([nfeat, *hidden, action_size])
        with torch.no_grad():
            self.head[-1].weight.mul_(0.1)
            self.head[-1].bias.zero_()
        self.net = torch.nn.ModuleList([self.cnn, self.head])  # the trainers' optimisers take net.parameters()
        self.action_scale = float(action_scale)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.action_scale * torch.tanh(self.head(self.norm(obs)))


class _FeatureNorm(torch.nn.Module):
    """The CNN's features, normalised by a RunningNorm; update() takes images
    (what the trainers pass) and updates the statistics of their features."""

    def __init__(self, cnn: torch.nn.Module, nfeat: int):
        super().__init__()
        self.cnn = [cnn]  # not a submodule twice: CNNPolicy owns it
        self.rn = RunningNorm(nfeat)

    @torch.no_grad()
    def update(self, x: torch.Tensor):
        self.rn.update(self.cnn[0](x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rn(self.cnn[0](x))


class Critic(torch.nn.Module):
    """State value V(obs), sharing the policy's observation normaliser."""

    def __init__(self, obs_size: int, norm: RunningNorm, hidden=(64, 64)):
        super().__init__()
        self.norm = norm
        self.net = _mlp([obs_size, *hidden, 1])

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(self.norm(obs)).squeeze(-1)


# ---- training ------------------------------------------------------------------------------
class _Log:
    """CSV rows (one per update) and a progress line on stderr."""

    def __init__(self, path: str | None, fields, total: int, progress: bool):
        self.f = open(path, "w", newline="") if path else None
        self.w = csv.DictWriter(self.f, fieldnames=fields) if self.f else None
        if self.w:
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


def _save(path, it, policy, critic, opts, args):
    if not path:
        return
    torch.save({"iteration": it, "policy": policy.state_dict(), "critic": critic.state_dict() if critic else None,
                "optimizers": [o.state_dict() for o in opts], "args": args}, path)


def _rollout_window(ro: Rollout, policy, obs, state, H: int, gamma: float):
    """H closed-loop steps (fewer at the episode's end): (obs list, reward
    list, final state); obs[0] is the start observation."""
    obs_l, rew_l = [obs], []
    for _ in range(min(H, ro.num_steps - ro.steps_taken)):
        policy.norm.update(obs.detach())
        obs, r, state = ro.step(policy(obs), state)
        obs_l.append(obs)
        rew_l.append(r)
    return obs_l, rew_l, state


def _train(method: str, env: str, num_envs: int, horizon: int, iterations: int, gamma: float, lam: float,
           lr: float, critic_lr: float, clip: float, seed: int, hidden, terminal_value: bool, critic_iters: int,
           log_csv, checkpoint, checkpoint_every: int, progress: bool, callback, config, overrides,
           overwrite: bool = False):
    if not overwrite:  # before any work: a finished run's log or policy is never lost
        for path, what in ((log_csv, "log_csv"), (checkpoint, "checkpoint")):
            if path and os.path.exists(path):
                raise DsimError(path, f"{what}: exists; refusing to replace it (overwrite=True replaces it)",
                                _lib.DS_ERR_IO)
    torch.manual_seed(seed)
    np.random.seed(seed)
    ro = Rollout(env, num_envs, config=config, **overrides)
    if ro.images:  # pixels in: a CNN encoder, the critic on its (normalised) features
        policy = CNNPolicy(ro.image_shape, ro.action_size, hidden, ro.action_scale)
    else:
        policy = MLPPolicy(ro.obs_size, ro.action_size, hidden, ro.action_scale)
    use_critic = method == "shac" or terminal_value
    critic = Critic(policy.features if ro.images else ro.obs_size, policy.norm, hidden) if use_critic else None
    opt = torch.optim.Adam(policy.net.parameters(), lr=lr)
    copt = torch.optim.Adam(critic.net.parameters(), lr=critic_lr) if critic else None
    args = dict(method=method, env=env, num_envs=num_envs, horizon=horizon, gamma=gamma, lam=lam, lr=lr, seed=seed)
    log = _Log(log_csv, ["iteration", "env_steps", "reward_per_step", "actor_loss", "critic_loss", "grad_norm",
                         "seconds"], iterations, progress)
    episode = 0
    obs, state = ro.reset(seed * 100003 + episode * num_envs)
    env_steps, history, t0 = 0, [], time.time()
    for it in range(iterations):
        if ro.steps_taken >= ro.num_steps:
            episode += 1
            obs, state = ro.reset(seed * 100003 + episode * num_envs)
        try:
            obs_l, rew_l, state = _rollout_window(ro, policy, obs.detach(), state.detach(), horizon, gamma)
        except DsimError:  # a diverged or inverted env: start every env over
            episode += 1
            obs, state = ro.reset(seed * 100003 + episode * num_envs)
            continue
        H = len(rew_l)
        env_steps += H * num_envs
        rew = torch.stack(rew_l, 1)                               # N x H
        disc = gamma ** torch.arange(H, dtype=_TDTYPE)
        ret = (rew * disc).sum(1)
        last_v = critic(obs_l[-1]) if critic is not None else torch.zeros(num_envs, dtype=_TDTYPE)
        if ro.steps_taken >= ro.num_steps:
            last_v = last_v * 0  # the episode ends: nothing after it
        actor_loss = -(ret + gamma ** H * last_v).mean() / H
        opt.zero_grad()
        actor_loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(policy.net.parameters(), clip) if clip > 0 else torch.tensor(0.0)
        opt.step()
        closs = 0.0
        if critic is not None:  # TD(lambda) targets from the (detached) window
            with torch.no_grad():
                vals = torch.stack([critic(o) for o in obs_l], 1)   # N x (H + 1)
                if ro.steps_taken >= ro.num_steps:
                    vals[:, -1] = 0
                target = torch.empty(num_envs, H, dtype=_TDTYPE)
                g = vals[:, -1]
                for k in reversed(range(H)):
                    g = rew[:, k].detach() + gamma * ((1 - lam) * vals[:, k + 1] + lam * g)
                    target[:, k] = g
            x = torch.stack([o.detach() for o in obs_l[:-1]], 1).flatten(0, 1)  # (N H) x obs (x h x w)
            y = target.reshape(-1)
            for _ in range(critic_iters):
                copt.zero_grad()
                cl = ((critic(x) - y) ** 2).mean()
                cl.backward()
                copt.step()
                closs = float(cl.detach())
        obs, state = obs_l[-1].detach(), state.detach()
        row = dict(iteration=it, env_steps=env_steps, reward_per_step=float(rew.detach().mean()),
                   actor_loss=float(actor_loss.detach()), critic_loss=closs, grad_norm=float(gn),
                   seconds=time.time() - t0)
        history.append(row)
        log.row(row)
        if callback:
            callback(it, policy, env_steps)
        if checkpoint and checkpoint_every and (it + 1) % checkpoint_every == 0:
            _save(checkpoint, it, policy, critic, [opt] + ([copt] if copt else []), args)
    if checkpoint:
        _save(checkpoint, iterations - 1, policy, critic, [opt] + ([copt] if copt else []), args)
    log.close()
    return dict(policy=policy, critic=critic, history=history, rollout=ro)


def train_bptt(env: str, num_envs: int = 16, horizon: int = 8, iterations: int = 100, gamma: float = 0.99,
               lr: float = 1e-3, clip: float = 1.0, seed: int = 0, hidden=(64, 64), terminal_value: bool = False,
               critic_lr: float = 1e-3, lam: float = 0.95, critic_iters: int = 8, log_csv: str | None = None,
               checkpoint: str | None = None, checkpoint_every: int = 0, progress: bool = False, callback=None,
               config=None, overwrite: bool = False, **overrides):
    """Truncated back-propagation through time: each update rolls the N envs
    `horizon` steps on from where the last window ended (a new episode at
    the end of one), and steps the policy on -mean(sum_k gamma^k r_k +
    gamma^H V(obs_H)) / H, differentiated through policy and physics; V is 0,
    or a TD(lambda) critic with terminal_value. callback(iteration, policy,
    env_steps) runs after every update (evaluations). Returns {"policy", "critic",
    "history" (the CSV rows), "rollout"}. log_csv and checkpoint name files
    that must not exist unless overwrite=True (DsimError before any work)."""
    return _train("bptt", env, num_envs, horizon, iterations, gamma, lam, lr, critic_lr, clip, seed, hidden,
                  terminal_value, critic_iters, log_csv, checkpoint, checkpoint_every, progress, callback, config,
                  overrides, overwrite)


def train_shac(env: str, num_envs: int = 16, horizon: int = 8, iterations: int = 100, gamma: float = 0.99,
               lam: float = 0.95, lr: float = 1e-3, critic_lr: float = 1e-3, clip: float = 1.0, seed: int = 0,
               hidden=(64, 64), critic_iters: int = 8, log_csv: str | None = None, checkpoint: str | None = None,
               checkpoint_every: int = 0, progress: bool = False, callback=None, config=None,
               overwrite: bool = False, **overrides):
    """Short-horizon actor-critic (SHAC, Xu et al. 2022): the actor as in
    train_bptt with the critic's value at the horizon's end; the critic
    regressed on TD(lambda) targets of each window."""
    return _train("shac", env, num_envs, horizon, iterations, gamma, lam, lr, critic_lr, clip, seed, hidden, True,
                  critic_iters, log_csv, checkpoint, checkpoint_every, progress, callback, config, overrides,
                  overwrite)


@torch.no_grad()
def evaluate(policy, env: str, num_envs: int = 4, seed: int = 1000, config=None, **overrides) -> float:
    """Mean over envs of the undiscounted return of one whole episode (a
    CNNPolicy sees the rendered frames)."""
    overrides.setdefault("gradients", False)
    images = isinstance(policy, CNNPolicy)
    if images:
        overrides.setdefault("observation__image", True)
    ls = Lockstep(env, num_envs, config=config, **overrides)
    render = ls.config.get("render", {})
    shape = (num_envs, int(render.get("height", 0)), int(render.get("width", 0)), 4)

    def as_obs(o, img):
        return torch.from_numpy(img).permute(0, 3, 1, 2).contiguous() if images else torch.from_numpy(o)

    img = np.empty(shape, real_dtype) if images else None
    obs = as_obs(ls.reset(seed, image=img), img)
    total = np.zeros(num_envs)
    for _ in range(ls.num_steps):
        img = np.empty(shape, real_dtype) if images else None
        o, r = ls.step(_np(policy(obs)), image=img)
        obs = as_obs(o, img)
        total += r
    return float(total.mean())
