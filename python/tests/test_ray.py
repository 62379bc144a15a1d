"""dsim.ray on a local Ray instance with 2 CPUs: a seed sweep and a sysid
batch as Ray tasks give the single-process results bit for bit; the RLlib
registration makes the Gymnasium env and the native batched env."""
import csv
import json
import os

import numpy as np
import pytest

from conftest import need

ray = need("ray")
import dsim.ray  # noqa: E402

TINY = {"env": {"name": "walker",
                "physics": {"substeps": 64, "control_interval": 16, "render_interval": 32, "render_last": True},
                "render": {"width": 16, "height": 16, "supersample": 1, "sigma": 1e-4}},
        "run": {"iterations": 3}}

SYSID = {"env": {"name": "beam", "beam": {"cells": [3, 1, 1]},
                 "physics": {"substeps": 256, "render_interval": 64, "control_interval": 64},
                 "render": {"width": 24, "height": 24, "supersample": 1, "sigma": 1e-3}},
         "sysid": {"param1": {"name": "tet.k_mu", "lower": 10, "upper": 100000, "init_range": [500, 2000],
                              "true_range": [500, 2000]},
                   "optimizer": "lbfgs", "lr": 0.5, "iterations": 10},
         "run": {"seed": 4, "threads": 1}}


@pytest.fixture(scope="module")
def local_ray():
    dsim.ray.init(None, num_cpus=2)
    yield
    ray.shutdown()


def test_sweep_equals_single_process(local_ray, tmp_path):
    grid = {"controller.lr": [0.05, 0.2]}
    remote = dsim.ray.sweep(TINY, seeds=[0, 1], grid=grid, out_dir=str(tmp_path / "r"))
    here = dsim.ray.sweep(TINY, seeds=[0, 1], grid=grid, out_dir=str(tmp_path / "l"), local=True)
    assert len(remote) == len(here) == 4
    assert [(r["seed"], r["controller.lr"]) for r in remote] == [(0, 0.05), (0, 0.2), (1, 0.05), (1, 0.2)]
    for a, b in zip(remote, here):
        assert a["losses"] == b["losses"]  # bit for bit, every iteration
        assert a["low_loss"] == b["low_loss"] and a["best_metric"] == b["best_metric"]
        assert a["iterations"] == 3 and a["status"] == b["status"]
        assert os.path.basename(a["log"]) == os.path.basename(b["log"])
    # one table of the sweep, the same from Ray and from one process
    def table(d):
        with open(tmp_path / d / "sweep.csv", newline="") as fh:
            return [{k: v for k, v in r.items() if "time" not in k and k != "log"} for r in csv.DictReader(fh)]

    assert table("r") == table("l") and len(table("r")) == 4
    head = (tmp_path / "r" / "sweep.csv").read_text().splitlines()[0]
    assert head.startswith("seed,controller.lr,") and "low_loss" in head and "losses" not in head
    # seeds and learning rates differ: the runs are not copies of one another
    assert len({r["losses"][-1] for r in remote}) == 4
    # a second sweep into the same folder replaces nothing unless asked
    before = (tmp_path / "l" / "sweep.csv").read_bytes()
    with pytest.raises(dsim.DsimError, match="exists; refusing to replace it"):
        dsim.ray.sweep(TINY, seeds=[0, 1], grid=grid, out_dir=str(tmp_path / "l"), local=True)
    assert (tmp_path / "l" / "sweep.csv").read_bytes() == before
    again = dsim.ray.sweep(TINY, seeds=[0], grid={"controller.lr": [0.05]}, out_dir=str(tmp_path / "l"), local=True,
                           overwrite=True)
    assert again[0]["losses"] == here[0]["losses"]
    # no logs without out_dir
    rows = dsim.ray.sweep(TINY, seeds=[2], local=True)
    assert "log" not in rows[0] and rows[0]["iterations"] == 3


def test_sysid_batch_equals_single_process(local_ray, tmp_path):
    cfg = tmp_path / "m.json"
    cfg.write_text(json.dumps(SYSID))
    rows = dsim.ray.sysid_batch(str(cfg), objects=3, tasks=2, out_dir=str(tmp_path / "ray"))
    local = dsim.ray.sysid_batch(str(cfg), objects=3, tasks=1, out_dir=str(tmp_path / "one"), local=True)
    assert [r["seed"] for r in rows] == ["4", "5", "6"]
    keep = ("seed", "parameter", "true", "estimate", "abs_rel_error", "iterations")
    assert [{k: r[k] for k in keep} for r in rows] == [{k: r[k] for k in keep} for r in local]
    assert max(float(r["abs_rel_error"]) for r in rows) < 1e-6
    with pytest.raises(dsim.DsimError, match="exists; refusing to replace it"):
        dsim.ray.sysid_batch(str(cfg), objects=3, tasks=1, out_dir=str(tmp_path / "one"), local=True)
    rows2 = dsim.ray.sysid_batch(str(cfg), objects=3, tasks=1, out_dir=str(tmp_path / "one"), local=True,
                                 overwrite=True)
    assert [r["estimate"] for r in rows2] == [r["estimate"] for r in local]


def test_sysid_batch_bad_config(local_ray, tmp_path):
    with pytest.raises(dsim.DsimError, match="exit"):
        dsim.ray.sysid_batch(str(tmp_path / "missing.json"), objects=1, out_dir=str(tmp_path / "x"), local=True)


def test_rllib_registration():
    pytest.importorskip("ray.tune")
    from ray.tune.registry import ENV_CREATOR, _global_registry

    ids = dsim.ray.register_rllib()
    assert "dsim/Walker-v0" in ids
    make = _global_registry.get(ENV_CREATOR, "dsim/Walker-v0")
    small = dict(substeps=64, control_interval=16, render_interval=32, width=16, height=16, supersample=1)
    one = make(dict(small))
    obs, _ = one.reset(seed=0)
    assert one.action_space.shape[0] > 0 and np.all(np.isfinite(obs))
    one.close()
    vec = make(dict(small, num_envs=3))  # RLlib's vector entry point: the native batched env
    assert vec.num_envs == 3
    obs, _ = vec.reset(seed=0)
    obs, rew, term, trunc, info = vec.step(np.zeros(vec.action_space.shape))
    assert obs.shape[0] == 3 and np.all(np.isfinite(rew))
    vec.close()
