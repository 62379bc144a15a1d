"""dsim: differentiable physics + soft-rasterizer environments from Python.

    import gymnasium, dsim
    env = gymnasium.make("dsim/Walker-v0", substeps=960, render_mode="rgb_array")
    venv = gymnasium.make_vec("dsim/Walker-v0", num_envs=64)    # native batched env
    import dsim.torch                                            # autograd bridge

Every env class registered in the library (bundled or from C, e.g. through
dsim.load_plugin) is registered with Gymnasium as dsim/<CamelCase>-v0.
"""
from __future__ import annotations

import ctypes
import os

from . import _lib
from ._lib import DsimError, build_info, real_dtype
from .env import Env, class_keys, classes
from .lockstep import Lockstep

__version__ = _lib.lib.ds_version_string().decode()
__all__ = ["Env", "Lockstep", "DsimError", "classes", "class_keys", "build_info", "real_dtype", "load_plugin", "env_id",
           "set_num_threads", "__version__"]

_plugins = []  # keep loaded plugins alive


def env_id(name: str) -> str:
    """Gymnasium id of an env class: walker-springs -> dsim/WalkerSprings-v0."""
    return "dsim/" + "".join(p[:1].upper() + p[1:] for p in name.replace("_", "-").split("-") if p) + "-v0"


def set_num_threads(n: int):
    """OpenMP threads of the library (results never depend on it)."""
    _lib.lib.ds_set_num_threads(int(n))


def load_plugin(path) -> list[str]:
    """Load a dsim plugin (a shared object exporting dsim_plugin_init and
    dsim_plugin_abi, as for `dsim run --plugin`): registers its env classes
    in the library and with Gymnasium. Returns the new class names."""
    path = os.fspath(path)
    before = set(classes())
    try:
        so = ctypes.CDLL(os.path.abspath(path), mode=ctypes.RTLD_GLOBAL)
    except OSError as e:
        raise DsimError("plugin", f"cannot load {path}: {e}") from None
    try:
        abi = ctypes.c_int.in_dll(so, "dsim_plugin_abi").value
        init = so.dsim_plugin_init
    except (ValueError, AttributeError):
        raise DsimError("plugin", f"{path} is not a dsim plugin (no dsim_plugin_init / dsim_plugin_abi)") from None
    if abi != _lib.lib.ds_plugin_abi():
        raise DsimError("plugin", f"{path} was built against other dsim headers (ABI {abi}, library "
                        f"{_lib.lib.ds_plugin_abi()})")
    init.restype = ctypes.c_int
    init.argtypes = []
    rc = init()
    if rc:
        raise DsimError("plugin", f"{path}: dsim_plugin_init failed", rc, _lib.lib.ds_strerror(rc).decode())
    _plugins.append(so)
    new = [c for c in classes() if c not in before]
    try:
        from . import gym as _gym
        _gym.register_envs()
    except ImportError:
        pass
    return new


try:  # Gymnasium is optional for the plain API
    from . import gym as _gym

    _gym.register_envs()
except ImportError:
    pass
