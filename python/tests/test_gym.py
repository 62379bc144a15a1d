"""Gymnasium envs: registration of every class, check_env without a warning,
config keyword overrides and config files, spaces, reset/step contract,
rgb_array rendering and image observations."""
import json
import warnings

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import dsim
from conftest import SMALL

IDS = {"walker": "dsim/Walker-v0", "control-fem": "dsim/ControlFem-v0", "control-cloth": "dsim/ControlCloth-v0",
       "walker-springs": "dsim/WalkerSprings-v0", "rigid-toss": "dsim/RigidToss-v0"}


def test_registered():
    for name, gid in IDS.items():
        assert dsim.env_id(name) == gid
        assert gid in gymnasium.envs.registration.registry


@pytest.mark.parametrize("name", list(IDS))
def test_check_env_no_warning(name):
    env = gymnasium.make(IDS[name], render_mode="rgb_array", **SMALL[name])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        check_env(env.unwrapped)
    assert [str(x.message) for x in w] == []
    env.close()


@pytest.mark.parametrize("name", list(IDS))
def test_episode_contract(name):
    env = gymnasium.make(IDS[name], render_mode="rgb_array", **SMALL[name])
    obs, info = env.reset(seed=3)
    env.action_space.seed(0)
    h, w = SMALL[name]["height"], SMALL[name]["width"]
    frame = env.render()  # the scene in view at the start
    assert frame.shape == (h, w, 3) and frame.dtype == np.uint8 and frame.max() > 0
    assert isinstance(info, dict) and "metric" in info
    assert env.observation_space.contains(obs)
    assert np.all(np.isfinite(env.action_space.low)) and np.all(env.action_space.high == 1)
    n = env.unwrapped.env.num_steps
    for k in range(n):
        obs, r, term, trunc, info = env.step(env.action_space.sample() * 0.3)
        assert isinstance(r, float) and term is False and trunc == (k == n - 1)
        assert np.isfinite(info["metric"])
    frame = env.render()
    assert frame.shape == (h, w, 3) and frame.dtype == np.uint8
    # the same seed gives the same episode
    o1, _ = env.reset(seed=5)
    o2, _ = env.reset(seed=5)
    assert np.array_equal(o1, o2)
    env.close()


def test_kwargs_override_and_config_file(tmp_path):
    env = gymnasium.make("dsim/Walker-v0", substeps=64, control_interval=16)
    assert env.unwrapped.env.num_steps == 4
    env.close()
    cfg = tmp_path / "my.json"
    cfg.write_text(json.dumps({"env": {"name": "walker", "physics": {"substeps": 96, "control_interval": 32},
                                       "material": {"k_mu": 5000}}, "controller": {"lr": 0.1}}))
    env = gymnasium.make("dsim/Walker-v0", config=str(cfg), substeps=128, **{"material__k_lambda": 2000.0})
    c = env.unwrapped.env.config
    assert c["physics"]["substeps"] == 128 and c["physics"]["control_interval"] == 32
    assert c["material"]["k_mu"] == 5000 and c["material"]["k_lambda"] == 2000
    env.close()


def test_image_observation():
    kw = dict(SMALL["walker"])
    env = gymnasium.make("dsim/Walker-v0", image_obs=True, **kw)
    obs, _ = env.reset(seed=0)
    assert obs["image"].shape == (24, 24, 3) and obs["image"].dtype == np.uint8
    assert env.observation_space.contains(obs)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        check_env(env.unwrapped, skip_render_check=True)
    assert [str(x.message) for x in w] == []
    obs, *_ = env.step(env.action_space.sample())
    assert obs["image"].max() > 0
    env.close()


def test_reset_options_params():
    env = gymnasium.make("dsim/Walker-v0", **SMALL["walker"])
    m = env.unwrapped.env.param("particle.mass")
    env.reset(seed=0, options={"params": {"particle.mass": m * 2}})
    assert np.allclose(env.unwrapped.env.param("particle.mass"), m * 2)
    env.close()
