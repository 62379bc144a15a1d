"""An external RL agent end to end: Stable-Baselines3 PPO trains on the
batched walker for a few thousand steps through dsim.sb3.SB3VecEnv (the
example python/examples/ppo_walker.py), writing its CSV and PNG."""
import os
import sys

import pytest

from conftest import need  # noqa: E402

need("stable_baselines3")
need("matplotlib")

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))


def test_ppo_short_training(tmp_path):
    import ppo_walker
    out = str(tmp_path / "ppo")
    rows = ppo_walker.main(["--steps", "3000", "--num-envs", "4", "--n-steps", "150", "--out", out,
                            "--set", "physics.substeps=480", "--set", "render.width=24", "--set", "render.height=24",
                            "--set", "render.supersample=1"])
    assert len(rows) == 3000 // 15  # 15 steps per episode
    lines = open(out + ".csv").read().splitlines()
    assert lines[0] == "episode,env_steps,substeps,return,metric" and len(lines) == len(rows) + 1
    # the dense reward (the default) sums to the metric over an episode
    for _, _, ret, met in rows:
        assert abs(ret - met) < 1e-4 * max(1.0, abs(met))
    assert os.path.getsize(out + ".png") > 1000
    # a finished run's CSV and picture are not replaced unasked (refused before any training)
    with pytest.raises(SystemExit):
        ppo_walker.main(["--steps", "30", "--out", out])
