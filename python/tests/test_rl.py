"""RL-readiness of every registered env class: the declared action space is
safe to explore, out-of-range actions are clipped and counted the same way
by the single env, the vector env and the SB3 adapter, and the dense reward
(loss.reward = "dense") is the step's progress by the class's metric, the
same on the batched engine and through the vector env."""
import numpy as np
import pytest

from conftest import need  # noqa: E402

gymnasium = need("gymnasium")

import dsim  # noqa: E402
from dsim.gym import register_envs  # noqa: E402

IDS = register_envs()


# control-fem's 5,760 substeps (3 s) cut to 2,880: the throw, the landing
# (where +-1 activations inverted tets, substeps 47-900) and the settling
# stay in; the rest is a gear at rest. Every other class: its whole episode.
# smoke-control draws a pixel per grid cell: its grid at the test's 32 x 32 frames
SHORT = {"dsim/ControlFem-v0": dict(substeps=2880), "dsim/SmokeControl-v0": dict(grid__n=32)}


@pytest.mark.parametrize("gid", IDS)
def test_random_actions_full_episodes(gid):
    """Uniform random actions from action_space.sample() for whole episodes of
    the class's own horizon and step (its bundled defaults), seeds 0..4: no
    engine error (inversion, divergence) ends an episode."""
    for seed in range(5):
        env = gymnasium.make(gid, render__width=32, render__height=32, render__supersample=1, **SHORT.get(gid, {}))
        env.action_space.seed(seed)
        env.reset(seed=seed)
        steps = 0
        while True:
            _, r, term, trunc, info = env.step(env.action_space.sample())
            steps += 1
            assert not term, f"{gid} seed {seed} step {steps}: {info.get('error')}"
            assert np.isfinite(r) and np.isfinite(info["metric"]) and info["clipped"] == 0
            if trunc:
                break
        assert steps == env.unwrapped.env.num_steps
        env.close()


@pytest.mark.parametrize("gid", IDS)
def test_box_corners_full_episodes(gid):
    """The Box's corners, all +1, all -1 and random +-1, for a whole episode
    (seed 0): no engine error either."""
    for mode in ("plus", "minus", "bang"):
        env = gymnasium.make(gid, render__width=32, render__height=32, render__supersample=1, **SHORT.get(gid, {}))
        rng = np.random.default_rng(0)
        env.reset(seed=0)
        shape = env.action_space.shape
        while True:
            a = np.full(shape, 1.0 if mode == "plus" else -1.0) if mode != "bang" else rng.choice([-1.0, 1.0], shape)
            _, _, term, trunc, info = env.step(a)
            assert not term, f"{gid} {mode}: {info.get('error')}"
            if trunc:
                break
        env.close()


def _walker(**kw):
    return dict(substeps=192, control_interval=32, render__width=24, render__height=24, render__supersample=1, **kw)


def test_out_of_range_actions_clipped_and_counted():
    """An action of 5 in the [-1, 1] Box acts as 1 and is counted in
    info["clipped"]: single env and vector env alike (SB3: below)."""
    a = np.zeros(104, np.float64)
    a[:3] = [5.0, -7.0, 0.5]
    ref = np.clip(a, -1, 1)
    single = []
    for act, n in ((a, 2), (ref, 0)):
        env = gymnasium.make("dsim/Walker-v0", **_walker())
        env.reset(seed=3)
        obs, r, _, _, info = env.step(act)
        assert info["clipped"] == n
        single.append((obs, r))
        env.close()
    np.testing.assert_array_equal(single[0][0], single[1][0])
    assert single[0][1] == single[1][1]
    venv = gymnasium.make_vec("dsim/Walker-v0", num_envs=2, **_walker())
    venv.reset(seed=3)
    obs, _, _, _, info = venv.step(np.stack([a, ref]))
    assert info["clipped"].tolist() == [2, 0]
    np.testing.assert_array_equal(obs[0], single[0][0])
    venv.close()
    env = gymnasium.make("dsim/Walker-v0", **_walker())
    env.reset(seed=3)
    with pytest.raises(dsim.DsimError, match="not finite"):
        env.step(np.full(104, np.nan))


def test_out_of_range_actions_sb3():
    """The SB3 adapter: the same clipping, the count in each env's info."""
    need("stable_baselines3")
    from dsim.sb3 import SB3VecEnv
    a = np.zeros(104, np.float64)
    a[:3] = [5.0, -7.0, 0.5]
    ref = np.clip(a, -1, 1)
    venv = gymnasium.make_vec("dsim/Walker-v0", num_envs=2, **_walker())
    venv.reset(seed=3)
    want, _, _, _, _ = venv.step(np.stack([ref, ref]))
    venv.close()
    sb = SB3VecEnv(gymnasium.make_vec("dsim/Walker-v0", num_envs=2, **_walker()), seed=3)
    sb.reset()
    obs, _, _, infos = sb.step(np.stack([a, ref]))
    assert [i["clipped"] for i in infos] == [2, 0]
    np.testing.assert_array_equal(obs, want)
    sb.close()


def _episode(gid, seed, **kw):
    env = gymnasium.make(gid, **kw)
    env.reset(seed=seed)
    rewards, metrics = [], [env.unwrapped.env.metric()]
    while True:
        _, r, term, trunc, info = env.step(np.full(env.action_space.shape, 0.3))
        assert not term
        rewards.append(r)
        metrics.append(info["metric"])
        if trunc:
            break
    return np.array(rewards), np.array(metrics), env


def test_dense_reward_walker_is_forward_progress():
    """walker, dense: r_k = com x(k) - com x(k-1), summing to the metric;
    the batched engine and the vector env give the same rewards."""
    r, m, env = _episode("dsim/Walker-v0", 1, **_walker(reward="dense"))
    np.testing.assert_allclose(r, np.diff(m), rtol=0, atol=1e-12)
    assert abs(r.sum() - m[-1]) < 1e-12 and np.ptp(r) > 0
    sparse, _, _ = _episode("dsim/Walker-v0", 1, **_walker())
    assert not np.allclose(sparse, r)  # the default stays the loss terms
    rb, mb, _ = _episode("dsim/Walker-v0", 1, **_walker(reward="dense", physics__batched_engine=True))
    np.testing.assert_allclose(rb, r, rtol=0, atol=1e-9)
    for extra, tol in (({}, 1e-12), ({"physics__batched_engine": True}, 1e-9)):  # batch_shared.c: one engine
        venv = gymnasium.make_vec("dsim/Walker-v0", num_envs=2, **_walker(reward="dense", **extra))
        venv.reset(seed=1)
        rv = []
        for _ in range(len(r)):
            _, rew, _, _, _ = venv.step(np.full((2, 104), 0.3))
            rv.append(rew[0])
        np.testing.assert_allclose(rv, r, rtol=0, atol=tol)
        venv.close()


def test_dense_reward_target_is_distance_decrease():
    """control-fem (a target class), dense: r_k = |com(k-1) - target| -
    |com(k) - target|; the metric is |com - target|^2 / 3."""
    kw = dict(substeps=64, control_interval=16, render__width=24, render__height=24, render__supersample=1,
              reward="dense")
    r, m, env = _episode("dsim/ControlFem-v0", 2, **kw)
    dist = np.sqrt(3 * m)
    np.testing.assert_allclose(r, -np.diff(dist), rtol=0, atol=1e-9)
    rb, _, _ = _episode("dsim/ControlFem-v0", 2, physics__batched_engine=True, **kw)
    np.testing.assert_allclose(rb, r, rtol=0, atol=1e-9)


def test_dense_reward_adjoint():
    """backward_adjoints takes adjoints of dense rewards (the sum of the
    rewards is the displacement: its gradient matches a central difference);
    the loss's backward still works."""
    def run(a):
        env.reset(1)
        total = 0.0
        for k in range(2):
            total += env.step(a[k])[1]
        return total

    env = dsim.Env("walker", substeps=64, control_interval=32, reward="dense", render__width=24, render__height=24,
                   render__supersample=1)
    a = np.full((2, 104), 0.1)
    run(a)
    g = env.backward_adjoints(adj_reward=np.ones(2))
    for k, j in ((0, 3), (1, 50)):
        ap, am = a.copy(), a.copy()
        ap[k, j] += 1e-6
        am[k, j] -= 1e-6
        fd = (run(ap) - run(am)) / 2e-6
        np.testing.assert_allclose(g[k, j], fd, rtol=1e-4, atol=1e-9)
    run(a)
    loss, g = env.backward_loss()
    assert g.shape == (2, 104) and np.isfinite(loss)