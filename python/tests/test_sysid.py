"""dsim.sysid and dsim.landscape (dsim/sysid.h through the binding): a tiny
beam whose shear modulus (tet.k_mu, true 1000, initial guess 800) is
identified from its synthetic video to 1e-6 relative, and from 8-bit footage
rendered through the package (dsim.render_footage) to 1e-3; the footage as
an array and as a folder of PNGs give the same estimates bit for bit; the
log holds the loss history; a landscape's lowest point is the truth; a
camera looking at a point off the origin through intrinsics (a dict or a
file) identifies from its own footage; the CLI's landscape and sysid give
the same numbers bit for bit; bad inputs raise DsimError naming what is
wrong."""
import json
import os
import subprocess

import numpy as np
import pytest

import dsim
from dsim import _lib

TRUE_MU = 1000.0
CFG = {
    "env": {"name": "beam", "beam": {"cells": [3, 1, 1]}, "physics": {"substeps": 384, "render_interval": 64},
            "render": {"width": 24, "height": 24, "sigma": 0.001},
            "camera": {"distance": 2, "elevation": 10, "azimuth": 20}},
    "sysid": {"param1": {"name": "tet.k_mu", "lower": 10, "upper": 100000, "init": 800, "true": TRUE_MU},
              "optimizer": "lbfgs", "lr": 0.5, "iterations": 12},
    "run": {"seed": 0},
}


@pytest.fixture(scope="module")
def footage():
    f = dsim.render_footage(CFG)
    u8 = (np.clip(f["frames"], 0, 1) * 255.0 + 0.5).astype(np.uint8)
    return dict(f, u8=u8)


def test_synthetic_recovers_truth():
    r = dsim.sysid(CFG)
    assert r.truth == {"tet.k_mu": TRUE_MU}
    assert r.initial == {"tet.k_mu": 800.0}
    assert abs(r.estimates["tet.k_mu"] - TRUE_MU) / TRUE_MU < 1e-6
    assert r.errors["tet.k_mu"] < 1e-6
    assert r.loss[0] > r.best_loss and len(r.loss) == len(r.grad_norm) >= 2
    assert r.stop_reason  # "iterations" or L-BFGS's reason
    assert r.video.shape == r.rendered.shape == (len(r.substeps), 24, 24, 4)
    assert r.log is None


def test_footage_array_and_folder_same(footage, tmp_path):
    assert footage["truth"] == {"tet.k_mu": TRUE_MU}
    cam = footage["camera"]
    a = dsim.sysid(CFG, frames=footage["u8"], times=footage["times"], camera=cam)
    folder = dsim.save_frames(tmp_path / "frames", footage["u8"], footage["times"])
    b = dsim.sysid(CFG, frames=folder, camera=cam)  # times from frames.json
    assert a.truth is None and a.errors is None
    assert np.array_equal(a.values, b.values) and np.array_equal(a.loss, b.loss)
    assert abs(a.estimates["tet.k_mu"] - TRUE_MU) / TRUE_MU < 1e-3
    # without times: the env's schedule (frame k at substep (k + 1) 64), which these frames follow
    c = dsim.sysid(CFG, frames=footage["u8"], camera=cam)
    assert np.array_equal(a.values, c.values)
    # float pixels: the same as their 8-bit values / 255
    d = dsim.sysid(CFG, frames=footage["u8"] / 255.0, camera=cam, times=footage["times"])
    assert np.array_equal(a.values, d.values)


def test_log_holds_history(tmp_path):
    if not dsim.build_info()["hdf5"]:
        pytest.skip("built without HDF5: no run logs")
    path = tmp_path / "logs" / "beam.h5"
    r = dsim.sysid(CFG, iterations=3, log=path)
    assert r.log == str(path)
    assert np.array_equal(np.array(_lib.runlog_iterations(path)["loss"]), r.loss)
    with pytest.raises(dsim.DsimError):  # never replaced without overwrite
        dsim.sysid(CFG, iterations=1, log=path)
    dsim.sysid(CFG, iterations=1, log=path, overwrite=True)


def test_landscape_lowest_at_truth():
    g = dsim.landscape(CFG, (500, 1500, 3), threads=1)
    assert g.names == ["tet.k_mu"] and g.loss.shape == (3,) and g.grad.shape == (3, 1)
    assert list(g.axes[0]) == [500.0, 1000.0, 1500.0]
    assert g.lowest == 1 and g.loss[1] <= 1e-12 < min(g.loss[0], g.loss[2])
    assert g.truth == [TRUE_MU] and g.failed == 0
    assert g.grad[0, 0] < 0 < g.grad[2, 0]


def test_params_by_spec():
    r = dsim.sysid(CFG, params={"tet.k_mu": {"lower": 10, "upper": 1e5, "init": 900, "true": TRUE_MU}},
                   iterations=2)
    assert r.initial == {"tet.k_mu": 900.0}
    seen = []
    r = dsim.sysid(CFG, callback=lambda i, loss, est: seen.append((i, loss, est["tet.k_mu"])) or i == 1)
    assert [s[0] for s in seen] == [0, 1] and r.stop_reason == "callback" and list(r.loss) == [s[1] for s in seen]


def test_bad_inputs(footage):
    cam = footage["camera"]
    with pytest.raises(dsim.DsimError) as e:
        dsim.sysid(CFG, params=[{"name": "tet.no_such", "lower": 1, "upper": 10, "init": 2}], iterations=1)
    assert "sysid.param1" in str(e.value) and "tet.no_such" in str(e.value)
    with pytest.raises(dsim.DsimError) as e:
        dsim.sysid(CFG, frames=footage["u8"][0], camera=cam)
    assert "frames: expected an array (T, H, W, 3 or 4)" in str(e.value)
    with pytest.raises(dsim.DsimError) as e:
        dsim.sysid(CFG, frames=footage["u8"][..., :2], camera=cam)
    assert "got shape (6, 24, 24, 2)" in str(e.value)
    with pytest.raises(dsim.DsimError) as e:
        dsim.sysid(CFG, frames=footage["u8"] * 2.0, camera=cam)
    assert "[0, 1]" in str(e.value)
    with pytest.raises(dsim.DsimError) as e:
        dsim.sysid(CFG, frames=footage["u8"], times=footage["times"])
    assert "camera" in str(e.value)
    with pytest.raises(dsim.DsimError) as e:
        dsim.sysid(CFG, frames=footage["u8"], camera={"position": [0, 0, -2]})
    assert "'fov'" in str(e.value)
    with pytest.raises(dsim.DsimError) as e:
        dsim.sysid(CFG, frames=footage["u8"], camera=dict(cam, position=[0, 3, 0], look_at=[0, 1, 0]))
    assert "straight above or below" in str(e.value)
    with pytest.raises(dsim.DsimError) as e:
        dsim.sysid(CFG, frames=footage["u8"], times=footage["times"][:-1], camera=cam)
    assert "times" in str(e.value)
    with pytest.raises(dsim.DsimError) as e:
        dsim.sysid(CFG, optimizer="newton")
    assert "optimizer" in str(e.value)
    with pytest.raises(dsim.DsimError) as e:
        dsim.landscape(CFG, (500, 1500, 3), (1, 2, 3))
    assert "sysid.param2" in str(e.value)


def test_camera_look_at_and_intrinsics(tmp_path):
    # footage seen from a camera that looks at a point off the origin, through intrinsics
    ov = {"env.camera.look_at": [0.1, -0.05, 0.05], "env.camera.fx": 48, "env.camera.fy": 46, "env.camera.cx": 13,
          "env.camera.cy": 11}
    f = dsim.render_footage(CFG, overrides=ov)
    cam = f["camera"]
    assert cam["look_at"] == [0.1, -0.05, 0.05] and (cam["fx"], cam["fy"], cam["cx"], cam["cy"]) == (48, 46, 13, 11)
    del cam["fov"]  # the intrinsics stand in for it
    r = dsim.sysid(CFG, frames=f["frames"], times=f["times"], camera=cam)
    assert abs(r.estimates["tet.k_mu"] - TRUE_MU) / TRUE_MU < 1e-6
    # the same camera as a file
    path = tmp_path / "camera.json"
    path.write_text(json.dumps(dict(cam, times=[float(t) for t in f["times"]])))
    r2 = dsim.sysid(CFG, frames=f["frames"], camera=path)
    assert np.array_equal(r.values, r2.values)
    with pytest.raises(dsim.DsimError) as e:
        dsim.sysid(CFG, frames=f["frames"], camera={"position": cam["position"], "fx": 48})
    assert "fx, fy, cx, cy" in str(e.value)


def _dsim_exe():
    exe = os.environ.get("DSIM")
    if not exe or not os.path.exists(exe):
        pytest.skip("DSIM (the dsim program) not set")
    return exe


def test_same_as_cli(tmp_path):
    exe = _dsim_exe()
    path = tmp_path / "beam.json"
    path.write_text(json.dumps(CFG))
    out = tmp_path / "grid"
    subprocess.run([exe, "landscape", str(path), "--range1", "500:1500:3", "--threads", "1", "--out", str(out),
                    "--no-plot"], check=True, capture_output=True)
    rows = np.loadtxt(str(out) + ".csv", delimiter=",", skiprows=1, ndmin=2)
    g = dsim.landscape(str(path), (500, 1500, 3), threads=1)
    assert np.array_equal(rows[:, 0], g.axes[0])
    assert np.array_equal(rows[:, 1], g.loss) and np.array_equal(rows[:, 2], g.grad[:, 0])  # value, loss, gradient
    if not dsim.build_info()["hdf5"]:
        return
    log = tmp_path / "cli.h5"
    subprocess.run([exe, "sysid", str(path), "--out", str(log), "--threads", "1"], check=True, capture_output=True)
    r = dsim.sysid(str(path))
    assert np.array_equal(np.array(_lib.runlog_iterations(log)["loss"]), r.loss)
