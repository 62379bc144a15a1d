"""ctypes binding of libdsim's C ABI (include/dsim/env.h, dsim/batch.h).

The library is found, in order: the file named by the environment variable
DSIM_LIBRARY; the build tree (``.libs/libdsim.so`` next to the ``python/``
folder this package sits in); the copy `pip install ./python` put in the
package (python/setup.py); pkg-config's ``dsim`` libdir; the linker's
search path (ctypes.util.find_library). It is loaded RTLD_GLOBAL so that a
plugin (dsim.load_plugin) resolves its ds_* references to it, as it does in
the dsim program.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import subprocess

import numpy as np

__all__ = ["lib", "REAL", "real_dtype", "DsimError", "path", "build_info"]


def _candidates():
    env = os.environ.get("DSIM_LIBRARY")
    if env:
        yield env
        return
    here = os.path.dirname(os.path.abspath(__file__))
    top = os.path.dirname(os.path.dirname(here))  # python/dsim -> tree top
    for d in (os.path.join(top, ".libs"), here):  # the build tree, then a copy installed with the package
        for name in ("libdsim.so", "libdsim.dylib"):
            p = os.path.join(d, name)
            if os.path.exists(p):
                yield p
    try:
        libdir = subprocess.run(["pkg-config", "--variable=libdir", "dsim"], capture_output=True, text=True,
                                timeout=10).stdout.strip()
        if libdir:
            for name in ("libdsim.so", "libdsim.dylib"):
                p = os.path.join(libdir, name)
                if os.path.exists(p):
                    yield p
    except (OSError, subprocess.SubprocessError):
        pass
    found = ctypes.util.find_library("dsim")
    if found:
        yield found


def _load():
    tried = []
    for p in _candidates():
        try:
            return ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL), p
        except OSError as e:
            tried.append(f"{p}: {e}")
    raise ImportError("dsim: cannot find libdsim (set DSIM_LIBRARY to its path, build it in the tree, or install "
                      "it where pkg-config or the linker finds it)" + ("; tried " + "; ".join(tried) if tried else ""))


lib, path = _load()


class _BuildInfo(ctypes.Structure):
    _fields_ = [("version", ctypes.c_char_p), ("real_bytes", ctypes.c_int), ("openmp", ctypes.c_int),
                ("max_threads", ctypes.c_int), ("cuda", ctypes.c_int), ("cuda_devices", ctypes.c_int),
                ("hdf5", ctypes.c_int), ("gif", ctypes.c_int), ("hdf5_version", ctypes.c_char * 32),
                ("cjson_version", ctypes.c_char * 32), ("png_version", ctypes.c_char * 32),
                ("options", ctypes.c_char_p)]


lib.ds_build_info.argtypes = [ctypes.POINTER(_BuildInfo)]
lib.ds_build_info.restype = None


def build_info() -> dict:
    """ds_build_info as a dict."""
    bi = _BuildInfo()
    lib.ds_build_info(ctypes.byref(bi))
    out = {}
    for name, _ in _BuildInfo._fields_:
        v = getattr(bi, name)
        out[name] = v.decode() if isinstance(v, bytes) else v
    return out


_bi = build_info()
REAL = ctypes.c_double if _bi["real_bytes"] == 8 else ctypes.c_float
real_dtype = np.dtype(np.float64 if _bi["real_bytes"] == 8 else np.float32)


class ConfigKey(ctypes.Structure):  # dsConfigKey
    _fields_ = [("path", ctypes.c_char_p), ("type", ctypes.c_int), ("offset", ctypes.c_size_t),
                ("min", ctypes.c_double), ("max", ctypes.c_double), ("choices", ctypes.c_char_p),
                ("aux_offset", ctypes.c_size_t), ("doc", ctypes.c_char_p)]


class EnvClassHead(ctypes.Structure):  # the leading fields of dsEnvClass (read only)
    _fields_ = [("name", ctypes.c_char_p), ("doc", ctypes.c_char_p), ("params_size", ctypes.c_size_t),
                ("keys", ctypes.POINTER(ConfigKey))]


P = ctypes.c_void_p
RP = ctypes.POINTER(REAL)
I = ctypes.c_int
S = ctypes.c_char_p


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_fn("ds_err_name", S, I)
_fn("ds_strerror", S, I)
_fn("ds_version_string", S)
_fn("ds_plugin_abi", I)
_fn("ds_set_num_threads", None, I)
_fn("ds_get_max_threads", I)
_fn("ds_env_class_count", I)
_fn("ds_env_class_at", ctypes.POINTER(EnvClassHead), I)
_fn("ds_env_class_find", ctypes.POINTER(EnvClassHead), S)
_fn("ds_env_common_keys", ctypes.POINTER(ConfigKey))
_fn("ds_env_create_from_text", I, S, S, ctypes.POINTER(P), S, ctypes.c_size_t)
_fn("ds_env_destroy", None, P)
_fn("ds_env_set_device", I, P, S)
_fn("ds_cuda_device_count", I)
_fn("ds_env_last_error", S, P)
_fn("ds_env_name", S, P)
_fn("ds_env_config_text", S, P)
_fn("ds_env_def", P, P)
_fn("ds_env_def_to_json", I, P, S, ctypes.c_size_t)
_fn("ds_env_obs_size", I, P)
_fn("ds_env_action_size", I, P)
_fn("ds_env_action_kind", I, P)
_fn("ds_env_image_size", None, P, ctypes.POINTER(I), ctypes.POINTER(I))
_fn("ds_env_num_steps", I, P)
_fn("ds_env_steps_taken", I, P)
_fn("ds_env_num_particles", I, P)
_fn("ds_env_state_size", I, P)
_fn("ds_env_reset", I, P, ctypes.c_uint64, P, P)
_fn("ds_env_step", I, P, P, P, P, RP, ctypes.POINTER(I))
_fn("ds_env_loss", I, P, RP)
_fn("ds_env_backward_loss", I, P, RP, P)
_fn("ds_env_backward_adjoints", I, P, P, P, P, P)
_fn("ds_env_backward_loss_from", I, P, I, RP, P)
_fn("ds_env_param", I, P, S, ctypes.POINTER(RP), ctypes.POINTER(I))
_fn("ds_env_set_param", I, P, S, P, I)
_fn("ds_env_param_grad", I, P, S, ctypes.POINTER(RP), ctypes.POINTER(I))
_fn("ds_env_get_state", I, P, P, I)
_fn("ds_env_set_state", I, P, P, I)
_fn("ds_env_render", I, P, P)
_fn("ds_env_target", I, P, P)
_fn("ds_env_metric", I, P, RP)
_fn("ds_env_metric_goal", ctypes.c_double, P)
_fn("ds_batch_create_from_text", I, S, S, I, ctypes.POINTER(P), S, ctypes.c_size_t)
_fn("ds_batch_create_from_text_on", I, S, S, I, S, I, ctypes.POINTER(P), S, ctypes.c_size_t)
_fn("ds_batch_destroy", None, P)
_fn("ds_batch_size", I, P)
_fn("ds_batch_env", P, P, I)
_fn("ds_batch_last_error", S, P)
_fn("ds_batch_reset", I, P, P, P, P, P, P)
_fn("ds_batch_step", I, P, P, P, P, P, P, P, I)
_fn("ds_batch_metric", I, P, P)
_fn("ds_batch_backward_loss", I, P, P, P, P)
_fn("ds_batch_backward_adjoints", I, P, P, P, P, P, P)
DS_BATCH_LOCKSTEP = 2

DS_ERR_STATE = -12
DS_ERR_RANGE = -9
DS_ERR_DIVERGED = -7
DS_ERR_INVERTED = -8
DS_ERR_NOTFOUND = -13
DS_ACTION_INITIAL = 1
DS_BATCH_AUTORESET = 1
DS_BATCH_RESET = 1


class DsimError(RuntimeError):
    """An error reported by libdsim (or caught before the call). ``code`` is the
    DS_ERR_* code (0 when the check was made in Python), ``name`` its name,
    ``env`` the env's name, ``c_message`` the library's message."""

    def __init__(self, env: str, what: str, code: int = 0, c_message: str = ""):
        self.env, self.code, self.c_message = env, code, c_message
        self.name = lib.ds_err_name(code).decode() if code else ""
        msg = f"{env}: {what}"
        if code:
            msg += f" [{self.name}]"
        if c_message and c_message not in what:
            msg += f": {c_message}"
        super().__init__(msg)


def err_name(code: int) -> str:
    return lib.ds_err_name(code).decode()


def ptr(a: np.ndarray):
    """The data pointer of an array (no copy)."""
    return a.ctypes.data


def resolved_config(env_handle) -> str:
    """The env's complete config (every key) as JSON text (ds_env_def_to_json)."""
    d = lib.ds_env_def(env_handle)
    need = lib.ds_env_def_to_json(d, None, 0)
    buf = ctypes.create_string_buffer(need + 1)
    lib.ds_env_def_to_json(d, buf, need + 1)
    return buf.value.decode()
