"""The native batched env: make_vec uses it, every env equals a separate
single env bit for bit, next-step autoreset, per-env parameters."""
import gymnasium
import numpy as np

import dsim
from dsim.vector import DsimVectorEnv
from conftest import SMALL


def test_make_vec_is_native():
    v = gymnasium.make_vec("dsim/WalkerSprings-v0", num_envs=3, **SMALL["walker-springs"])
    assert isinstance(v.unwrapped, DsimVectorEnv)
    assert v.observation_space.shape == (3, 6) and v.action_space.shape[0] == 3
    assert v.unwrapped.config["physics"]["gradients"] is False  # forward only unless asked
    v.close()
    v = gymnasium.make_vec("dsim/WalkerSprings-v0", num_envs=2, **SMALL["walker-springs"],
                           config={"env": {"physics": {"gradients": True}}})
    assert v.unwrapped.config["physics"]["gradients"] is True
    v.close()


def test_equals_single_envs_and_autoreset():
    kw = SMALL["walker"]
    n = 4
    v = gymnasium.make_vec("dsim/Walker-v0", num_envs=n, **kw)
    obs, _ = v.reset(seed=10)
    singles = [dsim.Env("walker", **kw) for _ in range(n)]
    so = np.stack([e.reset(10 + i) for i, e in enumerate(singles)])
    assert np.array_equal(obs, so)
    rng = np.random.default_rng(0)
    T = singles[0].num_steps
    for k in range(T):
        a = rng.uniform(-0.5, 0.5, (n, v.unwrapped.action_size))
        obs, r, term, trunc, info = v.step(a)
        for i, e in enumerate(singles):
            o, ri, d = e.step(np.ascontiguousarray(a[i], dtype=dsim.real_dtype))
            assert np.array_equal(obs[i], o) and r[i] == ri and trunc[i] == d
            assert info["metric"][i] == e.metric()
        assert not term.any()
    assert trunc.all()
    # next step: reset with seed + i + n, reward 0, no done
    obs, r, term, trunc, info = v.step(np.zeros((n, v.unwrapped.action_size)))
    assert not trunc.any() and not term.any() and np.all(r == 0)
    for i, e in enumerate(singles):
        assert np.array_equal(obs[i], e.reset(10 + i + n))
        e.close()
    v.close()


def test_per_env_params():
    kw = SMALL["walker"]
    v = DsimVectorEnv("walker", num_envs=2, **kw)
    v.reset(seed=0)
    m = dsim.Env("walker", **kw).param("particle.mass")
    v.set_param(1, "particle.mass", m * 3)
    v.reset(seed=[0, 0])
    a = np.full((2, v.action_size), 0.4, dsim.real_dtype)
    for _ in range(2):
        obs, *_ = v.step(a)
    assert not np.array_equal(obs[0], obs[1])
    v.close()


def test_sync_vector_env_same_results():
    kw = SMALL["walker-springs"]
    v = gymnasium.make_vec("dsim/WalkerSprings-v0", num_envs=2, **kw)
    s = gymnasium.make_vec("dsim/WalkerSprings-v0", num_envs=2, vectorization_mode="sync", **kw)
    o1, _ = v.reset(seed=1)
    o2, _ = s.reset(seed=1, options=None)
    assert o1.shape == o2.shape
    a = np.full((2, v.unwrapped.action_size), 0.2)
    for _ in range(3):
        r1 = v.step(a)
        r2 = s.step(a)
        assert r1[0].shape == r2[0].shape and r1[3].shape == r2[3].shape
    v.close()
    s.close()


def test_device_refused_clearly():
    # no GPU on the test machines (or no CUDA in the build): a clear error naming the device
    if dsim._lib.cuda_device_count() > 0:
        import pytest
        pytest.skip("a CUDA device is present")
    try:
        gymnasium.make_vec("dsim/WalkerSprings-v0", num_envs=2, device="cuda:0", **SMALL["walker-springs"])
    except dsim.DsimError as e:
        assert "cuda" in str(e).lower() and "batch" in str(e)
    else:
        raise AssertionError("device cuda:0 accepted without a GPU")
    v = gymnasium.make_vec("dsim/WalkerSprings-v0", num_envs=2, device="cpu", **SMALL["walker-springs"])
    v.close()
