"""dsim.learn: the window function against torch.autograd.gradcheck, the
closed-loop step function against the open-loop window and a finite
difference through a policy, and the first updates of the BPTT and SHAC
trainers on a small walker-springs task."""
import copy

import numpy as np
import pytest

from conftest import need

torch = need("torch")
import dsim.learn as dl  # noqa: E402

SMALL = dict(substeps=192, control_interval=32, width=16, height=16, supersample=1, reward="dense")


def _rollout(n=2, **kw):
    return dl.Rollout("walker-springs", n, **{**SMALL, **kw})


def _start(ro, prefix=1, seed=3):
    """Reset, `prefix` zero steps, the state there (a window's start)."""
    obs, state = ro.reset(seed)
    for _ in range(prefix):
        obs, _, state = ro.step(torch.zeros(ro.num_envs, ro.action_size, dtype=torch.float64), state)
    return state.detach()


def test_window_gradcheck():
    """d(obs, rewards, final state) / d(start state, actions) of a window set
    from a state tensor: torch's finite differences in double."""
    ro = _rollout()
    s0 = _start(ro)
    g = torch.Generator().manual_seed(0)
    acts = (0.2 * torch.rand(ro.num_envs, 2, ro.action_size, generator=g, dtype=torch.float64) - 0.1)
    # a few start-state entries (positions and velocities) as inputs, the rest fixed
    n3 = (ro.state_size - 1) // 2
    idx = torch.tensor([1, 5, 1 + n3 + 2, 1 + n3 + 40])
    sub = s0[:, idx].clone().requires_grad_(True)
    a = acts[:, :, :6].clone().requires_grad_(True)

    def f(sub, a):
        s = s0.clone()
        s[:, idx] = sub
        full = torch.cat([a, acts[:, :, 6:]], dim=2)
        obs, rew, fin = ro.window(s, full)
        return obs, rew, fin[:, idx]

    assert torch.autograd.gradcheck(f, (sub, a), eps=1e-6, atol=1e-6, rtol=1e-4)


def test_steps_equal_window():
    """H step nodes (one C call each) give the window's gradients (one call)."""
    ro = _rollout()
    s0 = _start(ro, prefix=2)
    acts = torch.full((ro.num_envs, 3, ro.action_size), 0.05, dtype=torch.float64)
    w = torch.linspace(-1, 1, ro.obs_size, dtype=torch.float64)
    grads = []
    for mode in ("window", "steps"):
        s = s0.clone().requires_grad_(True)
        a = acts.clone().requires_grad_(True)
        if mode == "window":
            obs, rew, fin = ro.window(s, a)
            loss = (obs * w).sum() + rew.sum() + fin[:, 1:].sum() * 1e-2
        else:
            st = ro.set_state(s)
            loss = 0
            for k in range(3):
                o, r, st = ro.step(a[:, k], st)
                loss = loss + (o * w).sum() + r.sum()
            loss = loss + st[:, 1:].sum() * 1e-2
        loss.backward()
        grads.append((s.grad.clone(), a.grad.clone()))
    np.testing.assert_allclose(grads[1][0], grads[0][0], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(grads[1][1], grads[0][1], rtol=1e-9, atol=1e-12)


def test_closed_loop_policy_gradient():
    """d(return)/d(a policy weight) through obs -> policy -> actions -> physics
    over 4 steps after 2 zero steps (on the ground: in the air the springs
    cannot move the centre of mass, and the gradient is 0) against central
    differences."""
    ro = _rollout()
    torch.manual_seed(0)
    pol = dl.MLPPolicy(ro.obs_size, ro.action_size, hidden=(8,), action_scale=0.3)
    with torch.no_grad():
        pol.net[-1].weight.mul_(10)
    zero = torch.zeros(ro.num_envs, ro.action_size, dtype=torch.float64)

    def ret():
        obs, st = ro.reset(5)
        for _ in range(2):
            obs, _, st = ro.step(zero, st)
        total = 0
        for _ in range(4):
            obs, r, st = ro.step(pol(obs), st)
            total = total + r.sum()
        return total

    _check_first_row_gradient(ret, pol.net[0].weight, [0, 1, 3, 4])  # 2 and 5: constant inputs


def _check_first_row_gradient(ret, p, cols, h=1e-6):
    """d ret() / d p[0, j] for j in cols by autograd against central
    differences (rtol 1e-4 and 1e-4 of the largest); the analytic ones
    finite and not all zero."""
    p.grad = None
    ret().backward()
    an = p.grad[0, cols].clone()
    assert torch.all(torch.isfinite(an)) and torch.any(an != 0)
    fd = []
    for j in cols:
        with torch.no_grad():
            p[0, j] += h
            jp = float(ret())
            p[0, j] -= 2 * h
            jm = float(ret())
            p[0, j] += h
        fd.append((jp - jm) / (2 * h))
    np.testing.assert_allclose(an, fd, rtol=1e-4, atol=1e-9 + 1e-4 * max(abs(v) for v in fd))


def test_stale_step_refused():
    ro = _rollout()
    obs, st = ro.reset(0)
    a = torch.zeros(ro.num_envs, ro.action_size, dtype=torch.float64, requires_grad=True)
    o, r, st = ro.step(a, st)
    ro.reset(1)
    with pytest.raises(dl.DsimError, match="reset or set"):
        r.sum().backward()


@pytest.mark.parametrize("method", ["bptt", "shac"])
def test_first_updates_decrease_loss(method, tmp_path):
    """Walker-springs, dense reward (forward progress): a few updates on one
    window from the same start raise its return (fixed seed)."""
    train = dl.train_bptt if method == "bptt" else dl.train_shac
    kw = dict(num_envs=2, horizon=3, iterations=0, lr=3e-3, seed=0, hidden=(16,), **SMALL)
    out = train("walker-springs", **kw)
    pol, ro = out["policy"], out["rollout"]
    opt = torch.optim.Adam(pol.net.parameters(), lr=3e-3)

    def window_loss():
        obs, st = ro.reset(7)
        total = 0
        for _ in range(3):
            obs, r, st = ro.step(pol(obs), st)
            total = total + r.mean()
        return -total

    l0 = float(window_loss().detach())
    for _ in range(5):
        loss = window_loss()
        opt.zero_grad()
        loss.backward()
        opt.step()
    l1 = float(window_loss().detach())
    assert l1 < l0
    # the trainer itself: runs, logs, checkpoints
    csv_path, ck = tmp_path / "log.csv", tmp_path / "ck.pt"
    out = train("walker-springs", **{**kw, "iterations": 4}, log_csv=str(csv_path), checkpoint=str(ck))
    rows = csv_path.read_text().splitlines()
    assert len(rows) == 5 and rows[0].startswith("iteration,env_steps")
    assert all(np.isfinite(h["actor_loss"]) for h in out["history"])
    assert torch.load(ck, weights_only=False)["args"]["method"] == method
    # a finished run's log and checkpoint are never replaced silently
    before = (csv_path.read_bytes(), ck.read_bytes())
    for key, path in (("log_csv", csv_path), ("checkpoint", ck)):
        with pytest.raises(dl.DsimError, match=f"{key}: exists; refusing to replace it"):
            train("walker-springs", **{**kw, "iterations": 1}, **{key: str(path)})
    assert (csv_path.read_bytes(), ck.read_bytes()) == before
    out = train("walker-springs", **{**kw, "iterations": 2}, log_csv=str(csv_path), checkpoint=str(ck),
                overwrite=True)
    assert len(csv_path.read_text().splitlines()) == 3


def test_evaluate_ends_a_failed_episode():
    """evaluate(on_error="end"): an env whose step fails (a tet inverted by
    a huge activation from step 2 on) ends its episode there with the
    rewards before the failed step; the other envs' returns are those of a
    run without the failure; on_error="raise" raises naming env and code."""
    ls = dl.Lockstep("control-fem", 3, gradients=False, **SMALL)
    ls.reset(1000)
    A, S = ls.action_size, ls.num_steps
    rew = np.array([ls.step(np.zeros((3, A)))[1] for _ in range(S)])  # S x 3, zero actions

    def crusher(from_step):
        calls = [0]

        def pol(obs):
            a = torch.zeros(obs.shape[0], A, dtype=torch.float64)
            if calls[0] >= from_step:
                a[1] = 50.0
            calls[0] += 1
            return a
        return pol

    r = dl.evaluate(crusher(2), "control-fem", num_envs=3, on_error="end", details=True, **SMALL)
    assert list(r["failed_step"]) == [-1, 2, -1]
    assert len(r["errors"]) == 1 and r["errors"][0].startswith("env 1: step 2: ") and "inverted" in r["errors"][0]
    np.testing.assert_array_equal(r["returns"], [rew[:, 0].sum(), rew[:2, 1].sum(), rew[:, 2].sum()])
    assert r["mean"] == r["returns"].mean()
    assert dl.evaluate(crusher(S), "control-fem", num_envs=3, on_error="end", **SMALL) == rew.sum(0).mean()
    with pytest.raises(dl.DsimError, match="evaluate: env 1") as e:
        dl.evaluate(crusher(1), "control-fem", num_envs=3, **SMALL)
    assert e.value.code == dl._lib.DS_ERR_INVERTED and "inverted" in str(e.value)
    with pytest.raises(dl.DsimError, match="on_error: 'skip'; expected 'raise' or 'end'"):
        dl.evaluate(crusher(S), "control-fem", num_envs=3, on_error="skip", **SMALL)


def test_cloth_state_size_follows_reset():
    """control-cloth rebuilds its sheet at a reset (size D drawn per
    episode): the rollout's state takes the episode's size, the 2-step
    return's gradient with respect to the initial velocity action matches
    central differences, and envs drawn with different sizes are refused
    with a message that says what to set."""
    cloth = dict(substeps=120, control_interval=60, render_interval=60, width=16, height=16, supersample=1,
                 reward="dense")
    one = dl.Rollout("control-cloth", 1, scene__size_min=4, scene__size_max=6, **cloth)
    sizes = {one.reset(seed)[1].shape[1] for seed in range(6)}  # each episode's state as its D makes it
    assert sizes <= {1 + 6 * 25, 1 + 6 * 36, 1 + 6 * 49} and len(sizes) > 1
    ro = dl.Rollout("control-cloth", 2, scene__size_min=4, scene__size_max=4, **cloth)

    def ret(a):
        obs, st = ro.reset(0)
        total = 0
        for _ in range(2):
            obs, r, st = ro.step(a, st)
            total = total + r.sum()
        return total, st

    a = torch.tensor([[0.3, -0.2, 0.1], [-0.1, 0.4, 0.2]], dtype=torch.float64, requires_grad=True)
    total, st = ret(a)
    assert st.shape == (2, 1 + 6 * 25)
    total.backward()
    fd = torch.zeros_like(a)
    for i in range(2):
        for j in range(3):
            e = torch.zeros_like(a)
            e[i, j] = 1e-6
            with torch.no_grad():
                fd[i, j] = (ret(a + e)[0] - ret(a - e)[0]) / 2e-6
    np.testing.assert_allclose(a.grad, fd, rtol=1e-5, atol=1e-6 * float(fd.abs().max()))
    ro = dl.Rollout("control-cloth", 3, scene__size_min=4, scene__size_max=6, **cloth)
    with pytest.raises(dl.DsimError, match="the envs' models differ .*set scene.size_min = scene.size_max"):
        ro.reset(0)


# ---- the trainers' options: learning-rate schedule, target critic, resuming ------------------
def test_keep_best(tmp_path):
    """keep_best=K: the policy kept is the one after the update that ended
    the K episodes of highest mean return (rounded up to whole batches),
    bit for bit; None before K episodes; a checkpoint carries it; bad
    values refused naming the key."""
    kw = dict(num_envs=2, horizon=3, lr=3e-3, seed=0, hidden=(8,), noise_std=0.2, **SMALL)
    seen = {}
    out = dl.train_shac("walker-springs", iterations=12, keep_best=3,  # 2 batches of 2 episodes
                        callback=lambda it, pol, steps: seen.__setitem__(it, copy.deepcopy(pol.state_dict())),
                        checkpoint=str(tmp_path / "ck.pt"), **kw)
    eps = [(h["iteration"], h["episode_return"]) for h in out["history"] if h["episode_return"] is not None]
    assert len(eps) == 6  # 6 steps an episode, 3 a window
    means = [((eps[i][1] + eps[i - 1][1]) / 2, eps[i][0]) for i in range(1, len(eps))]
    best_ret, best_it = max(means, key=lambda m: m[0])  # the first of equal maxima
    assert out["best"]["return"] == pytest.approx(best_ret, abs=0, rel=1e-15) and out["best"]["iteration"] == best_it
    assert out["best"]["episodes"] == 4 and out["best"]["env_steps"] == (best_it + 1) * 6
    for key, v in out["best_policy"].state_dict().items():
        assert torch.equal(v, seen[best_it][key]), key
    again = dl.train_shac("walker-springs", iterations=12, keep_best=3, resume=str(tmp_path / "ck.pt"), **kw)
    assert again["best"] == out["best"] and not again["history"]
    assert dl.train_shac("walker-springs", iterations=2, keep_best=13, **kw)["best_policy"] is None
    for bad in (-1, 2.5, True):
        with pytest.raises(dl.DsimError, match="keep_best: .*expected a whole number of episodes"):
            dl.train_bptt("walker-springs", num_envs=1, iterations=1, keep_best=bad, **SMALL)


def test_lr_schedule_reaches_zero():
    """linear: 1 at the first update, 1/iterations at the last, 0 at the end;
    the trainer logs each update's rate; a wrong name is refused."""
    assert dl.lr_factor("constant", 7, 8) == 1.0
    assert dl.lr_factor("linear", 0, 100) == 1.0 and dl.lr_factor("linear", 100, 100) == 0.0
    assert dl.lr_factor("linear", 99, 100) == pytest.approx(0.01)
    out = dl.train_shac("walker-springs", num_envs=2, horizon=2, iterations=4, lr=2e-3, critic_lr=4e-3, seed=0,
                        hidden=(8,), lr_schedule="linear", **SMALL)
    assert [h["lr"] for h in out["history"]] == pytest.approx([2e-3, 1.5e-3, 1e-3, 0.5e-3])
    with pytest.raises(dl.DsimError, match="lr_schedule: 'cosine'; expected one of constant, linear"):
        dl.train_bptt("walker-springs", num_envs=1, iterations=1, lr_schedule="cosine", **SMALL)


def test_target_critic_lags():
    """The soft update theta' <- (1 - tau) theta' + tau theta, exactly; in the
    trainer the target differs from the critic after updates with tau = 0.5
    and equals it with tau = 1; target_tau without a critic is refused."""
    torch.manual_seed(0)
    norm = dl.RunningNorm(3)
    c, t = dl.Critic(3, norm, (4,)), dl.Critic(3, norm, (4,))
    t0 = [p.detach().clone() for p in t.net.parameters()]
    dl._polyak(t, c, 0.25)
    for p0, pt, pc in zip(t0, t.net.parameters(), c.net.parameters()):
        torch.testing.assert_close(pt, 0.75 * p0 + 0.25 * pc, rtol=1e-15, atol=1e-15)
    kw = dict(num_envs=2, horizon=2, iterations=3, seed=0, hidden=(8,), **SMALL)
    for tau in (0.5, 1.0):
        out = dl.train_shac("walker-springs", target_tau=tau, **kw)
        gap = max(float((pt - pc).detach().abs().max()) for pt, pc in
                  zip(out["target_critic"].net.parameters(), out["critic"].net.parameters()))
        assert (gap > 1e-6) if tau < 1 else (gap == 0.0), (tau, gap)
        assert out["target_critic"].norm is out["policy"].norm  # one observation normaliser
    assert dl.train_shac("walker-springs", **kw)["target_critic"] is None
    with pytest.raises(dl.DsimError, match="target_tau: needs a critic"):
        dl.train_bptt("walker-springs", target_tau=0.5, **kw)
    with pytest.raises(dl.DsimError, match=r"target_tau: 1.5; expected a number in \(0, 1\]"):
        dl.train_shac("walker-springs", target_tau=1.5, **kw)


def _fixed_episode_sum(out, f):
    """The sum over the steps of a fixed episode (from reset(7)) of the
    trained noise-free policy of f(action, reward)."""
    pol, ro = out["policy"], out["rollout"]
    with torch.no_grad():
        obs, st = ro.reset(7)
        total = 0
        for _ in range(ro.num_steps):
            a = pol(obs)
            obs, r, st = ro.step(a, st)
            total = total + f(a, r)
    return total


def _assert_first_updates_lower_loss(kw):
    """SHAC's first 4 updates with options kw lower the noise-free policy's
    loss on a fixed episode (from reset(7)) below the untrained one's."""
    def episode_loss(out):
        return -float(_fixed_episode_sum(out, lambda a, r: r.mean()))

    l0 = episode_loss(dl.train_shac("walker-springs", iterations=0, **kw))
    l1 = episode_loss(dl.train_shac("walker-springs", iterations=4, **kw))
    assert l1 < l0 - 1e-3, (l0, l1)


def test_first_updates_decrease_loss_with_options():
    """SHAC with the linear schedule and a target critic: its own first updates
    (windows of the whole 6-step episode, so the actor's objective is the
    episode's return) lower the loss of a fixed episode (from reset(7)) below
    the untrained policy's of the same seed (measured: 1.1e-3, then -3.1e-3
    after 4 updates)."""
    kw = dict(num_envs=2, horizon=6, lr=3e-3, seed=0, hidden=(16,), lr_schedule="linear", target_tau=0.2, **SMALL)

    _assert_first_updates_lower_loss(kw)


def test_stochastic_policy_noise_gradient_and_determinism():
    """noise_std trains a stochastic policy: sample() draws scale tanh(u +
    sigma eps) from the given generator (the same generator state gives the
    same actions), forward() is the noise-free policy, and the simulator's
    gradient reaches logstd (reparameterised) as torch's central differences
    of the same rollout say; a run is the same numbers twice (the noise is
    seeded by (seed, iteration)), and differs from the noise-free run."""
    ro = _rollout()
    pol = dl.MLPPolicy(ro.obs_size, ro.action_size, (8,), ro.action_scale, noise_std=0.3)
    with torch.no_grad():
        pol.net[-1].weight.normal_(0, 0.3)  # a policy whose actions depend on the observation
        pol.logstd.copy_(torch.linspace(-1.5, -0.5, ro.action_size, dtype=torch.float64))
    obs, state = ro.reset(3)
    a1 = pol.sample(obs, torch.Generator().manual_seed(5))
    a2 = pol.sample(obs, torch.Generator().manual_seed(5))
    assert torch.equal(a1, a2) and not torch.equal(a1, pol(obs))
    assert torch.all(a1.abs() <= ro.action_scale)

    def ret(logstd):
        """The return of 3 closed-loop steps with noise drawn alike each call."""
        with torch.no_grad():
            pol.logstd.copy_(logstd)
        pol.zero_grad()
        gen = torch.Generator().manual_seed(11)
        o, st = ro.reset(3)
        total = 0
        for _ in range(3):
            o, r, st = ro.step(pol.sample(o, gen), st)
            total = total + r.sum()
        return total

    l0 = pol.logstd.detach().clone()
    total = ret(l0)
    total.backward()
    g = pol.logstd.grad.clone()
    assert g.abs().max() > 0
    h = 1e-6
    for j in range(ro.action_size):
        e = torch.zeros_like(l0)
        e[j] = h
        with torch.no_grad():
            fd = (float(ret(l0 + e)) - float(ret(l0 - e))) / (2 * h)
        assert abs(float(g[j]) - fd) <= 1e-5 * g.abs().max() + 1e-9, (j, float(g[j]), fd)

    kw = dict(num_envs=2, horizon=3, iterations=3, lr=1e-3, seed=0, hidden=(8,), **SMALL)
    r1 = dl.train_shac("walker-springs", noise_std=0.2, betas=(0.7, 0.95), layer_norm=True, **kw)
    r2 = dl.train_shac("walker-springs", noise_std=0.2, betas=(0.7, 0.95), layer_norm=True, **kw)
    r0 = dl.train_shac("walker-springs", **kw)
    assert [h["reward_per_step"] for h in r1["history"]] == [h["reward_per_step"] for h in r2["history"]]
    assert [h["reward_per_step"] for h in r1["history"]] != [h["reward_per_step"] for h in r0["history"]]
    assert r1["history"][-1]["noise_std"] != pytest.approx(0.2, abs=1e-12)  # sigma is learned
    assert r0["history"][-1]["noise_std"] == 0.0
    r00 = dl.train_shac("walker-springs", noise_std=0, **kw)  # 0: no noise, the same run as None
    assert [h["reward_per_step"] for h in r00["history"]] == [h["reward_per_step"] for h in r0["history"]]
    assert any(isinstance(m, torch.nn.LayerNorm) for m in r1["policy"].net)
    # the update that ends the 6-step episode logs its return: the sum of that episode's rewards
    ends = [h for h in r1["history"] if h["episode_return"] is not None]
    assert [h["iteration"] for h in ends] == [1]
    assert r1["rollout"].num_steps == 6  # two windows of 3 steps
    assert ends[0]["episode_return"] == pytest.approx(
        sum(h["reward_per_step"] for h in r1["history"][:2]) * 3, rel=1e-12)
    for bad in (dict(noise_std=-0.1), dict(noise_std=float("nan")), dict(noise_std="0.2"), dict(betas=(0.9,)),
                dict(betas=(1.0, 0.9)), dict(betas=(0.9, True)), dict(target_tau="0.5"), dict(target_tau=1.5),
                dict(action_cost=True), dict(keep_best=2.5)):
        with pytest.raises(dl.DsimError, match="expected"):
            dl.train_shac("walker-springs", **{**kw, **bad})


def test_stochastic_shac_first_updates_decrease_loss():
    """SHAC with exploration noise, SHAC's Adam betas and LayerNorm: its first
    updates lower the noise-free policy's loss on a fixed episode, as
    test_first_updates_decrease_loss_with_options checks without them."""
    kw = dict(num_envs=2, horizon=6, lr=3e-3, seed=0, hidden=(16,), lr_schedule="linear", noise_std=0.1,
              betas=(0.7, 0.95), layer_norm=True, **SMALL)

    _assert_first_updates_lower_loss(kw)


def test_checkpoint_round_trip(tmp_path):
    """A checkpoint holds the target critic and the schedule's position:
    resumed with nothing left to do it gives back the saved networks
    exactly; resumed for more updates it goes on at the next iteration
    with the schedule's rate there, appending to the log."""
    ck, log = tmp_path / "ck.pt", tmp_path / "log.csv"
    kw = dict(num_envs=2, horizon=2, lr=1e-3, seed=0, hidden=(8,), lr_schedule="linear", target_tau=0.5, **SMALL)
    first = dl.train_shac("walker-springs", iterations=2, checkpoint=str(ck), log_csv=str(log), **kw)
    saved = torch.load(ck, weights_only=False)
    assert saved["iteration"] == 1 and saved["env_steps"] == 8 and saved["target_critic"] is not None
    again = dl.train_shac("walker-springs", iterations=2, resume=str(ck), **kw)
    assert again["history"] == []
    for key in ("policy", "critic", "target_critic"):
        a, b = first[key].state_dict(), again[key].state_dict()
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), key
    more = dl.train_shac("walker-springs", iterations=4, resume=str(ck), checkpoint=str(ck), log_csv=str(log), **kw)
    assert [h["iteration"] for h in more["history"]] == [2, 3]
    assert [h["lr"] for h in more["history"]] == pytest.approx([0.5e-3, 0.25e-3])
    assert more["history"][0]["env_steps"] == 12
    assert len(log.read_text().splitlines()) == 5  # one header, four updates
    assert torch.load(ck, weights_only=False)["iteration"] == 3
    with pytest.raises(dl.DsimError, match="resume: the checkpoint's target_tau is 0.5, this run's None"):
        dl.train_shac("walker-springs", iterations=4, resume=str(ck), **{**kw, "target_tau": None})
    with pytest.raises(dl.DsimError, match="resume: the checkpoint's noise_std is None, this run's 0.2"):
        dl.train_shac("walker-springs", iterations=4, resume=str(ck), **{**kw, "noise_std": 0.2})


# ---- image observations (visuomotor): gradients through the rasterizer ----------------------
IMG = dict(substeps=48, control_interval=8, render_interval=8, width=12, height=12, supersample=1, reward="dense")


def _image_fd_check(J, a0, k=4, h=1e-5):
    """The k largest components of J's gradient at a0 against central
    differences, to 1e-6 relative; a 1% error in the largest fails."""
    a = a0.clone().requires_grad_()
    J(a).backward()
    g = a.grad.flatten()
    idx = torch.argsort(g.abs(), descending=True)[:k]
    for n, q in enumerate(idx):
        e = torch.zeros_like(g)
        e[q] = h
        e = e.reshape(a0.shape)
        fd = (float(J(a0 + e)) - float(J(a0 - e))) / (2 * h)
        assert abs(float(g[q]) - fd) <= 1e-6 * abs(fd) + 1e-10, (int(q), float(g[q]), fd)
        if n == 0:  # the tolerance would see a 1% error
            assert abs(1.01 * float(g[q]) - fd) > 1e-6 * abs(fd) + 1e-10
    return g


def test_image_window_gradient():
    """Open loop: a weighted sum of the rendered frames (N x H x 4 x h x w)
    and dense rewards of a window, differentiated with respect to its
    actions through the rasterizer and the physics."""
    ro = dl.Rollout("control-fem", 2, images=True, **IMG)
    obs, st = ro.reset(3)
    assert obs.shape == (2, 4, 12, 12) and ro.obs_size == 4 * 12 * 12 and float(obs.max()) > 0
    torch.manual_seed(0)
    w = torch.randn(2, 2, 4, 12, 12, dtype=torch.float64)

    def J(a):
        o, r, _ = ro.window(st, a)
        return (o * w).sum() + r.sum()

    a0 = 0.1 * torch.randn(2, 2, ro.action_size, dtype=torch.float64)
    g = _image_fd_check(J, a0)
    assert torch.count_nonzero(g) > 0


def test_image_step_gradient():
    """Closed loop's building block: one step's frame as a function of its
    action (the step function's image adjoint)."""
    ro = dl.Rollout("control-fem", 2, images=True, **IMG)
    torch.manual_seed(1)
    w = torch.randn(2, 4, 12, 12, dtype=torch.float64)

    def J(a):
        _, st = ro.reset(5)
        o, r, _ = ro.step(a, st)
        return (o * w).sum()

    _image_fd_check(J, 0.1 * torch.randn(2, ro.action_size, dtype=torch.float64))


def test_train_from_pixels(tmp_path):
    """The trainers take images=True: a CNN policy, its first updates, a
    logged run, and evaluate() feeding it frames."""
    out = dl.train_shac("control-fem", num_envs=2, horizon=2, iterations=3, seed=0, hidden=(8,), images=True,
                        log_csv=str(tmp_path / "px.csv"), **IMG)
    assert isinstance(out["policy"], dl.CNNPolicy)
    assert all(np.isfinite(h["actor_loss"]) and np.isfinite(h["critic_loss"]) for h in out["history"])
    assert len((tmp_path / "px.csv").read_text().splitlines()) == 4
    assert np.isfinite(dl.evaluate(out["policy"], "control-fem", num_envs=2, **IMG))
    with pytest.raises(dl.DsimError, match="images=True"):
        dl.Rollout("control-fem", 1, observation__image=True, **IMG)


# ---- a fluid env: smoke-control's own state (the fluid's) and window adjoints ----------------
SMOKE = dict(grid__n=16, width=16, height=16, substeps=8, control_interval=2, render_interval=8, control__cells=4,
             fluid__tolerance=1e-12)
# more smoke and a stronger hidden wind: a goal the policy's first actions are far from
SMOKE_BPTT = {**SMOKE, "substeps": 16, "control_interval": 4, "render_interval": 16, "source__rate": 20,
              "target__push": 3}


def test_smoke_window_gradcheck():
    """smoke-control (images: its density frames): d(weighted frames + the
    sparse reward, final state) / d(start-state entries, actions) of the
    last two steps' window, against torch's finite differences in double."""
    ro = dl.Rollout("smoke-control", 2, images=True, **SMOKE)
    nfx = 17 * 16  # 16^2: x faces, y faces, then density and temperature per cell
    assert ro.state_size == 1 + 2 * nfx + 2 * 256 and ro.action_size == 32 and ro.num_steps == 4
    s0 = _start(ro, prefix=2)
    idx = torch.tensor([1 + 8 + 17 * 5, 1 + nfx + 5 + 16 * 8, 1 + 2 * nfx + 8 + 16 * 2])  # x face, y face, density
    sub = s0[:, idx].clone().requires_grad_(True)
    g = torch.Generator().manual_seed(0)
    a = (0.6 * torch.rand(2, 2, ro.action_size, generator=g, dtype=torch.float64) - 0.3).requires_grad_(True)
    w = torch.randn(2, 2, 4, 16, 16, generator=g, dtype=torch.float64)

    def f(sub, a):
        s = s0.clone()
        s[:, idx] = sub
        obs, rew, fin = ro.window(s, a)
        return (obs * w).sum(dim=(1, 2, 3, 4)) + 10 * rew.sum(1), fin[:, idx]

    assert torch.autograd.gradcheck(f, (sub, a), eps=1e-6, atol=1e-6, rtol=1e-4)


def test_smoke_bptt_update_lowers_loss():
    """train_bptt on a tiny smoke-control from pixels (a CNN policy): the
    trainer runs; and one update of its objective over a window of the
    whole episode (the sparse reward: minus the last frame's image loss
    against the hidden wind's plume), from a fixed start, lowers it. (The
    trainer's own iterations also move the policy's running observation
    norm, so their losses are not compared.)"""
    kw = dict(num_envs=2, horizon=4, seed=0, hidden=(8,), images=True, **SMOKE_BPTT)
    out = dl.train_bptt("smoke-control", iterations=2, **kw)
    assert isinstance(out["policy"], dl.CNNPolicy)
    assert all(np.isfinite(h["actor_loss"]) and h["actor_loss"] > 0 for h in out["history"])
    pol, ro = out["policy"], out["rollout"]
    opt = torch.optim.Adam(pol.net.parameters(), lr=1e-3)

    def window_loss():
        obs, st = ro.reset(7)
        total = 0
        for _ in range(ro.num_steps):
            obs, r, st = ro.step(pol(obs), st)
            total = total + r.mean()
        return -total

    l0 = window_loss()
    opt.zero_grad()
    l0.backward()
    opt.step()
    l1 = float(window_loss().detach())
    assert l1 < float(l0.detach()), (float(l0.detach()), l1)


def test_randomize_and_perturb_hooks():
    """Domain randomisation: randomize(ro, episode, rng) runs before every
    episode's reset and its per-env parameters hold through the episode;
    perturb(ro, k, rng) runs before every step k in order, with the same
    generator as that episode's randomize (episode_rng(seed, episode));
    forces it sets reach the physics (the rewards change); the same seed
    gives the same draws and the same updates; a non-function is refused."""
    import dsim.residual as dr

    def run(push):
        log = []

        def randomize(ro, ep, rng):
            mus = rng.uniform(0.2, 1.0, ro.num_envs)
            for i in range(ro.num_envs):
                ro.batch.set_param(i, "contact.mu", [mus[i]])
            log.append(("ep", ep, tuple(mus)))

        def perturb(ro, k, rng):
            mus = tuple(float(ro.batch.param(i, "contact.mu")[0]) for i in range(ro.num_envs))
            drawn = [e for e in log if e[0] == "ep"][-1][2]
            assert mus == drawn, (k, mus, drawn)
            log.append(("k", k, float(rng.uniform())))
            if push and k == 4:
                m = np.stack([ro.batch.param(i, "particle.mass") for i in range(ro.num_envs)])
                f = np.zeros((ro.num_envs, m.shape[1], 3))
                f[:, :, 0] = 50.0 * m
                dr.set_forces(ro, f.reshape(ro.num_envs, -1))

        out = dl.train_bptt("walker-springs", num_envs=2, horizon=4, iterations=4, seed=5, hidden=(8,),
                            randomize=randomize, perturb=perturb, **SMALL)
        return log, [h["reward_per_step"] for h in out["history"]], [h["actor_loss"] for h in out["history"]]

    log, rew, loss = run(False)
    steps = SMALL["substeps"] // SMALL["control_interval"]  # 6 steps an episode: windows of 4, 2, 4, 2
    eps = [e for e in log if e[0] == "ep"]
    assert [e[1] for e in eps] == [0, 1]
    ks = [e[1] for e in log if e[0] == "k"]
    assert ks == list(range(steps)) * 2, ks
    rng = dl.episode_rng(5, 1)
    assert eps[1][2] == tuple(rng.uniform(0.2, 1.0, 2))
    assert eps[0][2] != eps[1][2]
    log2, rew2, loss2 = run(False)
    assert log2 == log and rew2 == rew and loss2 == loss
    _, rew3, _ = run(True)
    assert rew3[0] == rew[0] and abs(rew3[1] - rew[1]) > 1e-3, (rew, rew3)  # the push acts from step 4 on
    with pytest.raises(dl.DsimError, match="randomize: 3; expected a function or None"):
        dl.train_shac("walker-springs", num_envs=1, iterations=1, randomize=3, **SMALL)


# ---- goal-conditioned observations (goal=True) ------------------------------------------------
GOAL = {**IMG, "goal__x_min": 1.0, "goal__x_max": 5.0}


def _alpha_column_centroid(alpha: torch.Tensor) -> torch.Tensor:
    """N x h x w alpha -> the mean column of each image's coverage."""
    cols = torch.arange(alpha.shape[-1], dtype=alpha.dtype)
    return (alpha.sum(1) * cols).sum(1) / alpha.sum((1, 2))


def test_goal_observations_follow_reset_seed():
    """goal=True: each env's observation carries its own episode's goal, the
    env's goal image on channels 4..7 (images) or its target centre
    (state), constant over the episode and redrawn by a reset with other
    seeds; the goal image's coverage lies further right for a goal further
    along x (a check of the channels independent of how they are read);
    an open-loop window's frames carry it too."""
    ro = dl.Rollout("control-fem", 3, images=True, goal=True, **GOAL)
    rs = dl.Rollout("control-fem", 3, goal=True, **GOAL)
    assert ro.obs_shape == (8, 12, 12) and ro.obs_size == 8 * 12 * 12 and rs.obs_size == 6 + 3
    goals = []
    for seed in (0, 40):
        obs, st = ro.reset(seed)
        sobs, _ = rs.reset(seed)
        tgt = dl.goal_of(ro.batch, False)
        assert torch.equal(obs[:, 4:], dl.goal_of(ro.batch, True, ro.image_shape))
        assert torch.equal(sobs[:, 6:], tgt) and bool(((tgt[:, 0] >= 1) & (tgt[:, 0] < 5)).all())
        assert len(set(tgt[:, 0].tolist())) == 3                       # every env its own goal
        order = torch.argsort(tgt[:, 0])
        cx = _alpha_column_centroid(obs[:, 7])
        assert bool((cx[order].diff() > 0).all()), (tgt[:, 0], cx)
        o1, _, _ = ro.step(torch.zeros(3, ro.action_size, dtype=torch.float64), st)
        assert torch.equal(o1[:, 4:], obs[:, 4:]) and not torch.equal(o1[:, :4], obs[:, :4])
        ow, _, _ = ro.window(st, torch.zeros(3, 2, ro.action_size, dtype=torch.float64))  # N x H x 8 x h x w
        assert ow.shape == (3, 2, 8, 12, 12) and torch.equal(ow[:, 1, 4:], obs[:, 4:])
        goals.append(obs[:, 4:])
    assert not torch.equal(goals[0], goals[1])


def test_goal_step_gradient_reaches_frames_only():
    """The goal channels are constants: a loss on the goal-stacked frame has
    the gradient (with respect to the action) of its frame part alone, the
    step function's image adjoint, checked by central differences."""
    ro = dl.Rollout("control-fem", 2, images=True, goal=True, **GOAL)
    torch.manual_seed(2)
    w = torch.randn(2, 8, 12, 12, dtype=torch.float64)

    def J(a):
        _, st = ro.reset(5)
        o, _, _ = ro.step(a, st)
        assert o.shape == (2, 8, 12, 12)
        return (o * w).sum()

    a0 = 0.1 * torch.randn(2, ro.action_size, dtype=torch.float64)
    g = _image_fd_check(J, a0)
    plain = dl.Rollout("control-fem", 2, images=True, **GOAL)
    a = a0.clone().requires_grad_()
    _, st = plain.reset(5)
    o, _, _ = plain.step(a, st)
    (o * w[:, :4]).sum().backward()
    assert torch.allclose(g, a.grad.flatten(), rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("images", [True, False])
def test_train_with_goal(images, tmp_path):
    """The trainers with goal=True: a CNN on 8 channels or an MLP on the
    state and goal, finite first updates, a checkpoint that resumes only a
    goal run, and evaluate() handing the policy its goal."""
    ck = tmp_path / "ck.pt"
    kw = dict(num_envs=2, horizon=2, seed=0, hidden=(8,), images=images, **GOAL)
    out = dl.train_shac("control-fem", iterations=3, goal=True, checkpoint=str(ck), **kw)
    pol = out["policy"]
    if images:
        assert isinstance(pol, dl.CNNPolicy) and pol.cnn[0].in_channels == 8
    else:
        assert pol.net[0].in_features == 9 and pol.norm.mean.numel() == 9
    assert pol.goal and all(np.isfinite(h["actor_loss"]) and np.isfinite(h["critic_loss"]) for h in out["history"])
    assert np.isfinite(dl.evaluate(pol, "control-fem", num_envs=2, **GOAL))
    again = dl.train_shac("control-fem", iterations=4, goal=True, resume=str(ck), **kw)
    assert [h["iteration"] for h in again["history"]] == [3]
    with pytest.raises(dl.DsimError, match="resume: the checkpoint's goal is True, this run's False"):
        dl.train_shac("control-fem", iterations=4, resume=str(ck), **kw)


def test_image_policy_critic_reads_the_state(tmp_path):
    """An image policy's critic (critic_obs "auto" = "state"): Rollout.observe
    gives an images rollout the state observation (centre of mass and
    velocity, then the goal's centre), the same values as a state rollout's
    observation; its gradient with respect to an action reaches the physics
    (central differences). The trainer's critic reads it with statistics of
    its own and shares no parameter with the policy; "pixels" gives a
    CNNCritic with an encoder of its own; bad values are refused; a
    checkpoint resumes only with the same critic input."""
    ro = dl.Rollout("control-fem", 2, images=True, goal=True, **GOAL)
    rs = dl.Rollout("control-fem", 2, goal=True, **GOAL)
    assert ro.state_obs_size == 9 and rs.state_obs_size == 9
    _, st = ro.reset(3)
    sobs, _ = rs.reset(3)
    assert torch.allclose(ro.observe(st), sobs, rtol=0, atol=1e-12)  # torch's sums against the library's
    a1 = 0.1 * torch.ones(2, ro.action_size, dtype=torch.float64)
    o1, _, st1 = ro.step(a1, st)
    s1, _, _ = rs.step(a1, rs.state())
    assert o1.shape == (2, 8, 12, 12) and torch.allclose(ro.observe(st1), s1, rtol=0, atol=1e-12)
    # in the air the muscles cannot move the centre of mass: start with the teeth in the ground
    rg = dl.Rollout("control-fem", 2, images=True, goal=True, scene__start=[-4.0, 1.82, 0.0], **GOAL)
    w = torch.tensor([0.3, -1.0, 0.2, 2.0, 0.7, -0.4, 5.0, 5.0, 5.0], dtype=torch.float64)

    def J(a):
        _, s0 = rg.reset(3)
        _, _, s1 = rg.step(a, s0)
        return (rg.observe(s1) * w).sum()

    gen = torch.Generator().manual_seed(4)
    g = _image_fd_check(J, 0.1 * torch.randn(2, ro.action_size, dtype=torch.float64, generator=gen))
    assert float(g.abs().max()) > 0

    ck = tmp_path / "ck.pt"
    kw = dict(num_envs=2, horizon=2, seed=0, hidden=(8,), images=True, **IMG)
    out = dl.train_shac("control-fem", iterations=3, checkpoint=str(ck), **kw)
    pol, cr = out["policy"], out["critic"]
    assert isinstance(cr, dl.Critic) and cr.net[0].in_features == 6
    assert cr.norm is not pol.norm and float(cr.norm.count) >= 2 * 2 * 3  # the windows' states
    assert not {id(p) for p in cr.parameters()} & {id(p) for p in pol.parameters()}
    assert all(np.isfinite(h["critic_loss"]) and h["critic_loss"] > 0 for h in out["history"])
    again = dl.train_shac("control-fem", iterations=4, resume=str(ck), **kw)
    assert [h["iteration"] for h in again["history"]] == [3]
    with pytest.raises(dl.DsimError, match="resume: the checkpoint's critic_obs is 'state', this run's 'pixels'"):
        dl.train_shac("control-fem", iterations=4, resume=str(ck), critic_obs="pixels", **kw)
    px = dl.train_shac("control-fem", iterations=2, critic_obs="pixels", target_tau=0.2, **kw)
    cr = px["critic"]
    assert isinstance(cr, dl.CNNCritic) and isinstance(px["target_critic"], dl.CNNCritic)
    assert not {id(p) for p in cr.parameters()} & {id(p) for p in px["policy"].parameters()}
    assert all(np.isfinite(h["critic_loss"]) for h in px["history"])
    with pytest.raises(dl.DsimError, match="critic_obs: 'frames'; expected one of auto, state, pixels"):
        dl.train_shac("control-fem", iterations=1, critic_obs="frames", **kw)
    with pytest.raises(dl.DsimError, match="critic_obs: 'pixels' needs images=True"):
        dl.train_shac("control-fem", iterations=1, critic_obs="pixels", **{**kw, "images": False})
    with pytest.raises(dl.DsimError, match="critic_obs: 'state', but smoke-control has no state observation"):
        dl.train_shac("smoke-control", num_envs=2, horizon=2, iterations=1, hidden=(8,), images=True,
                      critic_obs="state", **SMOKE)


def test_cnn_feature_norm_per_channel():
    """CNNPolicy's feature statistics: per channel over all positions (the
    default: after one update from frames, each feature is normalised by
    its channel's mean and deviation over the frames and the 2 x 2
    positions), or per feature; bad values refused."""
    torch.manual_seed(0)
    pol = dl.CNNPolicy((4, 16, 16), 3)
    per = dl.CNNPolicy((4, 16, 16), 3, feature_norm="feature")
    assert pol.features == 32 * 2 * 2 and pol.norm.rn.mean.numel() == 32 and per.norm.rn.mean.numel() == 128
    x = torch.rand(6, 4, 16, 16, dtype=torch.float64)
    with torch.no_grad():
        pol.norm.update(x)
        raw = pol.cnn(x).reshape(6, 32, 4)
        m, sd = raw.mean(dim=(0, 2), keepdim=True), raw.std(dim=(0, 2), unbiased=False, keepdim=True)
        want = ((raw - m) / sd).flatten(1)
        # the statistics' prior (count 1e-4, mean 0, variance 1) moves the smallest variances by 0.5%
        assert torch.allclose(pol.norm(x), want, rtol=0, atol=2e-2)
        per.load_state_dict({**per.state_dict(), **{k: v for k, v in pol.state_dict().items() if "norm" not in k}})
        per.norm.update(x)
        assert float((per.norm(x) - want).abs().max()) > 0.5
    with pytest.raises(ValueError, match="feature_norm: 'pixel'"):
        dl.CNNPolicy((4, 16, 16), 3, feature_norm="pixel")


def test_encoder_lr():
    """encoder_lr: the CNN's convolutions learn at their own rate (a tiny
    one leaves them where the first update put them while the head moves);
    a bad value and a state policy refused."""
    snap = {}

    def cb(it, policy, steps):
        if it == 0:
            snap.update({k: v.detach().clone() for k, v in policy.state_dict().items()})

    # on the ground, where the actions move the centre of mass (the dense reward's gradient)
    kw = dict(num_envs=2, horizon=2, seed=0, hidden=(8,), images=True, scene__start=[-4.0, 1.82, 0.0], **IMG)
    out = dl.train_shac("control-fem", iterations=4, encoder_lr=1e-12, callback=cb, **kw)
    after = out["policy"].state_dict()
    conv = [k for k in after if k.startswith("cnn.") and k.endswith("weight")]
    head = [k for k in after if k.startswith("head.") and k.endswith("weight")]
    assert conv and head
    assert max(float((after[k] - snap[k]).abs().max()) for k in conv) < 1e-9
    assert max(float((after[k] - snap[k]).abs().max()) for k in head) > 1e-6
    with pytest.raises(dl.DsimError, match="encoder_lr: 0; expected a number > 0"):
        dl.train_shac("control-fem", iterations=1, encoder_lr=0, **kw)
    with pytest.raises(dl.DsimError, match="encoder_lr: needs images=True"):
        dl.train_shac("control-fem", iterations=1, encoder_lr=1e-4, **{**kw, "images": False})


def test_smoke_shac_critic_on_frames():
    """smoke-control has frames only: "auto" gives its critic a CNN of its
    own; the first updates are finite."""
    out = dl.train_shac("smoke-control", num_envs=2, horizon=2, iterations=2, seed=0, hidden=(8,), images=True,
                        **SMOKE)
    assert isinstance(out["critic"], dl.CNNCritic)
    assert all(np.isfinite(h["actor_loss"]) and np.isfinite(h["critic_loss"]) for h in out["history"])


# The runner (an articulation with ground contact): short steps, landed after
# the first five (its start is 1 cm above the ground), small frames.
RUNNER = dict(substeps=120, control_interval=10, render_interval=10, width=16, height=16, supersample=1,
              reward="dense")


def test_runner_closed_loop_step_gradient():
    """The runner through step nodes: five zero steps (it lands), then a
    2-step return of a policy on the joint observations; d(return)/d(policy
    weights) through the window state adjoints of the articulation (q, qd)
    against central differences. Seen failing: the joint part of the C
    window backward's grad_state0 scaled by 1.01 (one component off by 0.6%),
    and adj_final's joint part left unseeded (off by 64%)."""
    ro = dl.Rollout("runner", 2, **RUNNER)
    torch.manual_seed(1)
    pol = dl.MLPPolicy(ro.obs_size, ro.action_size, hidden=(8,), action_scale=0.5)
    with torch.no_grad():
        pol.net[-1].weight.mul_(10)
    zero = torch.zeros(ro.num_envs, ro.action_size, dtype=torch.float64)

    def ret():
        obs, st = ro.reset(2)
        for _ in range(5):
            obs, _, st = ro.step(zero, st)
        total = 0
        for _ in range(2):
            obs, r, st = ro.step(pol(obs), st)
            total = total + r.sum()
        return total

    _check_first_row_gradient(ret, pol.net[0].weight, [0, 3, 9, 14])


def test_runner_shac_runs():
    """SHAC on the runner: windows with state adjoints of an articulation."""
    out = dl.train_shac("runner", num_envs=2, horizon=4, iterations=2, hidden=(8,), seed=0, lr=1e-3, **RUNNER)
    assert len(out["history"]) == 2
    assert all(np.isfinite(h["actor_loss"]) and np.isfinite(h["grad_norm"]) and h["grad_norm"] > 0
               for h in out["history"])


def test_action_cost(tmp_path):
    """action_cost=c: the objective's penalty is c * mean_j (a_j / scale)^2
    (checked by hand); from a policy at 3/4 of full actuation, six updates
    with a large c shrink the noise-free policy's actions to under half of
    where they started and of where c = 0 takes them, the logged rewards stay the
    task's (the first window's actions are the same draws), and bad values
    and a resume with another cost are refused."""
    acts = [torch.tensor([[0.5, -1.0], [0.0, 0.25]], dtype=torch.float64),
            torch.tensor([[2.0, 0.0], [-2.0, 2.0]], dtype=torch.float64)]
    got = dl._action_costs(acts, 2.0, 0.3)
    want = 0.3 * torch.tensor([[(0.0625 + 0.25) / 2, (1.0 + 0.0) / 2],
                               [(0.0 + 0.015625) / 2, (1.0 + 1.0) / 2]], dtype=torch.float64)
    torch.testing.assert_close(got, want, rtol=1e-15, atol=0)
    kw = dict(num_envs=2, horizon=6, lr=0.1, seed=0, hidden=(16,), noise_std=0.3, **SMALL)  # Adam: ~lr a step

    def mean_sq_action(out):
        scale = out["policy"].action_scale
        return _fixed_episode_sum(out, lambda a, r: float(((a / scale) ** 2).mean())) / out["rollout"].num_steps

    # start from a policy at 3/4 of full actuation (the last layer's bias), both costs from the same checkpoint
    ck0 = tmp_path / "start.pt"
    dl.train_shac("walker-springs", iterations=0, checkpoint=str(ck0), **kw)
    ck = torch.load(ck0, weights_only=False)
    ck["policy"]["net.2.bias"].fill_(1.0)
    for cost in (0.0, 50.0):
        ck["args"]["action_cost"] = cost
        torch.save(ck, tmp_path / f"start{cost}.pt")
    run = {c: dl.train_shac("walker-springs", iterations=7, action_cost=c, resume=str(tmp_path / f"start{c}.pt"),
                            **kw) for c in (0.0, 50.0)}
    start = 0.75 ** 2
    free, paid = mean_sq_action(run[0.0]), mean_sq_action(run[50.0])
    assert paid < 0.5 * start and paid < 0.5 * free, (start, paid, free)
    h0, h1 = run[0.0]["history"][0], run[50.0]["history"][0]
    assert h1["reward_per_step"] == h0["reward_per_step"]          # the same draws, the task's reward logged
    assert h1["actor_loss"] > h0["actor_loss"] + 10                 # the penalty (~50 * 0.56) is in the objective
    with pytest.raises(dl.DsimError, match="resume: the checkpoint's action_cost is 0.0, this run's 1.0"):
        dl.train_shac("walker-springs", iterations=8, action_cost=1.0, resume=str(tmp_path / "start0.0.pt"), **kw)
    for bad in (-1.0, float("nan"), True, "0.1"):
        with pytest.raises(dl.DsimError, match="action_cost: .*expected a number >= 0"):
            dl.train_bptt("walker-springs", num_envs=1, iterations=1, action_cost=bad, **SMALL)


@pytest.mark.parametrize("key,bad,want", [
    ("critic_iters", 0, "a whole number of critic passes >= 1"), ("critic_iters", -2, "critic passes >= 1"),
    ("critic_iters", 2.5, "critic passes >= 1"), ("critic_iters", True, "critic passes >= 1"),
    ("horizon", 0, "a whole number of steps >= 1"), ("iterations", -1, "a whole number >= 0"),
    ("gamma", 0.0, r"a number in \(0, 1\]"), ("gamma", 1.5, r"\(0, 1\]"), ("lam", -0.1, r"a number in \[0, 1\]"),
    ("lr", 0.0, "a number > 0"), ("critic_lr", float("nan"), "a number > 0"), ("clip", -1.0, "a number >= 0"),
    ("lr", "1e-3", "a number > 0")])
def test_numbers_refused(key, bad, want):
    """Counts and rates a trainer cannot use are refused with the key and
    the range, before any env is made (critic_iters 0 used to fit no critic
    silently; horizon 0 failed inside torch)."""
    for train in (dl.train_shac, dl.train_bptt):
        with pytest.raises(dl.DsimError, match=f"dsim.learn {key}: .*expected .*{want}"):
            train("walker-springs", num_envs=1, **{"iterations": 1, key: bad}, **SMALL)


def _crush_at(step):
    """A perturb that inverts a tet of env 1 at the given step of the first
    episode (a huge force on its first particles)."""
    import dsim.residual as dr
    fired = []

    def perturb(ro, k, rng):
        if k == step and not fired:
            fired.append(k)
            f = np.zeros((ro.num_envs, 3 * dl._lib.env_num_particles(ro.batch.env(0))))
            f[1, :30] = 1e6
            dr.set_forces(ro, f)
    return perturb


def test_failure_ends_the_window():
    """on_failure="end": a window whose step 2 fails (env 1's tet inverted)
    is cut before it and learned from: BPTT's update from the 2 steps kept
    equals, parameter for parameter, the update of a 2-step window that
    never failed (the tape before the failure is intact); the failure is
    recorded with the steps kept and its step counted. With SHAC the
    failed env's terminal value failure_value is a constant to the actor
    (the policy's first update does not depend on it) and a target to the
    critic (whose first fit does); every env then starts over. Unusable
    settings are refused by name."""
    kw = dict(num_envs=2, iterations=1, seed=0, hidden=(8,), **SMALL)
    cut = dl.train_bptt("control-fem", horizon=3, perturb=_crush_at(2), on_failure="end", **kw)
    ref = dl.train_bptt("control-fem", horizon=2, **kw)
    assert [h["iteration"] for h in cut["history"]] == [0]
    f = cut["failures"]
    assert len(f) == 1 and f[0]["steps_kept"] == 2 and f[0]["env_steps"] == 3 * 2
    assert "env 1: step 2: " in f[0]["error"] and "inverted" in f[0]["error"]
    assert cut["history"][0]["env_steps"] == 6 and cut["history"][0]["failures"] == 1
    for (n1, p1), (n2, p2) in zip(cut["policy"].named_parameters(), ref["policy"].named_parameters()):
        assert n1 == n2 and torch.equal(p1, p2), n1
    assert not torch.equal(next(cut["policy"].parameters()), next(dl.train_bptt(
        "control-fem", horizon=2, **{**kw, "iterations": 0})["policy"].parameters()))  # an update was made
    # the default: no update from that window
    rs = dl.train_bptt("control-fem", horizon=3, perturb=_crush_at(2), **kw)
    assert rs["history"] == [] and rs["failures"][0]["steps_kept"] == 0

    runs = [dl.train_shac("control-fem", horizon=3, perturb=_crush_at(2), on_failure="end", failure_value=v, **kw)
            for v in (0.0, -5.0)]
    for p1, p2 in zip(runs[0]["policy"].parameters(), runs[1]["policy"].parameters()):
        assert torch.equal(p1, p2)
    assert any(not torch.equal(p1, p2) for p1, p2 in zip(runs[0]["critic"].parameters(),
                                                           runs[1]["critic"].parameters()))
    assert runs[1]["history"][0]["critic_loss"] != runs[0]["history"][0]["critic_loss"]
    for bad, want in ((dict(on_failure="skip"), "on_failure: 'skip'; expected one of restart, end"),
                      (dict(failure_value=-1.0), "failure_value: needs on_failure='end'"),
                      (dict(on_failure="end", failure_value="-1"), "failure_value: '-1'; expected a finite number")):
        with pytest.raises(dl.DsimError, match=want):
            dl.train_shac("control-fem", horizon=3, **{**kw, **bad})


def test_training_failures_counted(tmp_path):
    """A window in which an env fails (a tet inverted by a push at step 2 of
    the first episode) makes no update and starts every env over; the
    trainer records it (iteration, env steps, the error naming env, step
    and tet), counts the simulated steps (the failed one included) and logs
    the running count; a checkpoint carries the records to a resumed run."""
    import dsim.residual as dr
    fired = []

    def perturb(ro, k, rng):
        if k == 2 and not fired:
            fired.append(k)
            f = np.zeros((ro.num_envs, 3 * dl._lib.env_num_particles(ro.batch.env(0))))
            f[1, :30] = 1e6
            dr.set_forces(ro, f)

    log, ck = tmp_path / "log.csv", tmp_path / "ck.pt"
    out = dl.train_shac("control-fem", num_envs=2, horizon=3, iterations=4, seed=0, hidden=(8,), perturb=perturb,
                        log_csv=str(log), checkpoint=str(ck), **SMALL)
    assert len(out["failures"]) == 1
    f = out["failures"][0]
    assert f["iteration"] == 0 and f["env_steps"] == 3 * 2
    assert "env 1: step 2: " in f["error"] and "inverted" in f["error"]
    assert [(h["iteration"], h["env_steps"], h["failures"]) for h in out["history"]] == [(1, 12, 1), (2, 18, 1),
                                                                                         (3, 24, 1)]
    rows = log.read_text().splitlines()
    assert rows[0].endswith(",failures") and all(r.endswith(",1") for r in rows[1:])
    more = dl.train_shac("control-fem", num_envs=2, horizon=3, iterations=5, seed=0, hidden=(8,), resume=str(ck),
                         **SMALL)
    assert more["failures"] == out["failures"] and more["history"][0]["failures"] == 1
