"""The binding of libdsim's C ABI (include/dsim/*.h): the one module of the
package that loads the library, declares the C functions and mirrors C
structs and constants. Every other module calls the library through the
names defined here and never imports ctypes.

- C functions: ``ds_env_step`` is ``env_step`` here (the ``ds_`` prefix
  dropped), a ctypes function with its argtypes and restype declared; it
  returns what the C function returns (where a wrapper below takes the
  plain name, the raw function ends in ``_c``: ``env_param_c``). Pointer
  arguments take numpy arrays' addresses (``ptr(a)``), None for NULL, or a
  ctypes instance of the pointee (``REAL()``, ``INT()``), which ctypes
  passes by reference.
- Fallible calls that need more than one C call are wrapped (``env_create``,
  ``env_param``, ``resolved_config``, ...); every error is a ``DsimError``
  naming the label, what failed, the C code's name and the library's
  message (``raise_env`` / ``raise_batch`` build it from a code).
- Structs (``ctypes.Structure`` with ``_c_name_``) and constants (``DS_*``)
  copy the C headers; python/tests/test_abi.py compares them with the
  library's ABI table (include/dsim/abi.h) both ways.

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

__all__ = ["lib", "path", "REAL", "INT", "real_dtype", "DsimError", "build_info", "ptr"]


# -- loading --------------------------------------------------------------------------
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


def _fn(name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


# -- structs (dsim/base.h, dsim/env.h) --------------------------------------------------
# _c_name_: the C struct; _c_prefix_ = True when only its leading fields are
# mirrored (the Python struct is then never allocated, only read through a
# pointer the library returns).
class BuildInfo(ctypes.Structure):
    _c_name_ = "dsBuildInfo"
    _fields_ = [("version", ctypes.c_char_p), ("real_bytes", ctypes.c_int), ("openmp", ctypes.c_int),
                ("max_threads", ctypes.c_int), ("cuda", ctypes.c_int), ("cuda_devices", ctypes.c_int),
                ("hdf5", ctypes.c_int), ("gif", ctypes.c_int), ("hdf5_version", ctypes.c_char * 32),
                ("cjson_version", ctypes.c_char * 32), ("png_version", ctypes.c_char * 32),
                ("options", ctypes.c_char_p)]


class ConfigKey(ctypes.Structure):
    _c_name_ = "dsConfigKey"
    _fields_ = [("path", ctypes.c_char_p), ("type", ctypes.c_int), ("offset", ctypes.c_size_t),
                ("min", ctypes.c_double), ("max", ctypes.c_double), ("choices", ctypes.c_char_p),
                ("aux_offset", ctypes.c_size_t), ("doc", ctypes.c_char_p)]


class EnvClassHead(ctypes.Structure):
    _c_name_ = "dsEnvClass"
    _c_prefix_ = True
    _fields_ = [("name", ctypes.c_char_p), ("doc", ctypes.c_char_p), ("params_size", ctypes.c_size_t),
                ("keys", ctypes.POINTER(ConfigKey))]


# dsim/run.h
DS_RUN_STATUS_MAX = 600


class RunOptions(ctypes.Structure):
    _c_name_ = "dsRunOptions"
    _fields_ = [("log", ctypes.c_int), ("overwrite", ctypes.c_int), ("name", ctypes.c_char_p)]


class RunResult(ctypes.Structure):
    _c_name_ = "dsRunResult"
    _fields_ = [("iterations", ctypes.c_int), ("planned", ctypes.c_int), ("interrupted", ctypes.c_int),
                ("first_loss", ctypes.c_double), ("last_loss", ctypes.c_double), ("first_metric", ctypes.c_double),
                ("last_metric", ctypes.c_double), ("best_metric", ctypes.c_double),
                ("best_iteration", ctypes.c_int), ("low_loss", ctypes.c_double), ("low_metric", ctypes.c_double),
                ("low_iteration", ctypes.c_int), ("iteration_time", ctypes.c_double), ("nparams", ctypes.c_int),
                ("threads", ctypes.c_int), ("status", ctypes.c_char * DS_RUN_STATUS_MAX)]


# dsim/sysid.h
class SysidFootage(ctypes.Structure):
    _c_name_ = "dsSysidFootage"
    _fields_ = [("camera_file", ctypes.c_char_p), ("position", ctypes.c_double * 3),
                ("look_at", ctypes.c_double * 3), ("fov", ctypes.c_double), ("fx", ctypes.c_double),
                ("fy", ctypes.c_double), ("cx", ctypes.c_double), ("cy", ctypes.c_double),
                ("times", ctypes.POINTER(ctypes.c_double)), ("frames_dir", ctypes.c_char_p),
                ("nframes", ctypes.c_int), ("width", ctypes.c_int), ("height", ctypes.c_int),
                ("rgba", ctypes.c_void_p)]


class SysidVideo(ctypes.Structure):
    _c_name_ = "dsSysidVideo"
    _fields_ = [("nframes", ctypes.c_int), ("width", ctypes.c_int), ("height", ctypes.c_int),
                ("substep", ctypes.POINTER(ctypes.c_int)), ("rgba", ctypes.c_void_p), ("nviews", ctypes.c_int),
                ("views", ctypes.c_void_p)]


class SysidIter(ctypes.Structure):
    _c_name_ = "dsSysidIter"
    _fields_ = [("iteration", ctypes.c_int), ("loss", ctypes.c_double), ("grad_norm", ctypes.c_double),
                ("values", ctypes.POINTER(ctypes.c_double)), ("evaluations", ctypes.c_int)]


class LandscapeAxis(ctypes.Structure):
    _c_name_ = "dsLandscapeAxis"
    _fields_ = [("lo", ctypes.c_double), ("hi", ctypes.c_double), ("n", ctypes.c_int)]


class LandscapeDef(ctypes.Structure):
    _c_name_ = "dsLandscapeDef"
    _fields_ = [("axis", LandscapeAxis * 2), ("geometric", ctypes.c_int), ("object", ctypes.c_int),
                ("threads", ctypes.c_int), ("group", ctypes.c_int)]


# dsim/runlog.h
class RunLogDef(ctypes.Structure):
    _c_name_ = "dsRunLogDef"
    _fields_ = [("config_text", ctypes.c_char_p), ("env", ctypes.c_char_p), ("method", ctypes.c_char_p),
                ("seed", ctypes.c_uint64), ("threads", ctypes.c_int), ("nparams", ctypes.c_int),
                ("substep_stride", ctypes.c_int), ("compression", ctypes.c_int), ("overwrite", ctypes.c_int),
                ("has_metric_goal", ctypes.c_int), ("metric_goal", ctypes.c_double)]


class RunIteration(ctypes.Structure):
    _c_name_ = "dsRunIteration"
    _fields_ = [("loss", ctypes.c_double), ("metric", ctypes.c_double), ("wall_time", ctypes.c_double),
                ("grad_norm", ctypes.c_double), ("params", ctypes.POINTER(ctypes.c_double))]


# -- constants (dsim/base.h error list, dsim/env.h, dsim/batch.h) -------------------------
DS_OK = 0
DS_ERR_NOMEM = -1
DS_ERR_INVALID = -2
DS_ERR_IO = -3
DS_ERR_PARSE = -4
DS_ERR_CONFIG = -5
DS_ERR_MESH = -6
DS_ERR_DIVERGED = -7
DS_ERR_INVERTED = -8
DS_ERR_RANGE = -9
DS_ERR_UNSUPPORTED = -10
DS_ERR_ARENA = -11
DS_ERR_STATE = -12
DS_ERR_NOTFOUND = -13
DS_ERR_CUDA = -14
DS_ERR_FORMAT = -15
DS_ERR_INTERRUPTED = -16
DS_ACTION_PER_STEP = 0
DS_ACTION_INITIAL = 1
DS_BATCH_AUTORESET = 1  # ds_batch_step flag
DS_BATCH_LOCKSTEP = 2  # ds_batch_create_from_text_on flag
DS_BATCH_STEPPED = 0  # status values
DS_BATCH_RESET = 1
DS_SYSID_MAX_PARAMS = 8  # dsim/sysid.h

# -- functions ---------------------------------------------------------------------------
build_info_c = _fn("ds_build_info", None, ctypes.POINTER(BuildInfo))


def build_info() -> dict:
    """ds_build_info as a dict."""
    bi = BuildInfo()
    build_info_c(ctypes.byref(bi))
    out = {}
    for name, _ in BuildInfo._fields_:
        v = getattr(bi, name)
        out[name] = v.decode() if isinstance(v, bytes) else v
    return out


_bi = build_info()
REAL = ctypes.c_double if _bi["real_bytes"] == 8 else ctypes.c_float  # dsReal
INT = ctypes.c_int
real_dtype = np.dtype(np.float64 if _bi["real_bytes"] == 8 else np.float32)

P = ctypes.c_void_p
RP = ctypes.POINTER(REAL)
IP = ctypes.POINTER(INT)
I = ctypes.c_int
S = ctypes.c_char_p
Z = ctypes.c_size_t
U64 = ctypes.c_uint64

# dsim/base.h
err_name_c = _fn("ds_err_name", S, I)
strerror_c = _fn("ds_strerror", S, I)
version_string_c = _fn("ds_version_string", S)
set_num_threads_c = _fn("ds_set_num_threads", None, I)
get_max_threads = _fn("ds_get_max_threads", I)
cuda_device_count = _fn("ds_cuda_device_count", I)
# dsim/abi.h
abi_lookup_c = _fn("ds_abi_lookup", I, S, ctypes.POINTER(ctypes.c_longlong))
abi_names_c = _fn("ds_abi_names", ctypes.POINTER(S))
# dsim/env.h: classes
plugin_abi = _fn("ds_plugin_abi", I)
env_class_count = _fn("ds_env_class_count", I)
env_class_at = _fn("ds_env_class_at", ctypes.POINTER(EnvClassHead), I)
env_class_find = _fn("ds_env_class_find", ctypes.POINTER(EnvClassHead), S)
env_common_keys = _fn("ds_env_common_keys", ctypes.POINTER(ConfigKey))
# dsim/env.h: one env
env_create_from_text = _fn("ds_env_create_from_text", I, S, S, ctypes.POINTER(P), S, Z)
env_destroy = _fn("ds_env_destroy", None, P)
env_set_device = _fn("ds_env_set_device", I, P, S)
env_last_error = _fn("ds_env_last_error", S, P)
env_name = _fn("ds_env_name", S, P)
env_config_text = _fn("ds_env_config_text", S, P)
env_def = _fn("ds_env_def", P, P)
env_def_to_json = _fn("ds_env_def_to_json", I, P, S, Z)
env_obs_size = _fn("ds_env_obs_size", I, P)
env_action_size = _fn("ds_env_action_size", I, P)
env_action_kind = _fn("ds_env_action_kind", I, P)
env_action_scale = _fn("ds_env_action_scale", ctypes.c_double, P)
env_image_size_c = _fn("ds_env_image_size", None, P, IP, IP)
env_num_steps = _fn("ds_env_num_steps", I, P)
env_steps_taken = _fn("ds_env_steps_taken", I, P)
env_num_particles = _fn("ds_env_num_particles", I, P)
env_state_size = _fn("ds_env_state_size", I, P)
env_reset = _fn("ds_env_reset", I, P, U64, P, P)
env_step = _fn("ds_env_step", I, P, P, P, P, RP, IP)
env_loss = _fn("ds_env_loss", I, P, RP)
env_backward_loss = _fn("ds_env_backward_loss", I, P, RP, P)
env_backward_adjoints = _fn("ds_env_backward_adjoints", I, P, P, P, P, P)
env_backward_loss_from = _fn("ds_env_backward_loss_from", I, P, I, RP, P)
env_backward_adjoints_window = _fn("ds_env_backward_adjoints_window", I, P, I, I, P, P, P, P, P, P)
env_set_external_force = _fn("ds_env_set_external_force", I, P, P)
env_external_force_grad_c = _fn("ds_env_external_force_grad", I, P, ctypes.POINTER(RP), IP)
env_param_c = _fn("ds_env_param", I, P, S, ctypes.POINTER(RP), IP)
env_set_param = _fn("ds_env_set_param", I, P, S, P, I)
env_param_grad_c = _fn("ds_env_param_grad", I, P, S, ctypes.POINTER(RP), IP)
env_get_state = _fn("ds_env_get_state", I, P, P, I)
env_set_state = _fn("ds_env_set_state", I, P, P, I)
env_render = _fn("ds_env_render", I, P, P)
env_target = _fn("ds_env_target", I, P, P)
env_goal_image = _fn("ds_env_goal_image", ctypes.POINTER(REAL), P)  # NULL before the first reset
env_metric = _fn("ds_env_metric", I, P, RP)
env_metric_goal = _fn("ds_env_metric_goal", ctypes.c_double, P)
# dsim/batch.h
batch_create_from_text = _fn("ds_batch_create_from_text", I, S, S, I, ctypes.POINTER(P), S, Z)
batch_create_from_text_on = _fn("ds_batch_create_from_text_on", I, S, S, I, S, I, ctypes.POINTER(P), S, Z)
batch_destroy = _fn("ds_batch_destroy", None, P)
batch_size = _fn("ds_batch_size", I, P)
batch_env = _fn("ds_batch_env", P, P, I)
batch_last_error = _fn("ds_batch_last_error", S, P)
batch_reset = _fn("ds_batch_reset", I, P, P, P, P, P, P)
batch_step = _fn("ds_batch_step", I, P, P, P, P, P, P, P, I)
batch_metric = _fn("ds_batch_metric", I, P, P)
batch_backward_loss = _fn("ds_batch_backward_loss", I, P, P, P, P)
batch_backward_adjoints = _fn("ds_batch_backward_adjoints", I, P, P, P, P, P, P)
batch_backward_window = _fn("ds_batch_backward_window", I, P, I, I, P, P, P, P, P, P, P)
# dsim/run.h
run_default_options = _fn("ds_default_run_options", RunOptions)
run_create_from_text = _fn("ds_run_create_from_text", I, S, S, ctypes.POINTER(S), I, ctypes.POINTER(RunOptions),
                           ctypes.POINTER(P), S, Z)
run_destroy = _fn("ds_run_destroy", None, P)
run_config_dir_c = _fn("ds_run_config_dir", I, I, S, Z)
run_find_config_c = _fn("ds_run_find_config", I, S, S, Z, S, Z)
run_done = _fn("ds_run_done", I, P)
run_step_c = _fn("ds_run_step", I, P, P)
run_finish = _fn("ds_run_finish", I, P)
run_execute = _fn("ds_run_execute", I, P)
run_request_stop = _fn("ds_run_request_stop", None, P)
run_result_c = _fn("ds_run_result", I, P, ctypes.POINTER(RunResult))
run_env = _fn("ds_run_env", P, P)
run_log_path = _fn("ds_run_log_path", S, P)
run_method_name = _fn("ds_run_method_name", S, P)
run_last_error = _fn("ds_run_last_error", S, P)
# dsim/runlog.h
_DP = ctypes.POINTER(ctypes.c_double)
runlog_read_iterations_c = _fn("ds_runlog_read_iterations", I, S, IP, ctypes.POINTER(_DP), ctypes.POINTER(_DP),
                               ctypes.POINTER(_DP), ctypes.POINTER(_DP), S, Z)
runlog_free = _fn("ds_runlog_free", None, P)

# dsim/sysid.h
_FP = ctypes.POINTER(SysidFootage)
sysid_create_from_text = _fn("ds_sysid_create_from_text", I, S, S, I, _FP, ctypes.POINTER(P), S, Z)
sysid_destroy = _fn("ds_sysid_destroy", None, P)
sysid_last_error = _fn("ds_sysid_last_error", S, P)
sysid_iterate = _fn("ds_sysid_iterate", I, P, ctypes.POINTER(SysidIter))
sysid_stop_reason = _fn("ds_sysid_stop_reason", S, P)
sysid_num_values = _fn("ds_sysid_num_values", I, P)
sysid_value_param = _fn("ds_sysid_value_param", I, P, I)
sysid_value_fixed = _fn("ds_sysid_value_fixed", I, P, I)
sysid_values = _fn("ds_sysid_values", _DP, P)
sysid_initial_values = _fn("ds_sysid_initial_values", _DP, P)
sysid_best_values = _fn("ds_sysid_best_values", _DP, P, _DP)
sysid_truth = _fn("ds_sysid_truth", _DP, P)
sysid_errors = _fn("ds_sysid_errors", I, P, P, P)
sysid_eval = _fn("ds_sysid_eval", I, P, P, _DP, P)
sysid_rendered = _fn("ds_sysid_rendered", RP, P)
sysid_video = _fn("ds_sysid_video", ctypes.POINTER(SysidVideo), P)
sysid_env = _fn("ds_sysid_env", P, P)
sysid_nparams = _fn("ds_sysid_nparams", I, P)
sysid_param_name = _fn("ds_sysid_param_name", S, P, I)
sysid_param_width = _fn("ds_sysid_param_width", I, P, I)
default_landscape_def = _fn("ds_default_landscape_def", LandscapeDef)
landscape_create_from_text = _fn("ds_landscape_create_from_text", I, S, S, ctypes.POINTER(LandscapeDef), _FP,
                                 ctypes.POINTER(P), S, Z)
landscape_destroy = _fn("ds_landscape_destroy", None, P)
landscape_evaluate = _fn("ds_landscape_evaluate", I, P)
landscape_dims = _fn("ds_landscape_dims", I, P)
landscape_num_points = _fn("ds_landscape_num_points", I, P)
landscape_num_failed = _fn("ds_landscape_num_failed", I, P)
landscape_results = _fn("ds_landscape_results", _DP, P)
landscape_lowest = _fn("ds_landscape_lowest", I, P)
landscape_param_name = _fn("ds_landscape_param_name", S, P, I)
landscape_truth = _fn("ds_landscape_truth", ctypes.c_double, P, I)
landscape_last_error = _fn("ds_landscape_last_error", S, P)
# dsim/runlog.h: writing (a sysid's log from Python)
default_runlog_def = _fn("ds_default_runlog_def", RunLogDef)
runlog_create = _fn("ds_runlog_create", I, S, ctypes.POINTER(RunLogDef), ctypes.POINTER(P), S, Z)
runlog_append_iteration = _fn("ds_runlog_append_iteration", I, P, ctypes.POINTER(RunIteration))
runlog_close = _fn("ds_runlog_close", I, P, S)
runlog_last_error = _fn("ds_runlog_last_error", S, P)
# dsim/image.h
png_write = _fn("ds_png_write", I, S, P, I, I, S, Z)


# -- errors ------------------------------------------------------------------------------
def err_name(code: int) -> str:
    """"DS_ERR_DIVERGED" etc. (ds_err_name)."""
    return err_name_c(code).decode()


def strerror(code: int) -> str:
    return strerror_c(code).decode()


class DsimError(RuntimeError):
    """An error reported by libdsim (or caught before the call). ``code`` is the
    DS_ERR_* code (0 when the check was made in Python), ``name`` its name,
    ``env`` the env's name, ``c_message`` the library's message."""

    def __init__(self, env: str, what: str, code: int = 0, c_message: str = ""):
        self.env, self.code, self.c_message = env, code, c_message
        self.name = err_name(code) if code else ""
        msg = f"{env}: {what}"
        if code:
            msg += f" [{self.name}]"
        if c_message and c_message not in what:
            msg += f": {c_message}"
        super().__init__(msg)


def _text(b) -> str:
    return (b or b"").decode(errors="replace")


def env_error(p) -> str:
    """Env p's last error message (ds_env_last_error; "" when none)."""
    return _text(env_last_error(p))


def batch_error(p) -> str:
    """Batch p's last error message (ds_batch_last_error; "" when none)."""
    return _text(batch_last_error(p))


def raise_env(p, label: str, what: str, rc: int):
    """Raise the DsimError of code rc from env p (its message attached)."""
    raise DsimError(label, what, rc, env_error(p))


def raise_batch(p, label: str, what: str, rc: int):
    """Raise the DsimError of code rc from batch p (its message attached)."""
    raise DsimError(label, what, rc, batch_error(p))


# -- wrappers ----------------------------------------------------------------------------
_ERRLEN = 1024


def ptr(a: np.ndarray):
    """The data pointer of an array (no copy)."""
    return a.ctypes.data


def version() -> str:
    return version_string_c().decode()


def set_num_threads(n: int):
    set_num_threads_c(int(n))


def class_names() -> list[str]:
    """Names of every registered env class, in registry order."""
    return [env_class_at(i).contents.name.decode() for i in range(env_class_count())]


def _key_paths(p) -> list[str]:
    out = []
    i = 0
    while p and p[i].path:
        out.append(p[i].path.decode())
        i += 1
    return out


def class_key_paths(name: str):
    """The dotted config key paths of class `name`'s env section (the common
    keys, then the class's), or None for an unknown class."""
    cls = env_class_find(name.encode())
    if not cls:
        return None
    return _key_paths(env_common_keys()) + _key_paths(cls.contents.keys)


def env_create(label: str, text: str):
    """ds_env_create_from_text: the new env's handle, or DsimError."""
    p = P()
    err = ctypes.create_string_buffer(_ERRLEN)
    rc = env_create_from_text(label.encode(), text.encode(), ctypes.byref(p), err, _ERRLEN)
    if rc:
        raise DsimError(label, "cannot create the env", rc, err.value.decode(errors="replace"))
    return p


def batch_create(label: str, text: str, num_envs: int, device: str, flags: int, what: str):
    """ds_batch_create_from_text_on: the new batch's handle, or DsimError
    ("cannot create the <what>")."""
    p = P()
    err = ctypes.create_string_buffer(_ERRLEN)
    rc = batch_create_from_text_on(label.encode(), text.encode(), int(num_envs), str(device).encode(), int(flags),
                                   ctypes.byref(p), err, _ERRLEN)
    if rc:
        raise DsimError(label, f"cannot create the {what}", rc, err.value.decode(errors="replace"))
    return p


def run_create(label: str, text: str, overrides: list[str], log: bool, overwrite: bool):
    """ds_run_create_from_text: the new run's handle, or DsimError. overrides
    are "SECTION.KEY=VALUE" strings; log: open the run log at create."""
    opt = run_default_options()
    opt.log = 1 if log else 0
    opt.overwrite = 1 if overwrite else 0
    name = label.encode()
    opt.name = name
    arr = (S * max(1, len(overrides)))(*[o.encode() for o in overrides])
    p = P()
    err = ctypes.create_string_buffer(_ERRLEN)
    rc = run_create_from_text(name, text.encode(), arr, len(overrides), ctypes.byref(opt), ctypes.byref(p), err,
                              _ERRLEN)
    if rc:
        raise DsimError(label, "cannot create the run", rc, err.value.decode(errors="replace"))
    return p


def run_result(p) -> dict:
    """ds_run_result as a dict (status as text)."""
    r = RunResult()
    run_result_c(p, ctypes.byref(r))
    out = {name: getattr(r, name) for name, _ in RunResult._fields_}
    out["status"] = r.status.decode(errors="replace")
    return out


def runlog_iterations(path: str) -> dict:
    """A run log's per-iteration series (loss, metric, wall_time, grad_norm)
    as lists of floats (ds_runlog_read_iterations)."""
    n = INT()
    arrs = [_DP() for _ in range(4)]
    err = ctypes.create_string_buffer(_ERRLEN)
    rc = runlog_read_iterations_c(os.fspath(path).encode(), ctypes.byref(n), *[ctypes.byref(a) for a in arrs], err,
                                  _ERRLEN)
    if rc:
        raise DsimError(os.fspath(path), "cannot read the run log", rc, err.value.decode(errors="replace"))
    out = {}
    for name, a in zip(("loss", "metric", "wall_time", "grad_norm"), arrs):
        out[name] = [a[i] for i in range(n.value)] if a else []
        runlog_free(ctypes.cast(a, P))
    return out


def run_error(p) -> str:
    return _text(run_last_error(p))


def env_image_size(p) -> tuple[int, int]:
    """(width, height) of env p's renders."""
    w, h = INT(), INT()
    env_image_size_c(p, ctypes.byref(w), ctypes.byref(h))
    return w.value, h.value


def env_param(p, name: str, grad: bool = False):
    """(code, a copy of env p's named parameter, or of its gradient with
    grad=True); the array is None when the code is not 0."""
    vals, n = RP(), INT()
    rc = (env_param_grad_c if grad else env_param_c)(p, name.encode(), ctypes.byref(vals), ctypes.byref(n))
    if rc:
        return rc, None
    return 0, (np.ctypeslib.as_array(vals, (n.value,)).copy() if n.value else np.empty(0, real_dtype))


def resolved_config(env_handle) -> str:
    """The env's complete config (every key) as JSON text (ds_env_def_to_json)."""
    d = env_def(env_handle)
    need = env_def_to_json(d, None, 0)
    buf = ctypes.create_string_buffer(need + 1)
    env_def_to_json(d, buf, need + 1)
    return buf.value.decode()


def load_plugin_so(path: str):
    """Load a plugin shared object and run its dsim_plugin_init (after
    checking its dsim_plugin_abi against the library's); returns the loaded
    object, which must be kept alive. DsimError ("plugin") on any failure."""
    try:
        so = ctypes.CDLL(os.path.abspath(path), mode=ctypes.RTLD_GLOBAL)
    except OSError as e:
        raise DsimError("plugin", f"cannot load {path}: {e}") from None
    try:
        abi = ctypes.c_int.in_dll(so, "dsim_plugin_abi").value
        init = so.dsim_plugin_init
    except (ValueError, AttributeError):
        raise DsimError("plugin", f"{path} is not a dsim plugin (no dsim_plugin_init / dsim_plugin_abi)") from None
    if abi != plugin_abi():
        raise DsimError("plugin", f"{path} was built against other dsim headers (ABI {abi}, library "
                        f"{plugin_abi()})")
    init.restype = ctypes.c_int
    init.argtypes = []
    rc = init()
    if rc:
        raise DsimError("plugin", f"{path}: dsim_plugin_init failed", rc, strerror(rc))
    return so


def find_config(name: str):
    """ds_run_find_config: the path of the bundled config NAME.json (the
    library's search order: $DSIM_CONFIG_DIR, next to the library, the
    installed datadir), or None when there is none."""
    buf = ctypes.create_string_buffer(4096)
    err = ctypes.create_string_buffer(_ERRLEN)
    rc = run_find_config_c(name.encode(), buf, 4096, err, _ERRLEN)
    return buf.value.decode() if rc == 0 else None


def config_dirs() -> list[str]:
    """The folders bundled configs are read from, in order (ds_run_config_dir)."""
    out, buf = [], ctypes.create_string_buffer(4096)
    i = 0
    while run_config_dir_c(i, buf, 4096) == 0:
        if buf.value:
            out.append(buf.value.decode())
        i += 1
    return out


def abi_names() -> list[str]:
    """Every name of the library's ABI table (ds_abi_names)."""
    arr = abi_names_c()
    out = []
    while arr[len(out)]:
        out.append(arr[len(out)].decode())
    return out


def abi_lookup(name: str):
    """The value of the ABI table's entry `name`, or None when it has none."""
    v = ctypes.c_longlong()
    return v.value if abi_lookup_c(name.encode(), ctypes.byref(v)) == 0 else None


# -- system identification (dsim/sysid.h) ---------------------------------------------------
def sysid_footage(camera_file=None, position=None, look_at=None, fov=0.0, intrinsics=None, times=None,
                  frames_dir=None, rgba=None):
    """(a dsSysidFootage, the objects it points into: keep them until the
    create call returns). rgba: a C-contiguous (T, H, W, 4) array of
    real_dtype; times: float64 values; intrinsics: (fx, fy, cx, cy), pixels."""
    f = SysidFootage()
    keep = []
    if camera_file is not None:
        keep.append(os.fsencode(camera_file))
        f.camera_file = keep[-1]
    else:
        f.position[:] = [float(v) for v in position]
        f.look_at[:] = [float(v) for v in look_at]
        f.fov = float(fov)
        if intrinsics is not None:
            f.fx, f.fy, f.cx, f.cy = (float(v) for v in intrinsics)
    n = 0
    if frames_dir is not None:
        keep.append(os.fsencode(frames_dir))
        f.frames_dir = keep[-1]
    else:
        keep.append(rgba)
        f.rgba = rgba.ctypes.data
        n, f.height, f.width = rgba.shape[0], rgba.shape[1], rgba.shape[2]
    if times is not None:
        keep.append(times)
        f.times = times.ctypes.data_as(_DP)
        n = times.size
    f.nframes = n
    return f, keep


def sysid_create(label: str, text: str, obj: int, footage=None):
    """ds_sysid_create_from_text: the new identification's handle, or DsimError."""
    p = P()
    err = ctypes.create_string_buffer(_ERRLEN)
    rc = sysid_create_from_text(label.encode(), text.encode(), int(obj),
                                ctypes.byref(footage) if footage is not None else None, ctypes.byref(p), err, _ERRLEN)
    if rc:
        raise DsimError(label, "cannot set up the identification", rc, err.value.decode(errors="replace"))
    return p


def sysid_error(p) -> str:
    return _text(sysid_last_error(p))


def _dvec(ptr, n: int):
    return np.ctypeslib.as_array(ptr, (n,)).copy() if ptr else None


def sysid_step(p, n: int):
    """One ds_sysid_iterate: (code, loss, grad_norm, a copy of the n estimates)."""
    it = SysidIter()
    rc = sysid_iterate(p, ctypes.byref(it))
    if rc:
        return rc, None, None, None
    return 0, it.loss, it.grad_norm, _dvec(it.values, n)


def sysid_arrays(p, n: int) -> dict:
    """Copies of the identification's value vectors: values (the iterate),
    initial, best (with best_loss), truth (None when unknown)."""
    bl = ctypes.c_double()
    best = _dvec(sysid_best_values(p, ctypes.byref(bl)), n)
    return {"values": _dvec(sysid_values(p), n), "initial": _dvec(sysid_initial_values(p), n), "best": best,
            "best_loss": bl.value, "truth": _dvec(sysid_truth(p), n)}


def sysid_are(p, values: np.ndarray, nparams: int):
    """ds_sysid_errors at values (None without a truth)."""
    if not sysid_truth(p):
        return None
    are = np.zeros(nparams)
    v = np.ascontiguousarray(values, dtype=np.float64)
    sysid_errors(p, ptr(v), ptr(are))
    return are


def sysid_evaluate(p, values: np.ndarray):
    """ds_sysid_eval (loss only): (code, loss)."""
    v = np.ascontiguousarray(values, dtype=np.float64)
    loss = ctypes.c_double()
    rc = sysid_eval(p, ptr(v), ctypes.byref(loss), None)
    return rc, loss.value


def sysid_frames(p):
    """(the video's frames (T, H, W, 4), their substeps, the frames of the
    last evaluation) as copies."""
    v = sysid_video(p).contents
    shape = (v.nframes, v.height, v.width, 4)
    video = np.ctypeslib.as_array(ctypes.cast(v.rgba, RP), shape).copy()
    sub = np.array([v.substep[i] for i in range(v.nframes)], dtype=np.int64)
    r = sysid_rendered(p)
    return video, sub, (np.ctypeslib.as_array(r, shape).copy() if r else None)


def landscape_run(label: str, text: str, axes, geometric: bool, obj: int, threads: int, group: bool, footage=None):
    """Create, evaluate and destroy a landscape (ds_landscape_*_from_text):
    {"dims", "rows" (points x 5), "names", "truth", "lowest", "failed"}.
    The OpenMP thread count is restored after (the thread path sets 1)."""
    d = default_landscape_def()
    for a, (lo, hi, n) in enumerate(axes):
        d.axis[a] = LandscapeAxis(float(lo), float(hi), int(n))
    d.geometric, d.object, d.threads, d.group = int(bool(geometric)), int(obj), int(threads), int(bool(group))
    p = P()
    err = ctypes.create_string_buffer(_ERRLEN)
    rc = landscape_create_from_text(label.encode(), text.encode(), ctypes.byref(d),
                                    ctypes.byref(footage) if footage is not None else None, ctypes.byref(p), err,
                                    _ERRLEN)
    if rc:
        raise DsimError(label, "cannot set up the landscape", rc, err.value.decode(errors="replace"))
    before = get_max_threads()
    try:
        rc = landscape_evaluate(p)
        if rc:
            raise DsimError(label, "evaluating the landscape failed", rc, _text(landscape_last_error(p)))
        dims, npt = landscape_dims(p), landscape_num_points(p)
        return {"dims": dims, "rows": np.ctypeslib.as_array(landscape_results(p), (npt, 5)).copy(),
                "names": [landscape_param_name(p, a).decode() for a in range(dims)],
                "truth": [landscape_truth(p, a) for a in range(dims)], "lowest": landscape_lowest(p),
                "failed": landscape_num_failed(p)}
    finally:
        landscape_destroy(p)
        set_num_threads_c(before)


def runlog_open(path: str, config_text: str, env: str, method: str, seed: int, nparams: int, overwrite: bool):
    """ds_runlog_create: (the log's handle, the strings it points to: keep
    them while it is open), or DsimError."""
    d = default_runlog_def()
    keep = [config_text.encode(), env.encode(), method.encode()]
    d.config_text, d.env, d.method = keep
    d.seed, d.threads, d.nparams, d.overwrite = int(seed), 1, int(nparams), 1 if overwrite else 0
    p = P()
    err = ctypes.create_string_buffer(_ERRLEN)
    rc = runlog_create(os.fsencode(path), ctypes.byref(d), ctypes.byref(p), err, _ERRLEN)
    if rc:
        raise DsimError(path, "cannot create the run log", rc, err.value.decode(errors="replace"))
    return p, keep


def runlog_append(p, path: str, loss: float, metric: float, wall: float, grad_norm: float, params: np.ndarray):
    v = np.ascontiguousarray(params, dtype=np.float64)
    it = RunIteration(loss, metric, wall, grad_norm, v.ctypes.data_as(_DP))
    rc = runlog_append_iteration(p, ctypes.byref(it))
    if rc:
        raise DsimError(path, "cannot write the run log", rc, _text(runlog_last_error(p)))


def png_write_rgba(path: str, rgba: np.ndarray):
    """ds_png_write of one (H, W, 4) uint8 frame, or DsimError."""
    a = np.ascontiguousarray(rgba, dtype=np.uint8)
    err = ctypes.create_string_buffer(_ERRLEN)
    rc = png_write(os.fsencode(path), ptr(a), a.shape[1], a.shape[0], err, _ERRLEN)
    if rc:
        raise DsimError(path, "cannot write the frame", rc, err.value.decode(errors="replace"))
