"""Bad input from Python: an exception naming the env and what was wrong,
carrying the library's message; no crash, no leak."""
import os

import gymnasium
import numpy as np
import pytest

import dsim
from dsim import DsimError
from conftest import SMALL


@pytest.fixture
def walker():
    env = gymnasium.make("dsim/Walker-v0", **SMALL["walker"])
    env.reset(seed=0)
    yield env
    env.close()


def test_wrong_action_shape(walker):
    with pytest.raises(DsimError, match=r"dsim/Walker-v0: action has shape \(3,\); expected \(104,\)"):
        walker.step(np.zeros(3))


def test_wrong_action_dtype(walker):
    with pytest.raises(DsimError, match=r"dsim/Walker-v0: action has dtype int64"):
        walker.step(np.zeros(104, dtype=np.int64))
    env = dsim.Env("walker", **SMALL["walker"])
    env.reset(0)
    other = np.float32 if dsim.real_dtype == np.float64 else np.float64  # not the library's precision
    with pytest.raises(DsimError, match=rf"walker: action has dtype {np.dtype(other)}; expected {dsim.real_dtype}"):
        env.step(np.zeros(104, other))
    with pytest.raises(DsimError, match=r"not C-contiguous"):
        env.step(np.zeros((104, 2), dsim.real_dtype)[:, 0])
    env.close()


def test_nan_action(walker):
    a = np.zeros(104)
    a[7] = np.nan
    with pytest.raises(DsimError) as e:
        walker.step(a)
    msg = str(e.value)
    assert msg.startswith("dsim/Walker-v0: bad action (non-finite at [7])")
    assert "action[7] is not finite" in msg and e.value.name == "DS_ERR_RANGE"  # the C message


def test_step_after_episode_end(walker):
    for _ in range(walker.unwrapped.env.num_steps):
        walker.step(np.zeros(104))
    with pytest.raises(DsimError, match=r"dsim/Walker-v0: step after the episode ended \(3 steps\); call reset"):
        walker.step(np.zeros(104))
    # the C check too
    env = dsim.Env("walker", **SMALL["walker"])
    env.reset(0)
    for _ in range(env.num_steps):
        env.step(np.zeros(104, dsim.real_dtype))
    env._done_flag = False  # bypass the Python check
    with pytest.raises(DsimError, match=r"the episode is done"):
        env.step(np.zeros(104, dsim.real_dtype))
    env.close()


def test_unknown_config_key():
    with pytest.raises(DsimError) as e:
        gymnasium.make("dsim/Walker-v0", substepz=10)
    assert str(e.value).startswith("dsim/Walker-v0: cannot create the env [DS_ERR_CONFIG]")
    assert 'unknown key "env.substepz"' in str(e.value)
    with pytest.raises(DsimError, match=r"did you mean \"env.physics.substeps\""):
        gymnasium.make("dsim/Walker-v0", physics__substepz=10)
    with pytest.raises(DsimError, match=r"env.physics.substeps.*expected"):
        gymnasium.make("dsim/Walker-v0", substeps=-5)
    with pytest.raises(DsimError, match=r"ambiguous"):
        gymnasium.make("dsim/Walker-v0", image="mse")


def test_unknown_parameter(walker):
    env = walker.unwrapped.env
    with pytest.raises(DsimError) as e:
        env.param("tet.k_muu")
    assert str(e.value).startswith("dsim/Walker-v0: unknown parameter 'tet.k_muu' [DS_ERR_NOTFOUND]")
    with pytest.raises(DsimError, match="unknown parameter"):
        walker.reset(options={"params": {"bogus": 1.0}})
    with pytest.raises(DsimError, match="has 3 values, got 2"):
        env.set_param("gravity", [0.0, 1.0])


def test_vector_bad_input():
    v = gymnasium.make_vec("dsim/Walker-v0", num_envs=3, **SMALL["walker"])
    v.reset(seed=0)
    with pytest.raises(DsimError, match=r"actions has shape \(2, 104\); expected \(3, 104\)"):
        v.step(np.zeros((2, 104)))
    a = np.zeros((3, 104))
    a[1, 5] = np.inf
    with pytest.raises(DsimError, match=r"dsim/Walker-v0: step failed in env 1 \[DS_ERR_RANGE\]: env 1: step 0: "
                                        r"action\[5\] is not finite"):
        v.step(a)
    v.close()


def test_plugin_class_appears():
    path = os.environ.get("DSIM_PLUGIN") or os.path.join(os.path.dirname(dsim._lib.path), "..", "tests", ".libs",
                                                         "hang_plugin.so")
    if not os.path.exists(path):
        pytest.skip("hang_plugin.so not built")
    if "hanging-spring" not in dsim.classes():
        assert dsim.load_plugin(path) == ["hanging-spring"]
    assert "dsim/HangingSpring-v0" in gymnasium.envs.registration.registry
    env = gymnasium.make("dsim/HangingSpring-v0")
    from gymnasium.utils.env_checker import check_env
    import warnings
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert [str(x.message) for x in w] == []
    obs, _ = env.reset(seed=0)
    obs, r, term, trunc, info = env.step(env.action_space.sample())
    assert np.isfinite(info["metric"])
    env.close()
    with pytest.raises(DsimError, match="not a dsim plugin"):
        dsim.load_plugin(dsim._lib.path)


def _rss_kb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * (os.sysconf("SC_PAGE_SIZE") // 1024)


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc")
def test_memory_flat_10000_cycles():
    kw = dict(substeps=4, control_interval=2, render_interval=4, width=8, height=8, supersample=1)
    a = np.zeros(104, dsim.real_dtype)

    def cycles(n):
        for i in range(n):
            env = dsim.Env("walker", **kw)
            env.reset(i)
            env.step(a)
            env.close()

    cycles(1000)  # warm up allocator pools
    before = _rss_kb()
    cycles(10000)
    grown = _rss_kb() - before
    assert grown < 2048, f"resident memory grew by {grown} kB over 10,000 create/step/close cycles"


def test_device():
    """device=: "cpu" runs as before; a bad name, and CUDA where there is none (or a build
    without it), raise with the library's message; a GPU-capable env reports its device."""
    env = dsim.Env("walker", device="cpu", **SMALL["walker"])
    assert env.device == "cpu"
    env.close()
    with pytest.raises(DsimError, match=r"walker: device gpu.*expected cpu, cuda or cuda:N"):
        dsim.Env("walker", device="gpu", **SMALL["walker"])
    if dsim._lib.cuda_device_count() == 0:
        with pytest.raises(DsimError, match=r"walker: device cuda.*(without CUDA|no CUDA device is visible)"):
            dsim.Env("walker", device="cuda", **SMALL["walker"])
    else:
        with pytest.raises(DsimError, match=r"rigid-toss: runs on the CPU engine only"):
            dsim.Env("rigid-toss", device="cuda:0")
        env = dsim.Env("walker", device="cuda:0", **SMALL["walker"])
        env.reset(0)
        env.step(np.zeros(env.action_size, dsim.real_dtype))
        env.close()
