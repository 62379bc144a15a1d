"""Articulated envs (pendulum, runner) on the batched engine
(physics.batched_engine): dsim.Lockstep (one engine and its tape for all)
against separate envs on the serial engine, with per-env joint dampings and
link masses: observations and rewards bit for bit, gradients (actions, the
damping, the mass) to 1e-10; a gymnasium vector env of them against the same
vector env on separate serial engines, autoreset included, bit for bit."""
import gymnasium
import numpy as np
import pytest

import dsim

pytestmark = pytest.mark.skipif(dsim.real_dtype != np.float64, reason="articulations need a double build")

SMALL = {
    "pendulum": dict(substeps=48, control_interval=16, render_interval=16, width=16, height=16, supersample=1),
    "runner": dict(substeps=60, control_interval=20, render_interval=20, width=16, height=16, supersample=1),
}
PARAMS = {"pendulum": ("joint.hinge1.damping", "body.link1.mass"), "runner": ("joint.bknee.damping", "body.torso.mass")}


def _values(name, i):
    damping, mass = PARAMS[name]
    return {damping: 0.01 + 0.02 * i, mass: 1.0 + 0.25 * i}


@pytest.mark.parametrize("name", list(SMALL))
def test_lockstep_equals_single_envs(name):
    kw = SMALL[name]
    n = 3
    ls = dsim.Lockstep(name, n, physics__batched_engine=True, **kw)
    T, A = ls.num_steps, ls.action_size
    rng = np.random.default_rng(7)
    acts = rng.uniform(-0.5, 0.5, (n, T, A))
    obs0 = ls.reset([3, 4, 5])
    for i in range(n):
        for p, v in _values(name, i).items():
            ls.set_param(i, p, [v])
    obs, rew = [], []
    for k in range(T):
        o, r = ls.step(acts[:, k])
        obs.append(o)
        rew.append(r)
    losses, ga = ls.backward_loss()
    grads = [{p: ls.param_grad(i, p) for p in PARAMS[name]} for i in range(n)]
    tol = 1e-10
    for i in range(n):
        e = dsim.Env(name, **kw)
        assert np.array_equal(e.reset(3 + i), obs0[i])
        for p, v in _values(name, i).items():
            e.set_param(p, [v])
        for k in range(T):
            o, r, _ = e.step(np.ascontiguousarray(acts[i, k]))
            assert np.array_equal(o, obs[k][i]) and r == rew[k][i], (name, i, k)
        loss, g = e.backward_loss()
        assert loss == losses[i]
        assert np.any(g != 0)
        np.testing.assert_allclose(ga[i], g, rtol=0, atol=tol * np.abs(g).max())
        for p in PARAMS[name]:
            want = e.param_grad(p)
            assert np.any(want != 0), p
            np.testing.assert_allclose(grads[i][p], want, rtol=tol, atol=tol * np.abs(want).max())
        e.close()
    ls.close()


@pytest.mark.parametrize("name", list(SMALL))
def test_vector_env_equals_separate_engines(name):
    # the native vector env with its envs on one batched engine against the
    # same vector env with every env on its own serial engine, autoreset
    # included (the last call resets every env)
    kw = SMALL[name]
    n = 3
    shared = gymnasium.make_vec(dsim.env_id(name), num_envs=n, physics__batched_engine=True, **kw)
    separate = gymnasium.make_vec(dsim.env_id(name), num_envs=n, **kw)
    o1, _ = shared.reset(seed=20)
    o2, _ = separate.reset(seed=20)
    assert np.array_equal(o1, o2)
    rng = np.random.default_rng(2)
    A = shared.unwrapped.action_size
    steps = dsim.Env(name, **kw).num_steps
    moved = False
    for k in range(steps + 1):
        a = rng.uniform(-0.5, 0.5, (n, A))
        o1, r1, te1, tr1, _ = shared.step(a)
        o2, r2, te2, tr2, _ = separate.step(a)
        assert np.array_equal(o1, o2) and np.array_equal(r1, r2), (name, k)
        assert np.array_equal(tr1, tr2) and np.array_equal(te1, te2)
        moved |= k < steps and bool(np.any(o1 != o2[[1, 2, 0]]))
    assert moved  # the envs differ (their actions do)
    shared.close()
    separate.close()
