"""System identification from video (dsim/sysid.h), from Python: what
`dsim sysid` and `dsim landscape` do for one object, with the footage as a
numpy array or a folder and the camera as a dict or a file.

    res = dsim.sysid("sysid-beam-mu")                    # the config's synthetic video
    res = dsim.sysid("sysid-beam-mu", frames=video, times=times,
                     camera={"position": [0, 0, -2], "fov": 30},
                     params=[{"name": "tet.k_mu", "lower": 10, "upper": 1e5, "init": 800}],
                     iterations=20, optimizer="lbfgs", lr=0.5, log="beam.h5")
    res.estimates["tet.k_mu"], res.loss, res.stop_reason, res.log
    grid = dsim.landscape("sysid-beam", (300, 3000, 21), (300, 3000, 21), geometric=True)
    grid.loss                                            # (21, 21) numpy array

The config is a sysid config (sections env, sysid, run): a bundled name
(``sysid-beam-mu``, found as `dsim sysid NAME` finds it), a path, or a dict;
the name of an env class stands for ``{"env": {"name": NAME}}``. Keyword
arguments replace its keys; ``overrides`` sets any ``SECTION.KEY`` (dotted
paths into the config). The library parses and checks the result
(ds_sysid_create_from_text), so messages name the key as `dsim sysid`'s do.

Footage (``frames``): an array (T, H, W, 3 or 4), uint8 or float in [0, 1]
(row 0 at the top), or a folder of PNG files (sorted by name). uint8 pixels
become v / 255 exactly as the PNG reader makes them, so an array and the
folder of the same 8-bit frames identify the same values, bit for bit.
``times`` (T values, s): the frames' times; without them, the camera file's
or a folder's own (``frames.json``, as `dsim export --frames` and
:func:`save_frames` write it), and for an array, the env's schedule (frame k
at substep (k + 1) C, C = env.physics.render_interval, as a synthetic
video). A frame at time 0 is the initial state and is not compared.
``camera``: a dict ``{"position": [x, y, z], "look_at": [x, y, z], "fov":
degrees, "times": [...]}`` (look_at, default the origin, and times optional;
the intrinsics ``"fx", "fy", "cx", "cy"`` in pixels, u = fx X/Z + cx from the
image's left edge, v = cy - fy Y/Z from its top, instead of fov) or the path
of a camera file (dsim/video.h). The view is y-up.
"""
from __future__ import annotations

import copy
import json
import math
import os
import time

import numpy as np

from . import _lib
from ._lib import DsimError

__all__ = ["sysid", "landscape", "SysidResult", "LandscapeResult", "save_frames", "render_footage"]

_PARAM_KEYS = ("name", "per_element", "lower", "upper", "init", "init_range", "init_each", "true", "true_range")
_CAMERA_KEYS = ("position", "look_at", "fov", "fx", "fy", "cx", "cy", "times")
_INTRINSICS = ("fx", "fy", "cx", "cy")
_OPTIMIZERS = ("adam", "sgd", "lbfgs")


# -- the config --------------------------------------------------------------------------
def _load_config(config) -> tuple[str, dict]:
    """(label, a copy of the config as a dict) of a dict, a path, a bundled
    config's name or an env class name."""
    if isinstance(config, dict):
        return "config", copy.deepcopy(config)
    path = os.fspath(config)
    if not os.path.isfile(path):
        found = _lib.find_config(path) if path and "/" not in path else None
        if found:
            path = found
        elif path in _lib.class_names():
            return path, {"env": {"name": path}}
        else:
            raise DsimError(path, "neither a config file, a bundled config nor an env class", _lib.DS_ERR_NOTFOUND)
    try:
        with open(path) as f:
            return path, json.load(f)
    except (OSError, ValueError) as e:
        raise DsimError(path, f"cannot read the config: {e}") from None


def _set_path(cfg: dict, label: str, key: str, value):
    """cfg[a][b]... = value for key "a.b...": the sections env, sysid, run."""
    parts = key.split(".")
    if len(parts) < 2 or parts[0] not in ("env", "sysid", "run"):
        raise DsimError(label, f"override {key!r}: expected SECTION.KEY with SECTION env, sysid or run")
    d = cfg
    for p in parts[:-1]:
        if not isinstance(d.get(p, {}), dict):
            raise DsimError(label, f"override {key!r}: {p} is not a section")
        d = d.setdefault(p, {})
    d[parts[-1]] = value


def _param_specs(label: str, params) -> list[dict]:
    """Parameter specs (a name, a dict with "name", a list of those, or a
    dict name -> spec) as the sysid section's param1.. objects."""
    if isinstance(params, (str, dict)) and not (isinstance(params, dict) and "name" not in params):
        params = [params]
    elif isinstance(params, dict):
        params = [dict(spec or {}, name=name) for name, spec in params.items()]
    out = []
    for i, p in enumerate(params):
        spec = {"name": p} if isinstance(p, str) else dict(p)
        bad = [k for k in spec if k not in _PARAM_KEYS]
        if bad or not isinstance(spec.get("name"), str):
            raise DsimError(label, f"params[{i}]: " + (f"unknown key {bad[0]!r}" if bad else "no \"name\"") +
                            f" (keys: {', '.join(_PARAM_KEYS)})", _lib.DS_ERR_CONFIG)
        for k in ("init", "true", "init_range", "true_range"):
            if isinstance(spec.get(k), np.ndarray):
                spec[k] = spec[k].tolist()
        out.append(spec)
    if not 1 <= len(out) <= _lib.DS_SYSID_MAX_PARAMS:
        raise DsimError(label, f"params: expected 1 to {_lib.DS_SYSID_MAX_PARAMS} parameters, got {len(out)}",
                        _lib.DS_ERR_CONFIG)
    return out


def _build(config, params, overrides, settings: dict) -> tuple[str, dict]:
    label, cfg = _load_config(config)
    for k, v in (overrides or {}).items():
        _set_path(cfg, label, k, v)
    sec = cfg.setdefault("sysid", {})
    if params is not None:
        for k in [k for k in sec if k.startswith("param")]:
            del sec[k]
        for i, spec in enumerate(_param_specs(label, params)):
            sec[f"param{i + 1}"] = spec
    for k, v in settings.items():
        if v is not None:
            if k == "run.seed":
                cfg.setdefault("run", {})["seed"] = int(v)
            else:
                sec[k] = v
    if sec.get("optimizer") is not None and sec["optimizer"] not in _OPTIMIZERS:
        raise DsimError(label, f"optimizer: expected one of {', '.join(_OPTIMIZERS)}, got {sec['optimizer']!r}",
                        _lib.DS_ERR_CONFIG)
    return label, cfg


# -- footage -----------------------------------------------------------------------------
def _frames_array(label: str, frames) -> np.ndarray:
    """(T, H, W, 4) dsReal pixels in [0, 1] of an array (T, H, W, 3 or 4)."""
    a = np.asarray(frames)
    if a.ndim != 4 or a.shape[3] not in (3, 4) or min(a.shape[:3]) < 1:
        raise DsimError(label, f"frames: expected an array (T, H, W, 3 or 4), got shape {a.shape}",
                        _lib.DS_ERR_CONFIG)
    if a.dtype == np.uint8:
        x = (a.astype(np.float64) / 255.0).astype(_lib.real_dtype)  # the PNG reader's (dsReal)(v / 255.0)
    elif np.issubdtype(a.dtype, np.floating):
        if not np.all(np.isfinite(a)) or a.min() < 0 or a.max() > 1:
            raise DsimError(label, "frames: float pixels must be finite and in [0, 1]", _lib.DS_ERR_CONFIG)
        x = a.astype(_lib.real_dtype)
    else:
        raise DsimError(label, f"frames: expected uint8 or float pixels, got {a.dtype}", _lib.DS_ERR_CONFIG)
    if x.shape[3] == 3:
        x = np.concatenate([x, np.ones(x.shape[:3] + (1,), _lib.real_dtype)], axis=3)
    return np.ascontiguousarray(x)


def _footage(label: str, frames, times, camera):
    """(dsSysidFootage, the buffers it points into) for frames / times /
    camera, or (None, None) without frames."""
    if frames is None:
        if camera is not None or times is not None:
            raise DsimError(label, "camera and times describe footage: give frames too", _lib.DS_ERR_CONFIG)
        return None, None
    if camera is None:
        raise DsimError(label, "camera: footage needs its camera (a dict with position and fov, or a camera file)",
                        _lib.DS_ERR_CONFIG)
    cam = {}
    if isinstance(camera, dict):
        bad = [k for k in camera if k not in _CAMERA_KEYS]
        if bad:
            raise DsimError(label, f"camera: unknown key {bad[0]!r} (keys: {', '.join(_CAMERA_KEYS)})",
                            _lib.DS_ERR_CONFIG)
        has = [k for k in _INTRINSICS if k in camera]
        if has and len(has) != 4:
            raise DsimError(label, "camera: intrinsics: give all of fx, fy, cx, cy (pixels) or none",
                            _lib.DS_ERR_CONFIG)
        for k in ("position",) + (() if has else ("fov",)):
            if k not in camera:
                raise DsimError(label, f"camera: no {k!r} (expected {{\"position\": [x, y, z], \"fov\": degrees}} "
                                "or fx, fy, cx, cy in pixels instead of fov)", _lib.DS_ERR_CONFIG)
        for k in ("position", "look_at"):
            v = np.asarray(camera.get(k, [0.0, 0.0, 0.0]), dtype=np.float64)
            if v.shape != (3,):
                raise DsimError(label, f"camera: {k}: expected 3 numbers, got {camera[k]!r}", _lib.DS_ERR_CONFIG)
            cam[k] = v.tolist()
        cam["fov"] = float(camera.get("fov", 0.0))
        if has:
            cam["intrinsics"] = [float(camera[k]) for k in _INTRINSICS]
        if times is None and camera.get("times") is not None:
            times = camera["times"]
    else:
        cam["camera_file"] = os.fspath(camera)
    n = None
    if isinstance(frames, (str, os.PathLike)):
        cam["frames_dir"] = os.fspath(frames)
    else:
        cam["rgba"] = _frames_array(label, frames)
        n = cam["rgba"].shape[0]
    if times is not None:
        t = np.ascontiguousarray(np.asarray(times, dtype=np.float64).reshape(-1))
        if n is not None and t.size != n:
            raise DsimError(label, f"times: {t.size} frame times for {n} frames", _lib.DS_ERR_CONFIG)
        cam["times"] = t
    return _lib.sysid_footage(**cam)


def save_frames(folder, frames, times=None):
    """Write frames (an array as for :func:`sysid`; floats are rounded to 8
    bits as the PNG writer does) as folder/frame_0000.png ... and, with
    times, folder/frames.json {"times": [...]}: footage that sysid(frames=
    folder) reads. Returns the folder."""
    folder = os.fspath(folder)
    a = np.asarray(frames)
    if a.dtype == np.uint8 and a.ndim == 4 and a.shape[3] == 4:
        u8 = np.ascontiguousarray(a)
    else:
        x = _frames_array(folder, frames)
        u8 = np.ascontiguousarray((x.astype(np.float64) * 255.0 + 0.5).astype(np.uint8))  # ds_image_to_u8's rounding
    os.makedirs(folder, exist_ok=True)
    for k in range(u8.shape[0]):
        _lib.png_write_rgba(os.path.join(folder, f"frame_{k:04d}.png"), u8[k])
    if times is not None:
        t = [float(v) for v in np.asarray(times, dtype=np.float64).reshape(-1)]
        if len(t) != u8.shape[0]:
            raise DsimError(folder, f"times: {len(t)} frame times for {u8.shape[0]} frames", _lib.DS_ERR_CONFIG)
        with open(os.path.join(folder, "frames.json"), "w") as f:
            json.dump({"times": t}, f)
    return folder


# -- one identification -------------------------------------------------------------------
class SysidResult:
    """The outcome of :func:`sysid`.

    estimates: name -> the best (lowest-loss) estimate: a float for a shared
    scalar, an array for a vector (width values) or a per-element parameter
    (elements x width; held values, e.g. a fixed particle's 0 mass, included);
    last, initial: the same for the last iterate and the initial guess;
    truth: the same for the true values of a synthetic video (None for
    footage); errors: name -> absolute relative error of the best estimate
    (None for footage); loss, grad_norm: per iteration (numpy, iteration 0 =
    the initial guess); best_loss, best_iteration; stop_reason: L-BFGS's reason
    to stop ("converged: ...") or "iterations" when every iteration ran;
    log: the run log's path (None without one); config: the config used (dict);
    video: the target frames (T, H, W, 4) and substeps: their substeps;
    rendered: the frames of the best estimate."""

    def __repr__(self):
        return (f"SysidResult(estimates={self.estimates}, errors={self.errors}, iterations={len(self.loss)}, "
                f"best_loss={self.best_loss:.6g}, stop_reason={self.stop_reason!r}, log={self.log!r})")


class _Sysid:
    """A dsSysid handle with the per-parameter split of its values."""

    def __init__(self, label: str, cfg: dict, footage, object_: int):
        self.label = label
        self.p = _lib.sysid_create(label, json.dumps(cfg), object_, footage)
        self.n = _lib.sysid_num_values(self.p)
        self.np = _lib.sysid_nparams(self.p)
        self.names = [_lib.sysid_param_name(self.p, i).decode() for i in range(self.np)]
        self.widths = [_lib.sysid_param_width(self.p, i) for i in range(self.np)]
        self.owner = np.array([_lib.sysid_value_param(self.p, i) for i in range(self.n)])

    def close(self):
        if self.p:
            _lib.sysid_destroy(self.p)
            self.p = None

    def by_name(self, values) -> dict | None:
        if values is None:
            return None
        out = {}
        for i, name in enumerate(self.names):
            v = values[self.owner == i]
            w = self.widths[i]
            out[name] = float(v[0]) if v.size == 1 else (v.copy() if v.size == w else v.reshape(-1, w).copy())
        return out

    def fail(self, what: str, rc: int):
        raise DsimError(self.label, what, rc, _lib.sysid_error(self.p))

    def env_config(self) -> dict:
        return json.loads(_lib.resolved_config(_lib.sysid_env(self.p)))


class _Log:
    """The identification's run log (dsim/runlog.h): the config, per iteration
    loss, metric, wall time, gradient norm and the estimates."""

    def __init__(self, path, cfg: dict, env: str, seed: int, nvalues: int, overwrite: bool):
        self.path = os.fspath(path)
        parent = os.path.dirname(self.path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        self.p, self._keep = _lib.runlog_open(self.path, json.dumps(cfg, indent=2), env, "sysid", seed, nvalues,
                                              overwrite)

    def append(self, loss, metric, wall, grad_norm, values):
        _lib.runlog_append(self.p, self.path, loss, metric, wall, grad_norm, values)

    def close(self, status: str):
        if self.p:
            _lib.runlog_close(self.p, status.encode()[:_lib.DS_RUN_STATUS_MAX - 1])
            self.p = None


def sysid(config, frames=None, *, times=None, camera=None, params=None, iterations: int | None = None,
          optimizer: str | None = None, lr: float | None = None, momentum: float | None = None,
          lbfgs_memory: int | None = None, frames_used: str | None = None, action=None, seed: int | None = None,
          object: int = 0, overrides: dict | None = None, log=None, overwrite: bool = False,
          callback=None) -> SysidResult:
    """Identify the parameters of `config` (see the module's doc) from
    `frames` (None: the config's video, synthetic or sysid.frames_dir) seen
    by `camera` at `times`. params: the parameters (a name, a spec dict with
    "name" and any of per_element, lower, upper, init, init_range,
    init_each, true, true_range, a list of those, or a dict name -> spec;
    None: the config's param1..). iterations, optimizer ("adam", "sgd",
    "lbfgs"), lr, momentum, lbfgs_memory, frames_used ("all", "first_last",
    "last": sysid.frames), action: the sysid keys; seed: run.seed; object:
    the object's draws (seed + object). log: write a run log there (HDF5;
    `dsim info` reads it); overwrite: replace one that exists.
    callback(iteration, loss, estimates): called after every iteration;
    return True to stop. Errors: DsimError with the library's message."""
    settings = {"iterations": iterations, "optimizer": optimizer, "lr": lr, "momentum": momentum,
                "lbfgs_memory": lbfgs_memory, "frames": frames_used,
                "action": None if action is None else [float(a) for a in np.asarray(action).reshape(-1)],
                "run.seed": seed}
    label, cfg = _build(config, params, overrides, settings)
    fp, keep = _footage(label, frames, times, camera)
    s = _Sysid(label, cfg, fp, object)
    del keep  # copied by the library
    lg = None
    try:
        n_it = int(cfg.get("sysid", {}).get("iterations", 60))
        if log is not None:
            seed0 = int(cfg.get("run", {}).get("seed", 0))
            lg = _Log(log, cfg, cfg.get("env", {}).get("name", ""), seed0 + int(object), s.n, overwrite)
        losses, gnorms = [], []
        reason = "iterations"
        t0 = time.perf_counter()
        for i in range(n_it):
            rc, loss, gnorm, values = _lib.sysid_step(s.p, s.n)
            if rc:
                s.fail(f"iteration {i} failed", rc)
            losses.append(loss)
            gnorms.append(gnorm)
            if lg:
                are = _lib.sysid_are(s.p, values, s.np)
                lg.append(loss, float(np.mean(are)) if are is not None else loss, time.perf_counter() - t0, gnorm,
                          values)
            why = _lib._text(_lib.sysid_stop_reason(s.p))
            if callback is not None and callback(i, loss, s.by_name(values)):
                reason = "callback"
                break
            if why:
                reason = why
                break
        v = _lib.sysid_arrays(s.p, s.n)
        r = SysidResult()
        r.estimates = s.by_name(v["best"])
        r.last = s.by_name(v["values"])
        r.initial = s.by_name(v["initial"])
        r.truth = s.by_name(v["truth"])
        are = _lib.sysid_are(s.p, v["best"], s.np)
        r.errors = None if are is None else {name: float(are[i]) for i, name in enumerate(s.names)}
        r.values = v["best"]
        r.loss = np.array(losses)
        r.grad_norm = np.array(gnorms)
        r.best_loss = v["best_loss"]
        r.best_iteration = int(np.argmin(r.loss)) if losses else -1
        r.stop_reason = reason
        rc, _ = _lib.sysid_evaluate(s.p, v["best"])
        if rc:
            s.fail("rendering the best estimate failed", rc)
        r.video, r.substeps, r.rendered = _lib.sysid_frames(s.p)
        r.config = cfg
        r.log = lg.path if lg else None
        if lg:
            lg.close("completed" if reason != "callback" else "interrupted")
        return r
    except BaseException as e:
        if lg:
            lg.close(f"failed: {e}")
        raise
    finally:
        s.close()


def render_footage(config, values: dict | None = None, *, overrides: dict | None = None, seed: int | None = None,
            object: int = 0) -> dict:
    """Synthetic footage of a sysid config: the episode simulated with
    `values` (name -> the true value; None: the config's true values or
    draws) and rendered by its env, as `dsim sysid` renders a synthetic
    video. Returns {"frames": (T, H, W, 4) floats in [0, 1], "times": s,
    "camera": {"position", "look_at", "fov" (and fx, fy, cx, cy when the env
    has intrinsics)}, "truth": name -> value}:
    sysid(config, frames=..., times=..., camera=...) identifies from it."""
    label, cfg = _build(config, None, overrides, {"run.seed": seed})
    sec = cfg.setdefault("sysid", {})
    for name, v in (values or {}).items():
        hit = [k for k, spec in sec.items() if k.startswith("param") and isinstance(spec, dict)
               and spec.get("name") == name]
        if not hit:
            raise DsimError(label, f"values: {name!r} is not a parameter of the config's sysid section",
                            _lib.DS_ERR_CONFIG)
        spec = sec[hit[0]]
        spec.pop("true_range", None)
        spec["true"] = v.tolist() if isinstance(v, np.ndarray) else v
    sec["video"] = "synthetic"
    sec["iterations"] = 1
    s = _Sysid(label, cfg, None, object)
    try:
        rgba, sub, _ = _lib.sysid_frames(s.p)
        env = s.env_config()["env"]
        dt = float(env["physics"]["dt"])
        cam = env["camera"]
        d, e, a = float(cam["distance"]), math.radians(float(cam["elevation"])), math.radians(float(cam["azimuth"]))
        at = [float(v) for v in cam.get("look_at", [0.0, 0.0, 0.0])]
        # the env's eye: look_at + (d cos e sin a, d sin e, -d cos e cos a) (docs/scenes.md)
        off = [d * math.cos(e) * math.sin(a), d * math.sin(e), -d * math.cos(e) * math.cos(a)]
        camera = {"position": [at[i] + off[i] for i in range(3)], "look_at": at, "fov": float(cam["fov"])}
        if float(cam.get("fx", 0)) > 0:
            camera.update({k: float(cam[k]) for k in _INTRINSICS})
        return {"frames": rgba, "times": sub * dt, "camera": camera,
                "truth": s.by_name(_lib.sysid_arrays(s.p, s.n)["truth"])}
    finally:
        s.close()


# -- loss landscapes ---------------------------------------------------------------------------
class LandscapeResult:
    """The outcome of :func:`landscape`: names (the axes' parameters), axes
    (the values of each axis), loss (n1,) or (n1, n2) with axis 2 fastest,
    grad (loss.shape + (dims,): d(loss)/d(value) along each axis), truth (the
    axes' true values; NaN for footage), lowest (the index of the lowest
    loss, or None when every point diverged), failed (diverged points: their
    loss and gradient are NaN)."""

    def __repr__(self):
        shape = "x".join(str(len(a)) for a in self.axes)
        return f"LandscapeResult(names={self.names}, grid={shape}, lowest={self.lowest}, failed={self.failed})"


def _axis(label: str, k: int, a) -> tuple:
    try:
        lo, hi, n = a
        return float(lo), float(hi), int(n)
    except (TypeError, ValueError):
        raise DsimError(label, f"axis{k}: expected (lo, hi, n), got {a!r}", _lib.DS_ERR_CONFIG) from None


def landscape(config, axis1, axis2=None, *, geometric: bool = False, frames=None, times=None, camera=None,
              params=None, seed: int | None = None, object: int = 0, threads: int = 0, group: bool = False,
              overrides: dict | None = None) -> LandscapeResult:
    """The loss and its gradient on a grid over the config's first parameter
    (axis1 = (lo, hi, n)) or first two (axis2 too), every other value at its
    truth (footage: its initial guess), as `dsim landscape` computes it
    (ds_landscape_*). geometric: values lo (hi/lo)^(i/(n-1)); threads: points
    in parallel (0: all; the values do not depend on it); group: lockstep
    batches. frames, times, camera, params, seed, object, overrides: as for
    :func:`sysid`."""
    label, cfg = _build(config, params, overrides, {"run.seed": seed})
    axes = [_axis(label, 1, axis1)] + ([_axis(label, 2, axis2)] if axis2 is not None else [])
    fp, keep = _footage(label, frames, times, camera)
    out = _lib.landscape_run(label, json.dumps(cfg), axes, geometric, object, threads, group, fp)
    del keep
    dims, rows = out["dims"], out["rows"]
    shape = tuple(a[2] for a in axes[:dims])
    r = LandscapeResult()
    r.names = out["names"]
    r.axes = [rows[:, 0].reshape(shape)[:, 0].copy()] if dims == 2 else [rows[:, 0].copy()]
    if dims == 2:
        r.axes.append(rows[:, 1].reshape(shape)[0, :].copy())
    r.loss = rows[:, 2].reshape(shape)
    r.grad = rows[:, 3:3 + dims].reshape(shape + (dims,))
    r.truth = out["truth"]
    low = out["lowest"]
    r.lowest = None if low < 0 else (low if dims == 1 else divmod(low, shape[1]))
    r.failed = out["failed"]
    r.config = cfg
    return r
