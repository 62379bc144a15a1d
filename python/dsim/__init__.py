"""dsim: differentiable physics + soft-rasterizer environments from Python.

    import gymnasium, dsim
    env = gymnasium.make("dsim/Walker-v0", substeps=960, render_mode="rgb_array")
    venv = gymnasium.make_vec("dsim/Walker-v0", num_envs=64)    # native batched env
    import dsim.torch                                            # autograd bridge
    res = dsim.sysid("sysid-beam-mu", frames=video, camera=cam)  # system identification

Every env class registered in the library (bundled or from C, e.g. through
dsim.load_plugin) is registered with Gymnasium as dsim/<CamelCase>-v0.
"""
from __future__ import annotations

import os

from . import _lib
from ._lib import DsimError, build_info, real_dtype
from .env import Env, class_keys, classes, env_id
from .lockstep import Lockstep
from .run import Run
from .sysid import landscape, render_footage, save_frames, sysid

__version__ = _lib.version()
__all__ = ["Env", "Lockstep", "Run", "sysid", "landscape", "render_footage", "save_frames", "DsimError", "classes",
           "class_keys", "build_info", "real_dtype", "load_plugin", "env_id", "set_num_threads", "__version__"]

_plugins = {}  # (device, inode) of each loaded plugin -> (the loaded object, the class names it added)


def set_num_threads(n: int):
    """OpenMP threads of the library (results never depend on it)."""
    _lib.set_num_threads(n)


def load_plugin(path) -> list[str]:
    """Load a dsim plugin (a shared object exporting dsim_plugin_init and
    dsim_plugin_abi, as for `dsim run --plugin`): registers its env classes
    in the library and with Gymnasium. Returns the new class names. Loading
    the same file again (by any path to it) is a no-op that returns the same
    names."""
    path = os.fspath(path)
    try:
        st = os.stat(path)
        key = (st.st_dev, st.st_ino)
    except OSError:
        key = None  # the loader's message says why
    if key in _plugins:
        return list(_plugins[key][1])
    before = set(classes())
    so = _lib.load_plugin_so(path)
    new = [c for c in classes() if c not in before]
    _plugins[key] = (so, new)
    try:
        from . import gym as _gym
        _gym.register_envs()
    except ImportError:
        pass
    return list(new)


try:  # Gymnasium is optional for the plain API
    from . import gym as _gym

    _gym.register_envs()
except ImportError:
    pass
