"""dsim.Run (dsim/run.h through the binding): a short run stepped and executed
gives the same numbers, bit for bit, and the same as the CLI's run log; bad
overrides name the key; a stop request ends the run after the iteration."""
import json
import os
import subprocess

import pytest

import dsim

SMALL = {"env.physics.substeps": 256, "env.physics.control_interval": 16, "env.physics.render_interval": 64,
         "run.seed": 3, "run.iterations": 3, "run.threads": 1}


def test_execute_equals_stepping():
    with dsim.Run("walker", SMALL) as a:
        ra = a.execute()
    with dsim.Run("walker", SMALL) as b:
        steps = []
        while not b.done:
            steps.append(b.step()["last_loss"])
        rb = b.finish()
    assert ra["iterations"] == rb["iterations"] == 3
    assert ra["status"] == rb["status"] == "completed"
    assert ra["last_loss"] == rb["last_loss"] == steps[-1]
    assert ra["low_loss"] == rb["low_loss"] and ra["best_metric"] == rb["best_metric"]
    assert 0 <= ra["best_iteration"] < 3 and ra["low_loss"] <= ra["first_loss"]


def test_same_as_cli(tmp_path):
    exe = os.environ.get("DSIM")
    if not exe or not os.path.exists(exe):
        pytest.skip("DSIM (the dsim program) not set")
    if not dsim.build_info()["hdf5"]:
        pytest.skip("built without HDF5: no run logs")
    cfg = {"env": {"name": "walker", "physics": {"substeps": 256, "control_interval": 16, "render_interval": 64}},
           "run": {"seed": 3, "iterations": 3, "threads": 1}}
    path = tmp_path / "w.json"
    path.write_text(json.dumps(cfg))
    log = tmp_path / "cli.h5"
    subprocess.run([exe, "run", str(path), "--out", str(log)], check=True, capture_output=True)
    with dsim.Run(str(path)) as r:
        res = r.execute()
    losses = dsim._lib.runlog_iterations(log)["loss"]
    assert len(losses) == 3
    assert float(losses[-1]) == res["last_loss"] and float(losses[0]) == res["first_loss"]
    # one best (the lowest loss, the first of equal ones), one numbering (from 0) with the log
    low = min(range(len(losses)), key=lambda i: (float(losses[i]), i))
    assert res["best_iteration"] == res["low_iteration"] == low
    assert res["low_loss"] == float(losses[low])


def test_bad_override_names_key():
    with pytest.raises(dsim.DsimError) as e:
        dsim.Run("walker", {"env.physics.substeps": "many"})
    assert "env.physics.substeps" in str(e.value)
    with pytest.raises(dsim.DsimError):
        dsim.Run("no-such-env-or-file")


def test_stop_after_iteration():
    with dsim.Run("walker", dict(SMALL, **{"run.iterations": 50})) as r:
        r.step()
        r.stop()
        res = r.execute()
    assert res["interrupted"] == 1 and res["iterations"] <= 2 and res["status"] == "interrupted"


def test_class_name_takes_its_bundled_config():
    from dsim.run import bundled_config
    f = bundled_config("control-fem")
    if f is None:
        pytest.skip("no bundled configs beside this library")
    with open(f) as fh:
        cfg = json.load(fh)
    with dsim.Run("control-fem", {"run.iterations": 1}) as r:
        assert r.config_path == f
    assert cfg["env"]["name"] == "control-fem"


def test_class_name_without_bundled_config_warns(monkeypatch):
    """A class name whose bundled config is not found falls back to the
    built-in defaults with a warning naming the folders searched."""
    import dsim.run
    monkeypatch.setattr(dsim.run, "bundled_config", lambda name: None)
    with pytest.warns(UserWarning, match=r"no bundled walker.json found \(searched: .*DSIM_CONFIG_DIR"):
        label, text, path = dsim.run._config("walker")
    assert label == "walker" and path == "" and '"walker"' in text
