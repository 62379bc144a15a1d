"""dsim.Lockstep and dsim.torch.batch_episode: N envs reset, stepped and
gone back through together, on one batched engine with its tape
(physics.batched_engine, what a GPU runs) and on separate CPU engines,
against separate single envs: forward bit for bit, gradients to 1e-10 on
one engine (bitwise on separate engines); gradcheck of the batched torch
function; refusals."""
import numpy as np
import pytest

from conftest import SMALL, need  # noqa: E402

import dsim  # noqa: E402
from dsim import DsimError  # noqa: E402

pytestmark = pytest.mark.skipif(dsim.real_dtype != np.float64, reason="the comparisons need a double build")

SHORT = {
    "walker-springs": dict(SMALL["walker-springs"], substeps=64, control_interval=32),
    "control-fem": dict(SMALL["control-fem"]),
}


def _gravities(n):
    return [np.array([0.3 * i, -9.8 + 0.5 * i, 0.0]) for i in range(n)]


@pytest.mark.parametrize("name", list(SHORT))
@pytest.mark.parametrize("shared", [True, False])
def test_equals_single_envs(name, shared):
    kw = SHORT[name]
    n = 3
    ls = dsim.Lockstep(name, n, physics__batched_engine=shared, **kw)
    T, A = ls.num_steps, ls.action_size
    rng = np.random.default_rng(1)
    acts = rng.uniform(-0.3, 0.3, (n, T, A))
    grav = _gravities(n)
    obs0 = ls.reset([11, 12, 13])
    for i in range(n):
        ls.set_param(i, "gravity", grav[i])
    obs, rew = [], []
    for k in range(T):
        o, r = ls.step(acts[:, k])
        obs.append(o)
        rew.append(r)
    losses, ga = ls.backward_loss()
    gg = [ls.param_grad(i, "gravity") for i in range(n)]
    adj = rng.uniform(-1, 1, (n, T, ls.obs_size))
    ga2 = ls.backward_adjoints(adj_obs=adj)
    tol = 1e-10 if shared else 0.0
    for i in range(n):
        e = dsim.Env(name, **kw)
        assert np.array_equal(e.reset(11 + i), obs0[i])
        e.set_param("gravity", grav[i])
        for k in range(T):
            o, r, _ = e.step(np.ascontiguousarray(acts[i, k]))
            assert np.array_equal(o, obs[k][i]) and r == rew[k][i], (name, shared, i, k)
        l, g = e.backward_loss()
        assert l == losses[i]
        np.testing.assert_allclose(ga[i], g, rtol=0, atol=tol * np.abs(g).max())
        np.testing.assert_allclose(gg[i], e.param_grad("gravity"), rtol=tol, atol=tol * np.abs(gg[i]).max())
        g2 = e.backward_adjoints(adj_obs=np.ascontiguousarray(adj[i]))
        np.testing.assert_allclose(ga2[i], g2, rtol=0, atol=tol * np.abs(g2).max())
        e.close()
    ls.close()


def test_torch_batch_episode_gradcheck():
    torch = need("torch")
    import dsim.torch as dt
    kw = SHORT["walker-springs"]
    n = 2
    ls = dsim.Lockstep("walker-springs", n, physics__batched_engine=True, **kw)
    T, A = ls.num_steps, ls.action_size
    gen = torch.Generator().manual_seed(0)
    base = 0.1 * torch.randn(n, T, A, dtype=torch.float64, generator=gen)
    B = 0.1 * torch.randn(2, n * T * A, dtype=torch.float64, generator=gen)
    z = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    g = torch.tensor(np.stack(_gravities(n)), requires_grad=True)
    for out in ("loss", "obs", "rewards"):
        def f(z, g):
            return dt.batch_episode(ls, base + (z @ B).reshape(n, T, A), {"gravity": g}, seeds=[3, 4], output=out)
        assert torch.autograd.gradcheck(f, (z, g)), out
    # one env's row of the batch is that env's own episode
    a = base.clone().requires_grad_(True)
    loss = dt.batch_episode(ls, a, {"gravity": g.detach()}, seeds=[3, 4])
    loss[1].backward()
    e = dsim.Env("walker-springs", **kw)
    a1 = base[1].clone().requires_grad_(True)
    l1 = dt.episode(e, a1, {"gravity": g.detach()[1]}, seed=4)
    l1.backward()
    assert loss[1].item() == l1.item()
    assert torch.allclose(a.grad[1], a1.grad, rtol=0, atol=1e-10 * a1.grad.abs().max().item())
    assert torch.all(a.grad[0] == 0)
    ls.close()


def test_refusals():
    kw = SHORT["walker-springs"]
    ls = dsim.Lockstep("walker-springs", 2, physics__batched_engine=True, **kw)
    ls.reset(0)
    with pytest.raises(DsimError, match=r"actions has shape \(3, 76\); expected \(2, 76\)"):
        ls.step(np.zeros((3, ls.action_size)))
    with pytest.raises(DsimError, match=r"env index 5 outside \[0, 2\)"):
        ls.param(5, "gravity")
    with pytest.raises(DsimError, match="unknown parameter 'nope'"):
        ls.param(0, "nope")
    with pytest.raises(DsimError, match="seeds: 3 values for 2 envs"):
        ls.reset([1, 2, 3])
    with pytest.raises(DsimError, match="num_envs must be >= 1"):
        dsim.Lockstep("walker-springs", 0, **kw)
    ls.close()
