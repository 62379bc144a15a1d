"""dsim.torch: episodes as differentiable torch functions (the C adjoint
does the backward; no finite differences).

    import torch, dsim, dsim.torch as dt
    env = dsim.Env("control-fem", substeps=640)
    actions = torch.zeros(env.num_steps, env.action_size, dtype=torch.float64, requires_grad=True)
    k_mu = torch.tensor(env.param("tet.k_mu"), requires_grad=True)
    loss = dt.episode(env, actions, {"tet.k_mu": k_mu}, seed=0)          # built-in loss
    obs = dt.episode(env, actions, seed=0, output="obs")                  # T x obs_size
    loss.backward()          # actions.grad, k_mu.grad

episode(env, actions, params=None, seed=0, output="loss" | "obs" | "rewards")
resets env with seed, sets every named parameter (their values stay set on
the env afterwards), steps actions (T x A, T <= num_steps; T rows or fewer)
and returns the built-in loss (a scalar), the observations (T x obs_size)
or the rewards (T). Its backward runs the episode's adjoint from the
incoming gradient (the loss's, or adjoints of observations / rewards) and
gives d/d(actions) and d/d(each parameter). Tensors are computed in the
library's precision (float64 by default) on the CPU.

batch_episode(batch, actions, params=None, seeds=0, output=...) does the
same for the N envs of a dsim.Lockstep (actions N x T x A, params N x
values): one forward and one backward pass for all (on a GPU, one engine).
"""
from __future__ import annotations

import numpy as np
import torch

from ._lib import DsimError, real_dtype
from .env import Env

__all__ = ["episode", "EpisodeFunction", "batch_episode", "BatchEpisodeFunction"]

_TDTYPE = torch.float64 if real_dtype == np.float64 else torch.float32


def _np(t: torch.Tensor) -> np.ndarray:
    return np.ascontiguousarray(t.detach().cpu().numpy(), dtype=real_dtype)


class EpisodeFunction(torch.autograd.Function):
    """forward(env, seed, output, names, actions, *param_values)."""

    @staticmethod
    def forward(ctx, env: Env, seed: int, output: str, names: tuple, actions: torch.Tensor, *params):
        a = _np(actions)
        T = a.shape[0]
        env.reset(seed)
        for name, p in zip(names, params):
            env.set_param(name, _np(p).reshape(-1))
        obs = np.empty((T, env.obs_size), real_dtype)
        rew = np.empty(T, real_dtype)
        for k in range(T):
            _, rew[k], _ = env.step(a[k], obs=obs[k])
        ctx.env, ctx.output, ctx.names, ctx.T = env, output, names, T
        ctx.shapes = [p.shape for p in params]
        ctx.device = actions.device
        if output == "loss":
            return torch.tensor(env.loss(), dtype=_TDTYPE, device=actions.device)
        if output == "obs":
            return torch.from_numpy(obs).to(actions.device)
        return torch.from_numpy(rew).to(actions.device)

    @staticmethod
    def backward(ctx, grad_out):
        env = ctx.env
        if env.steps_taken != ctx.T:
            raise DsimError(env.label, "dsim.torch: the env was stepped or reset between forward and backward; "
                            "the tape holds another episode")
        g = _np(grad_out)
        if ctx.output == "loss":
            _, ga = env.backward_loss()
            scale = float(grad_out.detach().reshape(-1)[0])
            ga *= scale
        else:
            adj_obs = g.reshape(ctx.T, env.obs_size) if ctx.output == "obs" else None
            adj_rew = g.reshape(ctx.T) if ctx.output == "rewards" else None
            ga = env.backward_adjoints(adj_obs=adj_obs, adj_reward=adj_rew)
            scale = 1.0
        grads = [torch.from_numpy(ga).to(ctx.device)]
        for name, shape in zip(ctx.names, ctx.shapes):
            gp = env.param_grad(name) * scale
            grads.append(torch.from_numpy(gp.reshape(shape)).to(ctx.device))
        return (None, None, None, None, *grads)


def episode(env: Env, actions: torch.Tensor, params: dict | None = None, seed: int = 0, output: str = "loss"):
    """See the module's doc."""
    if output not in ("loss", "obs", "rewards"):
        raise DsimError(env.label, f"output must be 'loss', 'obs' or 'rewards', not {output!r}")
    if not isinstance(actions, torch.Tensor) or actions.dim() != 2 or actions.shape[1] != env.action_size:
        raise DsimError(env.label, f"actions must be a tensor of shape (T, {env.action_size}), got "
                        f"{tuple(actions.shape) if isinstance(actions, torch.Tensor) else type(actions).__name__}")
    if not 1 <= actions.shape[0] <= env.num_steps:
        raise DsimError(env.label, f"actions has {actions.shape[0]} rows; the episode has {env.num_steps} steps")
    params = params or {}
    names = tuple(params)
    for n in names:
        env.param(n)  # unknown names raise here, with the library's message
    vals = [p if isinstance(p, torch.Tensor) else torch.as_tensor(p, dtype=_TDTYPE) for p in params.values()]
    return EpisodeFunction.apply(env, int(seed), output, names, actions, *vals)


class BatchEpisodeFunction(torch.autograd.Function):
    """forward(batch, seeds, output, names, actions, *param_values): N episodes of a dsim.Lockstep."""

    @staticmethod
    def forward(ctx, batch, seeds, output: str, names: tuple, actions: torch.Tensor, *params):
        a = _np(actions)
        N, T = a.shape[0], a.shape[1]
        batch.reset(seeds)
        for name, p in zip(names, params):
            v = _np(p).reshape(N, -1)
            for i in range(N):
                batch.set_param(i, name, v[i])
        obs = np.empty((N, T, batch.obs_size), real_dtype)
        rew = np.empty((N, T), real_dtype)
        for k in range(T):
            obs[:, k], rew[:, k] = batch.step(a[:, k])
        ctx.batch, ctx.output, ctx.names, ctx.T = batch, output, names, T
        ctx.shapes = [p.shape for p in params]
        ctx.device = actions.device
        if output == "loss":
            return torch.from_numpy(batch.loss()).to(actions.device)
        if output == "obs":
            return torch.from_numpy(obs).to(actions.device)
        return torch.from_numpy(rew).to(actions.device)

    @staticmethod
    def backward(ctx, grad_out):
        b = ctx.batch
        if b.steps_taken != ctx.T:
            raise DsimError(b.label, "dsim.torch: the batch was stepped or reset between forward and backward; "
                            "the tape holds other episodes")
        g = _np(grad_out)
        N = b.num_envs
        if ctx.output == "loss":
            _, ga = b.backward_loss()
            scale = g.reshape(N)
            ga *= scale[:, None, None]
        else:
            ga = b.backward_adjoints(adj_obs=g if ctx.output == "obs" else None,
                                     adj_reward=g if ctx.output == "rewards" else None)
            scale = np.ones(N)
        grads = [torch.from_numpy(ga).to(ctx.device)]
        for name, shape in zip(ctx.names, ctx.shapes):
            gp = np.stack([b.param_grad(i, name) * scale[i] for i in range(N)])
            grads.append(torch.from_numpy(gp.reshape(shape)).to(ctx.device))
        return (None, None, None, None, *grads)


def batch_episode(batch, actions: torch.Tensor, params: dict | None = None, seeds=0, output: str = "loss"):
    """N episodes of a dsim.Lockstep at once: actions (N x T x action_size),
    params {name: tensor (N x values)} (env i gets row i), seeds (N, or an
    int s: env i gets s + i). Returns the losses (N), observations (N x T x
    obs_size) or rewards (N x T); the backward is the batch's one pass (one
    engine and its tape on a GPU)."""
    if output not in ("loss", "obs", "rewards"):
        raise DsimError(batch.label, f"output must be 'loss', 'obs' or 'rewards', not {output!r}")
    N, A = batch.num_envs, batch.action_size
    if not isinstance(actions, torch.Tensor) or actions.dim() != 3 or actions.shape[0] != N or actions.shape[2] != A:
        raise DsimError(batch.label, f"actions must be a tensor of shape ({N}, T, {A}), got "
                        f"{tuple(actions.shape) if isinstance(actions, torch.Tensor) else type(actions).__name__}")
    if not 1 <= actions.shape[1] <= batch.num_steps:
        raise DsimError(batch.label, f"actions has {actions.shape[1]} steps; the episode has {batch.num_steps}")
    params = params or {}
    names = tuple(params)
    vals = [p if isinstance(p, torch.Tensor) else torch.as_tensor(p, dtype=_TDTYPE) for p in params.values()]
    for n, v in zip(names, vals):
        want = batch.param(0, n).size
        if v.numel() != N * want:
            raise DsimError(batch.label, f"params[{n!r}] must hold {N} x {want} values (one row per env), got "
                            f"{tuple(v.shape)}")
    return BatchEpisodeFunction.apply(batch, seeds, output, names, actions, *vals)
