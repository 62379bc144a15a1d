"""Articulated envs (pendulum, double-pendulum) through the generic binding,
with no per-env Python code: dsim.Env reset/step/backward and the named
articulation parameters, and the Gymnasium ids made from the registry."""
import gymnasium
import numpy as np
import pytest

import dsim

SMALL = dict(substeps=64, control_interval=16, render_interval=16, width=16, height=16, supersample=1)


@pytest.mark.parametrize("name,gid,n", [("pendulum", "dsim/Pendulum-v0", 1),
                                        ("double-pendulum", "dsim/DoublePendulum-v0", 2)])
def test_env_reset_step_backward(name, gid, n):
    env = dsim.Env(name, **SMALL)
    env.reset(seed=0)
    for _ in range(env.num_steps):
        env.step(np.full(n, 0.5))
    loss, grad = env.backward_loss()
    assert np.isfinite(loss) and loss > 0
    assert grad.shape == (env.num_steps, n) and np.all(np.isfinite(grad)) and np.any(grad != 0)
    assert env.param("joint.hinge1.damping").shape == (1,)
    g = env.param_grad("joint.hinge1.anchor_child.z")
    assert g.shape == (1,) and np.isfinite(g[0]) and g[0] != 0
    env.reset(seed=0)
    env.set_param("joint.hinge1.damping", [0.2])
    assert env.param("joint.hinge1.damping")[0] == 0.2
    assert dsim.env_id(name) == gid and gid in gymenv_registry()


def gymenv_registry():
    return gymnasium.envs.registration.registry


def test_gym_make_pendulum():
    env = gymnasium.make("dsim/Pendulum-v0", render_mode="rgb_array", **SMALL)
    obs, info = env.reset(seed=1)
    env.action_space.seed(1)  # the same episode on every run
    assert env.observation_space.contains(obs)
    for _ in range(env.unwrapped.env.num_steps):
        obs, r, term, trunc, info = env.step(env.action_space.sample())
        assert np.isfinite(r)
    frame = env.render()
    assert frame.shape == (16, 16, 3) and frame.max() > 0
    env.close()
