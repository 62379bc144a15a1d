"""dsim.Run: a training run as `dsim run` does it (dsim/run.h), from Python.

    run = dsim.Run("control-fem", {"run.iterations": 5, "run.seed": 3}, log=False)
    result = run.execute()          # every iteration; {"iterations", "low_loss", "best_metric", ...}

or one iteration at a time (``run.step()`` until ``run.done``), then
``run.finish()``. The config is a run config file (a path), a dict of a whole
run config, or the name of an env class: its bundled config (configs/NAME.json,
found as `dsim run NAME` finds it; ``run.config_path`` says which file), or,
where none is installed, the class's defaults. Overrides
name keys as ``SECTION.KEY`` (sections env, controller, run; ``dsim config
--keys`` lists them); the library checks each value as it checks a config
file, and its message names the key. With ``log=True`` the run writes its
HDF5 log (``run.out``, or the default runs/... name) as `dsim run` does;
the same seed gives the same numbers as the CLI, bit for bit.
"""
from __future__ import annotations

import json
import os
import warnings

from . import _lib
from ._lib import DsimError

__all__ = ["Run", "bundled_config"]


def bundled_config(name: str) -> str | None:
    """The bundled config file of env class `name` (NAME.json), found by the
    library as `dsim run NAME` finds it (ds_run_find_config: under
    $DSIM_CONFIG_DIR when set, next to the loaded library, then the installed
    share/dsim/configs; ``dsim._lib.config_dirs()`` lists them); None when
    there is none."""
    if not name or "/" in name:
        return None
    return _lib.find_config(name)


def _config(config) -> tuple[str, str, str]:
    """(label, JSON text, file or "") of a run config given as a path, a
    dict or a class name (its bundled config, else the class's defaults)."""
    if isinstance(config, dict):
        return "config", json.dumps(config), ""
    path = os.fspath(config)
    if not os.path.isfile(path) and path in _lib.class_names():
        found = bundled_config(path)
        if not found:
            warnings.warn(f"dsim.Run({path!r}): no bundled {path}.json found (searched: "
                          f"{', '.join(_lib.config_dirs())}; set DSIM_CONFIG_DIR to the configs folder); running "
                          "on the env class's and controller's built-in defaults, which may differ from it",
                          stacklevel=3)
            return path, json.dumps({"env": {"name": path}}), ""
        path = found
    if os.path.isfile(path):
        try:
            with open(path) as f:
                return path, f.read(), path
        except OSError as e:
            raise DsimError(path, f"cannot read config: {e}") from None
    raise DsimError(path, "neither a config file nor an env class "
                          f"(registered: {', '.join(_lib.class_names())})", _lib.DS_ERR_NOTFOUND)


def _override(key: str, value) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return f"{key}={text}"


class Run:
    """One run: env, controller, optimiser iterations, run log, result."""

    def __init__(self, config, overrides: dict | None = None, log: bool = False, overwrite: bool = False):
        self.label, text, self.config_path = _config(config)
        ov = [_override(k, v) for k, v in (overrides or {}).items()]
        self._p = _lib.run_create(self.label, text, ov, log, overwrite)
        self._finished = False

    def _check(self, rc: int, what: str):
        if rc:
            raise DsimError(self.label, what, rc, _lib.run_error(self._p))

    @property
    def done(self) -> bool:
        """True when every iteration has run, the run was stopped, or an iteration failed."""
        return bool(_lib.run_done(self._p))

    @property
    def out(self) -> str:
        """The run log's path ("" without one)."""
        return _lib.run_log_path(self._p).decode()

    @property
    def method(self) -> str:
        return _lib.run_method_name(self._p).decode()

    def step(self) -> dict:
        """One optimisation iteration; the result so far."""
        self._check(_lib.run_step_c(self._p, None), "iteration failed")
        return self.result()

    def finish(self) -> dict:
        """Record the best and last episodes, close the log; the final result."""
        if not self._finished:
            self._finished = True
            self._check(_lib.run_finish(self._p), "finishing the run failed")
        return self.result()

    def execute(self) -> dict:
        """Every remaining iteration, then finish; the final result. A stopped
        run returns its result with "interrupted" set."""
        self._finished = True
        rc = _lib.run_execute(self._p)
        if rc and rc != _lib.DS_ERR_INTERRUPTED:
            self._check(rc, "run failed")
        return self.result()

    def stop(self):
        """Ask the run to stop after the current iteration (as Ctrl-C does)."""
        _lib.run_request_stop(self._p)

    def result(self) -> dict:
        """iterations, planned, first/last/low loss and metric, best_metric and
        best_iteration (the best is the lowest loss; best_iteration ==
        low_iteration, counted from 0 as in the log and the CLI), times, status."""
        return _lib.run_result(self._p)

    def close(self):
        if self._p:
            _lib.run_destroy(self._p)
            self._p = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
