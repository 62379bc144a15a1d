"""dsim.torch: gradcheck (double) of the episode's loss and observations
with respect to actions and a named physical parameter, on a short episode
of every env class; the backward is the library's adjoint."""
import numpy as np
import pytest

from conftest import need  # noqa: E402

torch = need("torch")

import dsim  # noqa: E402
import dsim.torch as dt  # noqa: E402
from dsim import DsimError  # noqa: E402
from conftest import SMALL  # noqa: E402

pytestmark = pytest.mark.skipif(dsim.real_dtype != np.float64, reason="gradcheck needs a double build")

GRAD = {  # short episodes: two steps each
    "walker": dict(substeps=64, control_interval=32),
    "control-fem": dict(substeps=16, control_interval=8, render_interval=8),
    "control-cloth": dict(substeps=40, control_interval=20),
    "walker-springs": dict(substeps=64, control_interval=32),
    "rigid-toss": dict(substeps=64, control_interval=32),
}


@pytest.mark.parametrize("name", list(GRAD))
def test_gradcheck(name):
    kw = dict(SMALL[name])
    kw.update(GRAD[name])
    env = dsim.Env(name, **kw)
    T, A = env.num_steps, env.action_size
    gen = torch.Generator().manual_seed(0)
    base = 0.1 * torch.randn(T, A, dtype=torch.float64, generator=gen)
    if env.action_kind == 1:  # control-cloth: an initial velocity, m/s
        base = base * 10
    B = 0.1 * torch.randn(2, T * A, dtype=torch.float64, generator=gen)  # actions = base + z B: every entry moves
    z = torch.zeros(2, dtype=torch.float64, requires_grad=True)
    g = torch.tensor(env.param("gravity"), requires_grad=True)
    for out in ("loss", "obs"):
        def f(z, g):
            return dt.episode(env, base + (z @ B).reshape(T, A), {"gravity": g}, seed=1, output=out)
        assert torch.autograd.gradcheck(f, (z, g)), (name, out)
    env.close()


def test_full_action_gradient_matches_c():
    env = dsim.Env("walker", **dict(SMALL["walker"], substeps=64, control_interval=32))
    a = torch.full((env.num_steps, env.action_size), 0.1, dtype=torch.float64, requires_grad=True)
    loss = dt.episode(env, a, seed=2)
    loss.backward()
    l2, g2 = env.backward_loss()
    assert loss.item() == l2 and np.array_equal(a.grad.numpy(), g2)
    r = dt.episode(env, a, seed=2, output="rewards")
    assert r.shape == (env.num_steps,)


def test_bad_input():
    env = dsim.Env("walker", **SMALL["walker"])
    with pytest.raises(DsimError, match=r"walker: actions must be a tensor of shape \(T, 104\)"):
        dt.episode(env, torch.zeros(2, 5, dtype=torch.float64))
    with pytest.raises(DsimError, match="unknown parameter 'tet.k_muu'"):
        dt.episode(env, torch.zeros(2, 104, dtype=torch.float64), {"tet.k_muu": torch.zeros(3)})
