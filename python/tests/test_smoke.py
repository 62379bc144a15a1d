"""smoke-control (envs/smoke.c), the fluid env, through the generic binding
with no per-env Python code: gymnasium.make("dsim/SmokeControl-v0") creates,
resets and steps it (a seeded action stream) and renders its density; and
dsim.Env gives the action and buoyancy gradients of the image loss.
smoke-plume (envs/plume.c), the 3-D one with no actions, likewise:
gymnasium.make("dsim/SmokePlume-v0") creates, resets and steps it."""
import gymnasium
import numpy as np

import dsim

SMALL = {"substeps": 8, "control_interval": 2, "render_interval": 8, "width": 16, "height": 16,
         "grid.n": 16, "control.cells": 4}


def test_gym_make_smoke():
    env = gymnasium.make("dsim/SmokeControl-v0", render_mode="rgb_array", **SMALL)
    obs, info = env.reset(seed=0)
    env.action_space.seed(0)
    assert env.action_space.shape == (32,)
    assert env.observation_space.contains(obs)
    for _ in range(env.unwrapped.env.num_steps):
        obs, r, term, trunc, info = env.step(env.action_space.sample())
        assert np.isfinite(r)
    assert term or trunc
    frame = env.render()
    assert frame.shape == (16, 16, 3) and frame.max() > frame.min()
    env.close()


def test_smoke_env_backward():
    env = dsim.Env("smoke-control", **SMALL)
    env.reset(seed=0)
    for k in range(env.num_steps):
        env.step(np.full(32, 0.3 * np.sin(k)))
    loss, grad = env.backward_loss()
    assert np.isfinite(loss) and loss > 0
    assert grad.shape == (env.num_steps, 32) and np.all(np.isfinite(grad)) and np.any(grad != 0)
    g = env.param_grad("buoyancy.alpha")
    assert g.shape == (1,) and np.isfinite(g[0]) and g[0] != 0
    assert dsim.env_id("smoke-control") == "dsim/SmokeControl-v0"


PLUME = {"substeps": 8, "control_interval": 2, "render_interval": 8, "width": 16, "height": 16, "grid.n": 8}


def test_gym_make_plume():
    env = gymnasium.make("dsim/SmokePlume-v0", render_mode="rgb_array", **PLUME)
    obs, info = env.reset(seed=0)
    env.action_space.seed(0)
    assert env.action_space.shape == (0,)
    assert env.observation_space.contains(obs)
    steps = 0
    term = trunc = False
    while not (term or trunc):
        obs, r, term, trunc, info = env.step(env.action_space.sample())
        assert np.isfinite(r)
        steps += 1
    assert steps == env.unwrapped.env.num_steps == 4
    frame = env.render()
    assert frame.shape == (16, 16, 3) and frame.max() > frame.min()
    assert dsim.env_id("smoke-plume") == "dsim/SmokePlume-v0"
    env.close()


def test_smoke_env_batched_engine():
    """The fluid on the batched engine (a fluid batch of one, what a CUDA
    device runs) from Python: the same loss and gradients as the serial
    engine with PCG, bit for bit."""
    out = []
    for kw in ({"fluid.solver": "pcg"}, {"batched_engine": True}):
        env = dsim.Env("smoke-control", **SMALL, **kw)
        env.reset(seed=0)
        for k in range(env.num_steps):
            env.step(np.full(32, 0.3 * np.sin(k)))
        loss, grad = env.backward_loss()
        out.append((loss, grad.copy(), env.param_grad("buoyancy.alpha").copy()))
    assert out[0][0] == out[1][0]
    assert np.array_equal(out[0][1], out[1][1]) and np.array_equal(out[0][2], out[1][2])
