"""Plugins and config keys from Python as a newcomer meets them (issue 32):
loading a plugin twice, did-you-mean for an unknown keyword argument, the
bundled config lookup going through the library, and the wheel's tag."""
import glob
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile

import pytest

import dsim
from dsim import DsimError

HERE = os.path.dirname(os.path.abspath(__file__))


def _hang_plugin():
    path = os.environ.get("DSIM_PLUGIN") or os.path.join(os.path.dirname(dsim._lib.path), "..", "tests", ".libs",
                                                         "hang_plugin.so")
    if not os.path.exists(path):
        pytest.skip("hang_plugin.so not built")
    return path


def test_load_plugin_twice_is_a_noop():
    path = _hang_plugin()
    first = dsim.load_plugin(path)
    if "hanging-spring" not in first:  # an earlier test loaded it: same object, same answer
        first = dsim.load_plugin(path)
    assert first == ["hanging-spring"]
    assert dsim.load_plugin(path) == first
    assert dsim.load_plugin(os.path.join(os.path.dirname(path), ".", os.path.basename(path))) == first
    assert dsim.classes().count("hanging-spring") == 1


def test_unknown_keyword_suggests():
    """A keyword names a key by its last part; the suggestion does too (the
    library's own compares whole dotted paths, and still answers those)."""
    with pytest.raises(DsimError, match=r'unknown key "env.substepz" \(did you mean "env.physics.substeps"\?\)'):
        dsim.Env("walker", substepz=96)
    with pytest.raises(DsimError, match=r'unknown key "env.physics.substep" \(did you mean "env.physics.substeps"\?\)'):
        dsim.Env("walker", **{"physics.substep": 96})
    with pytest.raises(DsimError, match=r'unknown key "env.zzzz"') as e:
        dsim.Env("walker", zzzz=1)
    assert "did you mean" not in str(e.value)


def test_unknown_keyword_suggests_in_gym_make():
    gymnasium = pytest.importorskip("gymnasium")
    with pytest.raises(DsimError, match=r'did you mean "env.render.width"\?'):
        gymnasium.make("dsim/Walker-v0", widht=24)


def test_unknown_run_override_suggests():
    with pytest.raises(DsimError, match=r"did you mean \"run.iterations\"\?"):
        dsim.Run("walker", {"run.iteratons": 2})


def test_bundled_config_is_the_librarys(tmp_path, monkeypatch):
    (tmp_path / "walker.json").write_text('{"env": {"name": "walker"}}')
    monkeypatch.setenv("DSIM_CONFIG_DIR", str(tmp_path))
    assert dsim.run.bundled_config("walker") == str(tmp_path / "walker.json")
    assert dsim._lib.config_dirs()[0] == str(tmp_path)
    monkeypatch.delenv("DSIM_CONFIG_DIR")
    found = dsim.run.bundled_config("walker")
    assert found and found != str(tmp_path / "walker.json") and os.path.isfile(found)
    assert dsim.run.bundled_config("no-such-env") is None


def test_wheel_is_tagged_for_its_platform(tmp_path):
    """The wheel of python/ carries libdsim.so: a platform tag, not any."""
    if shutil.which("pip") is None and subprocess.run([sys.executable, "-m", "pip", "--version"],
                                                      capture_output=True).returncode:
        pytest.skip("pip missing")
    lib = os.path.realpath(dsim._lib.path)
    src = tmp_path / "src"
    shutil.copytree(os.path.dirname(HERE), src, ignore=shutil.ignore_patterns("tests", "__pycache__", "*.so",
                                                                               "build", "*.egg-info"))
    env = dict(os.environ, DSIM_LIBRARY=lib)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(src),
                        "-w", str(tmp_path / "w")], capture_output=True, text=True, env=env, timeout=120)
    if r.returncode and "No module named" in r.stderr:
        pytest.skip(f"cannot build wheels here: {r.stderr.strip().splitlines()[-1]}")
    assert r.returncode == 0, r.stderr
    wheels = glob.glob(str(tmp_path / "w" / "*.whl"))
    assert len(wheels) == 1
    name = os.path.basename(wheels[0])
    plat = sysconfig.get_platform().replace("-", "_").replace(".", "_")  # linux_x86_64
    assert name.endswith(f"-py3-none-{plat}.whl"), name
    with zipfile.ZipFile(wheels[0]) as z:
        assert "dsim/libdsim.so" in z.namelist()
        assert "Root-Is-Purelib: false" in z.read(next(n for n in z.namelist() if n.endswith("WHEEL"))).decode()
