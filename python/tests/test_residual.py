"""dsim.residual (hybrid models): the gradient of a rollout whose every step
adds a force from the state (a linear velocity feedback, so the force at
step k depends on the forces before it) against torch.autograd.gradcheck in
double on a tiny cloth, the force gradient of one step against the C
window's, and the first updates of fit lowering the error to trajectories
with a force the model lacks."""
import numpy as np
import pytest

from conftest import need

torch = need("torch")
import dsim.learn as dl  # noqa: E402
import dsim.residual as dr  # noqa: E402

TINY = dict(substeps=24, control_interval=8, width=16, height=16, supersample=1, size_min=8, size_max=8,
            reward="dense", state="full")


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny envs: threads only wait on each other (and on a loaded machine,
    for a descheduled worker); one thread each for torch and dsim here."""
    nt, nd = torch.get_num_threads(), dl._lib.get_max_threads()
    torch.set_num_threads(1)
    dl._lib.set_num_threads(1)
    yield
    torch.set_num_threads(nt)
    dl._lib.set_num_threads(nd)


def _rollout(n=2):
    return dl.Rollout("control-cloth", n, **TINY)


def test_residual_gradcheck():
    """d(positions, rewards) / d(feedback gain W, force offset b, throw):
    F_k = v_k W + b per particle, 3 steps, closed loop through the state."""
    ro = _rollout()
    g = torch.Generator().manual_seed(0)
    n3 = (ro.state_size - 1) // 2
    W = (0.3 * torch.rand(3, 3, generator=g, dtype=torch.float64) - 0.15).requires_grad_(True)
    b = (0.2 * torch.rand(ro.num_envs, 3, generator=g, dtype=torch.float64) - 0.1).requires_grad_(True)
    throw = torch.tensor([[1.0, 0.5, 0.2], [0.5, 1.0, -0.3]], dtype=torch.float64).requires_grad_(True)
    pick = torch.tensor([5, 97, n3 - 1])

    def f(W, b, throw):
        _, state = ro.reset(7)
        xs, rews = [], []
        for k in range(3):
            v = state[:, 1 + n3:1 + 2 * n3].reshape(ro.num_envs, -1, 3)
            F = (v @ W).reshape(ro.num_envs, -1)
            F = torch.cat([F[:, :3] + b, F[:, 3:]], dim=1)
            a = throw if k == 0 else torch.zeros_like(throw)
            _, r, state = dr.step(ro, a, F, state)
            xs.append(state[:, 1 + pick])
            rews.append(r)
        return torch.stack(xs, 1), torch.stack(rews, 1)

    assert torch.autograd.gradcheck(f, (W, b, throw), eps=1e-6, atol=1e-6, rtol=1e-4)


def test_force_grad_rows():
    """Only the rows of the steps a backward went through are set; a zero
    force gives the trajectory of no force, bit for bit."""
    ro = _rollout()
    _, s = ro.reset(1)
    n3 = (ro.state_size - 1) // 2
    plain = []
    for _ in range(3):
        _, _, s = ro.step(torch.zeros(ro.num_envs, ro.action_size, dtype=torch.float64), s)
        plain.append(s)
    _, s = ro.reset(1)
    F = torch.zeros(ro.num_envs, n3, dtype=torch.float64, requires_grad=True)
    outs = []
    for _ in range(3):
        _, _, s = dr.step(ro, torch.zeros(ro.num_envs, ro.action_size, dtype=torch.float64), F, s)
        outs.append(s)
    for p, q in zip(plain, outs):
        assert torch.equal(p, q)
    outs[1][:, 1:1 + n3].sum().backward()   # positions after step 1: steps 0 and 1 only
    assert F.grad.abs().sum() > 0
    assert np.all(dr.force_grad(ro, 2) == 0)  # the last backward (step 0's node) left row 2 at 0


def test_fit_first_updates():
    """A quadratic drag the model lacks: a few updates lower the error."""
    ro = _rollout(2)
    n3 = (ro.state_size - 1) // 2
    throw = torch.zeros(ro.num_envs, 3, ro.action_size, dtype=torch.float64)
    throw[:, 0] = torch.tensor([[3.0, 2.0, 0.0], [2.0, 3.0, 1.0]])
    with torch.no_grad():  # "reality": -c |v| v on every particle
        _, s = ro.reset(0)
        obs = []
        for k in range(3):
            v = s[:, 1 + n3:1 + 2 * n3].reshape(ro.num_envs, -1, 3)
            dr.set_forces(ro, (-2.0 * v.norm(dim=2, keepdim=True) * v).reshape(ro.num_envs, -1))
            ro.batch.step(throw[:, k].numpy())
            s = ro.state()
            obs.append(dr.positions(ro, s))
        observed = torch.stack(obs, 1)
    torch.manual_seed(0)
    model = dr.ResidualForce(ro, hidden=(16,), force_scale=5.0)
    hist = dr.fit(ro, model, observed, seed=0, actions=throw, iterations=6, lr=0.05)
    assert hist[-1]["loss"] < 0.5 * hist[0]["loss"]
