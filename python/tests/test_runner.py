"""The articulated runner (envs/runner.c) through the generic binding, with
no per-env Python code: gymnasium.make("dsim/Runner-v0") resets and steps
(joint observations, dense forward-progress rewards that sum to the metric),
and dsim.Env gives the action gradient of the dense reward."""
import gymnasium
import numpy as np

import dsim

SMALL = dict(substeps=100, control_interval=20, render_interval=20, width=16, height=16, supersample=1)


def test_gym_make_runner():
    # 32x32: at 16x16 a fallen runner's limbs can miss every pixel centre
    # (the frame is then black); the action stream is seeded so the episode
    # is the same on every run
    env = gymnasium.make("dsim/Runner-v0", render_mode="rgb_array", **dict(SMALL, width=32, height=32))
    obs, info = env.reset(seed=0)
    env.action_space.seed(0)
    assert env.action_space.shape == (6,)
    # the class's RL defaults: joint coordinates and velocities (9 + 9), and
    # the forward progress of each step as its reward
    assert env.observation_space.shape == (18,)
    assert env.observation_space.contains(obs)
    total = 0.0
    for _ in range(env.unwrapped.env.num_steps):
        obs, r, term, trunc, info = env.step(env.action_space.sample())
        assert np.isfinite(r) and np.all(np.isfinite(obs))
        total += r
    assert abs(total - info["metric"]) <= 1e-9 * max(1.0, abs(info["metric"])) and total != 0
    frame = env.render()
    assert frame.shape == (32, 32, 3) and frame.max() > 0
    env.close()


def test_runner_env_backward():
    env = dsim.Env("runner", **SMALL)
    env.reset(seed=0)
    for _ in range(env.num_steps):
        env.step(np.full(6, 0.5))
    loss, grad = env.backward_loss()
    assert np.isfinite(loss)
    assert grad.shape == (env.num_steps, 6) and np.all(np.isfinite(grad)) and np.any(grad != 0)
    g = env.param_grad("actuator.bhip.gear")
    assert g.shape == (1,) and np.isfinite(g[0])
    assert dsim.env_id("runner") == "dsim/Runner-v0"
