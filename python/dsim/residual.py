"""dsim.residual: hybrid models, a torch module adding a force to every
particle inside the simulation at every step, trained end to end through
the physics (docs/learning.md, "Learned residual forces").

    import dsim.learn as dl
    from dsim.residual import ResidualForce, rollout, fit
    ro = dl.Rollout("control-cloth", 20, reward="dense", observation={"state": "full"})
    model = ResidualForce(ro)                                # per-particle MLP of (x - com, v)
    xs = rollout(ro, model, seed=0, actions=a0)              # N x H x nparticle*3, differentiable
    loss = ((xs - observed) ** 2).mean(); loss.backward()    # into model's weights

How the gradient gets through. Step k maps (state_k, a_k, F_k) to
(obs_{k+1}, r_k, state_{k+1}) with F_k = model(state_k) (N x nparticle x 3,
N) held over the step's substeps (ds_env_set_external_force). As for a
closed-loop policy (dsim.learn), F_k depends on the state the earlier steps
produced, so each step is one autograd node whose backward is one
ds_batch_backward_window of one step, giving dL/da_k, dL/d(state_k) and,
through ds_env_external_force_grad, dL/dF_k = sum over the step's substeps
of the engine's dL/d(f_ext); torch carries dL/d(state) from node to node and
through the model into its weights.
"""
from __future__ import annotations

import time

import numpy as np
import torch

from . import _lib
from ._lib import DsimError, ptr, real_dtype

__all__ = ["ResidualForce", "set_forces", "force_grad", "rollout", "fit", "positions"]

_TDTYPE = torch.float64 if real_dtype == np.float64 else torch.float32


def _np(t) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        t = t.detach().cpu().numpy()
    return np.ascontiguousarray(t, dtype=real_dtype)


def set_forces(ro, forces):
    """The external force of every env of ro (a dsim.learn.Rollout or a
    dsim.Lockstep) from the next step on: forces N x nparticle*3, N (None:
    zero); held until set again, cleared by a reset."""
    b = getattr(ro, "batch", ro)
    n = b.num_envs
    f = None if forces is None else _np(forces).reshape(n, -1)
    for i in range(n):
        e = b.env(i)
        rc = _lib.env_set_external_force(e, ptr(f[i]) if f is not None else None)
        if rc:
            _lib.raise_env(e, b.label, f"env {i}: set_external_force", rc)


def force_grad(ro, step: int) -> np.ndarray:
    """dL/d(force of `step`) of the last backward of every env (N x nparticle*3)."""
    b = getattr(ro, "batch", ro)
    rows = []
    for i in range(b.num_envs):
        e = b.env(i)
        g, ns = _lib.RP(), _lib.ctypes.c_int()
        rc = _lib.env_external_force_grad_c(e, _lib.ctypes.byref(g), _lib.ctypes.byref(ns))
        if rc:
            _lib.raise_env(e, b.label, f"env {i}: external_force_grad", rc)
        n3 = 3 * _lib.env_num_particles(e)
        a = np.ctypeslib.as_array(g, shape=(ns.value * n3,))
        rows.append(a[step * n3:(step + 1) * n3].copy())
    return np.stack(rows)


def positions(ro, state: torch.Tensor) -> torch.Tensor:
    """The particle positions of a state tensor (N x nparticle*3)."""
    n3 = 3 * _lib.env_num_particles(ro.batch.env(0))
    return state[:, 1:1 + n3]


class _ForceStepFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ro, epoch: int, actions: torch.Tensor, forces: torch.Tensor, state: torch.Tensor):
        ro._check_live(epoch, 0)
        k = ro.steps_taken
        set_forces(ro, forces)
        obs, rew = ro.batch.step(_np(actions).reshape(ro.num_envs, ro.action_size))
        ctx.ro, ctx.epoch, ctx.k = ro, epoch, k
        ctx.inputs = (_np(actions).copy(), _np(forces).copy(), _np(state).copy())
        return torch.from_numpy(obs), torch.from_numpy(rew), ro.state()

    @staticmethod
    def backward(ctx, g_obs, g_rew, g_state):
        ro = ctx.ro
        if ctx.epoch != ro.epoch or ro.steps_taken < ctx.k + 1:
            # the envs were set elsewhere since (gradcheck's evaluations, an
            # earlier node's replay): replay this step from its inputs in the
            # current episode, which rebuilds its tape (stepped on first when
            # the episode is behind the step's start, as set_state needs)
            a, f, s = ctx.inputs
            while ro.steps_taken < ctx.k:
                set_forces(ro, None)
                ro.batch.step(np.zeros((ro.num_envs, ro.action_size), real_dtype))
            ro.set_state(torch.from_numpy(s))
            set_forces(ro, f)
            ro.batch.step(a.reshape(ro.num_envs, ro.action_size))
        ga, gs = ro.backward_window(ctx.k, 1, g_obs, g_rew, g_state)
        gf = force_grad(ro, ctx.k)
        return None, None, torch.from_numpy(ga[:, 0]), torch.from_numpy(gf), torch.from_numpy(gs)


def step(ro, actions: torch.Tensor, forces: torch.Tensor, state: torch.Tensor):
    """One step of every env of ro (a dsim.learn.Rollout) from state (its
    current one) with actions (N x action_size) and external forces
    (N x nparticle*3, N) held over the step: (obs, reward, next state), all
    differentiable with respect to actions, forces and state."""
    return _ForceStepFn.apply(ro, ro.epoch, actions, forces, state)


class ResidualForce(torch.nn.Module):
    """A force on every particle from its own features, one MLP shared by
    the particles: F_i = force_scale * MLP(v_i / velocity_scale) with inputs
    "velocity", or of (x_i - com, v_i / velocity_scale) with
    "position_velocity" (com: the unweighted mean position). The last layer
    starts at 0: an untrained model adds no force (the physics alone)."""

    def __init__(self, ro=None, hidden=(32, 32), inputs: str = "velocity", velocity_scale: float = 5.0,
                 force_scale: float = 1.0):
        super().__init__()
        if inputs not in ("velocity", "position_velocity"):
            raise DsimError("ResidualForce", f"inputs must be 'velocity' or 'position_velocity', got {inputs!r}")
        self.inputs, self.velocity_scale, self.force_scale = inputs, float(velocity_scale), float(force_scale)
        sizes = [3 if inputs == "velocity" else 6, *hidden, 3]
        layers = []
        for i in range(len(sizes) - 1):
            layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
            if i < len(sizes) - 2:
                layers.append(torch.nn.Tanh())
        self.net = torch.nn.Sequential(*layers).to(_TDTYPE)
        with torch.no_grad():
            self.net[-1].weight.zero_()
            self.net[-1].bias.zero_()

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        """state: N x state_size (dsim/env.h layout [substep, x, v, ...]) ->
        forces N x nparticle*3."""
        n3 = (state.shape[1] - 1) // 2
        x = state[:, 1:1 + n3].reshape(len(state), -1, 3)
        v = state[:, 1 + n3:1 + 2 * n3].reshape(len(state), -1, 3) / self.velocity_scale
        feat = v if self.inputs == "velocity" else torch.cat([x - x.mean(1, keepdim=True), v], dim=2)
        return (self.force_scale * self.net(feat)).reshape(len(state), -1)


def rollout(ro, model, seed=0, actions=None, steps: int | None = None, state0: torch.Tensor | None = None):
    """Positions of every env at the end of each step (N x H x nparticle*3)
    of an episode from reset(seed) (or from state0, set on the current
    episode) with model's force (None: none) added at every step;
    differentiable with respect to model's parameters, actions
    (N x H x action_size, default 0) and state0."""
    if state0 is None:
        _, state = ro.reset(seed)
    else:
        state = ro.set_state(state0)
    H = steps if steps is not None else ro.num_steps - ro.steps_taken
    if actions is None:
        actions = torch.zeros(ro.num_envs, H, ro.action_size, dtype=_TDTYPE)
    xs = []
    for k in range(H):
        f = model(state) if model is not None else torch.zeros(ro.num_envs, state.shape[1] // 2, dtype=_TDTYPE)
        _, _, state = step(ro, actions[:, k], f, state)
        xs.append(positions(ro, state))
    return torch.stack(xs, 1)


def fit(ro, model, observed: torch.Tensor, seed=0, actions=None, iterations: int = 100, lr: float = 3e-3,
        clip: float = 10.0, progress: bool = False, callback=None):
    """Trains model (Adam, gradient-norm clipping) so that the hybrid
    rollouts from reset(seed) with actions match observed positions
    (N x H x nparticle*3): loss = mean over envs, steps and coordinates of
    the squared error. Returns the history of {iteration, loss, grad_norm,
    seconds}."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    hist, t0 = [], time.time()
    H = observed.shape[1]
    for it in range(iterations):
        xs = rollout(ro, model, seed=seed, actions=actions, steps=H)
        loss = ((xs - observed) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(model.parameters(), clip) if clip > 0 else torch.tensor(0.0)
        opt.step()
        row = dict(iteration=it, loss=float(loss.detach()), grad_norm=float(gn), seconds=time.time() - t0)
        hist.append(row)
        if progress:
            print(f"iteration {it}: loss {row['loss']:.4g} grad norm {row['grad_norm']:.3g} "
                  f"{row['seconds']:.0f}s", flush=True)
        if callback:
            callback(it, model, row)
    return hist
