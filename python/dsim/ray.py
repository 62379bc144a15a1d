"""dsim on Ray: seed and hyper-parameter sweeps of training runs, system
identification over many objects, and the Gymnasium envs for RLlib.

    import dsim.ray
    rows = dsim.ray.sweep("walker", seeds=range(8), grid={"controller.lr": [0.05, 0.1]},
                          overrides={"run.iterations": 20}, out_dir="runs/sweep")
    table = dsim.ray.sysid_batch("configs/sysid-mass.json", objects=10, out_dir="runs/mass")
    dsim.ray.register_rllib()          # "dsim/Walker-v0", ... as RLlib env names

Each run or object is one Ray task, and a task computes exactly what the
same run computes in one process: the same seed gives the same numbers bit
for bit (``local=True`` runs the same tasks in this process, one after the
other, for the comparison). The results come back as one list of rows (a
row per run; for sysid, the table `dsim sysid --collect` writes, from its
CSV). Ray is optional: ``import dsim`` never imports it, this module does.

Where the work runs: ``ray.init()`` is called with ``address`` when Ray is
not initialised yet (None: a local instance on this machine's cores; "auto"
or "ray://HOST:10001": a running cluster). Config files and output folders
are named by path, so on a cluster they must be on a file system every node
sees (docs/scale.md).
"""
from __future__ import annotations

import csv
import itertools
import os
import shutil
import subprocess

import ray

from . import _lib
from .env import classes, env_id
from .run import Run

__all__ = ["sweep", "sysid_batch", "register_rllib", "cli_path", "init"]


def init(address: str | None = None, **kwargs):
    """ray.init(address, **kwargs) unless Ray is already initialised (quiet:
    no dashboard, no log echo unless asked)."""
    if not ray.is_initialized():
        kwargs.setdefault("include_dashboard", False)
        kwargs.setdefault("log_to_driver", False)
        if address is None and "runtime_env" not in kwargs:
            # a local instance: its workers import this package and load this
            # library and command (a cluster's nodes need dsim installed)
            here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
            path = os.environ.get("PYTHONPATH", "")
            env = {"PYTHONPATH": here + (os.pathsep + path if path else ""), "DSIM_LIBRARY": _lib.path}
            try:
                env["DSIM"] = cli_path()
            except _lib.DsimError:
                pass
            kwargs["runtime_env"] = {"env_vars": env}
        ray.init(address=address, **kwargs)


def _points(grid: dict | None) -> list[dict]:
    """The grid's points in a fixed order (keys as given, values as given)."""
    if not grid:
        return [{}]
    keys = list(grid)
    return [dict(zip(keys, vals)) for vals in itertools.product(*(list(grid[k]) for k in keys))]


def _log_name(label: str, seed: int, k: int | None) -> str:
    base = os.path.splitext(os.path.basename(label))[0] or "run"
    return f"{base}-s{seed}" + (f"-p{k}" if k is not None else "") + ".h5"


def _refuse_existing(paths, what: str):
    """DsimError naming the first of paths that exists (nothing is replaced
    without overwrite=True), before any task runs."""
    for p in paths:
        if os.path.exists(p):
            raise _lib.DsimError(p, f"{what}: exists; refusing to replace it (overwrite=True replaces it)",
                                 _lib.DS_ERR_IO)


def _run_one(config, overrides: dict, out: str | None, overwrite: bool = False) -> dict:
    """One training run, as `dsim run` does it; its result, with the loss
    series when it wrote a log. The task body, in a Ray worker or here."""
    with Run(config, overrides, log=bool(out), overwrite=overwrite) as run:
        res = run.execute()
    if out:
        res["log"] = out
        res["losses"] = _lib.runlog_iterations(out)["loss"]
    return res


def sweep(config, seeds=(0,), grid: dict | None = None, overrides: dict | None = None, out_dir: str | None = None,
          threads: int = 1, address: str | None = None, local: bool = False, overwrite: bool = False) -> list[dict]:
    """Training runs of one config over seeds x grid points, one Ray task each.

    config: a run config path, a bundled env name or a dict (as dsim.Run).
    grid: {"SECTION.KEY": [values]}: every combination (with each seed).
    overrides: keys set in every run. out_dir: each run writes its log there
    (NAME-sSEED[-pK].h5, K the grid point's index) and the rows' scalar
    columns go to out_dir/sweep.csv (floats written exactly); without it no
    logs and no table. An existing log or table is refused before any run
    starts unless overwrite=True.
    threads: run.threads of each run and the CPUs its task asks Ray for.
    Returns one row per run, in seed-major, grid-minor order: "seed", the
    grid point's keys, then ds_run_result's fields (iterations, low_loss,
    best_metric, status, ...), and "log" and "losses" with out_dir."""
    points = _points(grid)
    label = config if isinstance(config, str) else "config"
    if out_dir:
        os.makedirs(out_dir, exist_ok=True)
    jobs = []
    for seed in seeds:
        for k, point in enumerate(points):
            ov = dict(overrides or {})
            ov.update(point)
            ov["run.seed"] = int(seed)
            ov["run.threads"] = int(threads)
            out = None
            if out_dir:
                out = os.path.join(out_dir, _log_name(label, int(seed), k if grid else None))
                ov["run.out"] = out
            jobs.append(({"seed": int(seed), **point}, ov, out))
    if out_dir and not overwrite:
        _refuse_existing([out for _, _, out in jobs] + [os.path.join(out_dir, "sweep.csv")], "sweep output")
    if local:
        results = [_run_one(config, ov, out, overwrite) for _, ov, out in jobs]
    else:
        init(address)
        task = ray.remote(num_cpus=max(1, int(threads)))(_run_one)
        results = ray.get([task.remote(config, ov, out, overwrite) for _, ov, out in jobs])
    rows = [{**head, **res} for (head, _, _), res in zip(jobs, results)]
    if out_dir:
        _write_table(os.path.join(out_dir, "sweep.csv"), rows)
    return rows


def _write_table(path: str, rows: list[dict]):
    """The rows' scalar columns (not the loss series) as CSV, in row order."""
    cols = [k for k in rows[0] if not isinstance(rows[0][k], (list, dict))] if rows else []
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=cols, extrasaction="ignore")
        w.writeheader()
        for r in rows:
            w.writerow({k: repr(v) if isinstance(v, float) else v for k, v in r.items() if k in cols})


def cli_path() -> str:
    """The `dsim` command beside the library this package loaded: $DSIM when
    set, then the build tree's (the library in .libs/), an installation's
    (PREFIX/lib -> PREFIX/bin), then the PATH's."""
    env = os.environ.get("DSIM")
    if env:
        return env
    libdir = os.path.dirname(os.path.abspath(_lib.path))
    for cand in (os.path.join(os.path.dirname(libdir), "dsim"), os.path.join(os.path.dirname(libdir), "bin", "dsim")):
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    found = shutil.which("dsim")
    if found:
        return found
    raise _lib.DsimError("dsim.ray", "cannot find the dsim command (set DSIM to its path)", _lib.DS_ERR_NOTFOUND)


def _cli(args: list[str]) -> str:
    """Runs `dsim ARGS`; its output, or DsimError with it."""
    p = subprocess.run([cli_path(), *args], capture_output=True, text=True)
    if p.returncode:
        raise _lib.DsimError("dsim " + " ".join(args[:2]), f"exit {p.returncode}: {(p.stderr or p.stdout).strip()}")
    return p.stdout


def _sysid_shard(config: str, objects: int, i: int, n: int, prefix: str, extra: list[str]) -> list[str]:
    """Objects k with k mod n = i, as `dsim sysid --shard i/n` (one log per object)."""
    _cli(["sysid", config, "--objects", str(objects), "--shard", f"{i}/{n}", "--out", prefix, "--quiet", *extra])
    return [f"{prefix}-o{k}.h5" for k in range(i, objects, n)]


def sysid_batch(config: str, objects: int, out_dir: str, tasks: int | None = None, extra_args=(),
                address: str | None = None, local: bool = False, overwrite: bool = False) -> list[dict]:
    """System identification of `objects` objects of a sysid config (`dsim
    sysid CONFIG --objects N`) as Ray tasks: task i runs `--shard i/tasks`
    (tasks: one per object by default), each object's log goes to
    out_dir/sysid-oK.h5, and the logs are merged by `dsim sysid --collect`
    into out_dir/sysid.csv. Returns that table's rows (dicts of the CSV's
    columns: seed, parameter, true, estimate, abs_rel_error, time_s,
    iterations), which equal the single-process run's apart from the times.
    extra_args: more `dsim sysid` options (e.g. ["--iterations", "20"]).
    Existing logs or table are refused before any task starts unless
    overwrite=True."""
    n = int(tasks or objects)
    if objects < 1 or n < 1:
        raise _lib.DsimError("dsim.ray.sysid_batch", f"objects {objects} and tasks {n} must be >= 1")
    os.makedirs(out_dir, exist_ok=True)
    prefix = os.path.join(out_dir, "sysid")
    extra = [str(a) for a in extra_args] + (["--force"] if overwrite else [])
    table = os.path.join(out_dir, "sysid.csv")
    if not overwrite:
        _refuse_existing([f"{prefix}-o{k}.h5" for k in range(objects)] + [table], "sysid output")
    if local:
        logs = [_sysid_shard(config, objects, i, n, prefix, extra) for i in range(n)]
    else:
        init(address)
        task = ray.remote(num_cpus=1)(_sysid_shard)
        logs = ray.get([task.remote(config, objects, i, n, prefix, extra) for i in range(n)])
    files = sorted((f for group in logs for f in group), key=lambda f: int(f.rsplit("-o", 1)[1][:-3]))
    _cli(["sysid", "--collect", *files, "--csv", table] + (["--force"] if overwrite else []))
    with open(table, newline="") as fh:
        return list(csv.DictReader(fh))


def _rllib_creator(name: str):
    def make(ctx):
        cfg = dict(ctx or {})
        n = cfg.pop("num_envs", None)
        if n is not None:  # RLlib's vector entry point: the native batched env
            from .vector import DsimVectorEnv
            return DsimVectorEnv(name, num_envs=int(n), **cfg)
        from .gym import DsimGymEnv
        return DsimGymEnv(name, **cfg)
    return make


def register_rllib() -> list[str]:
    """Registers every env class (bundled and loaded plugins) with Ray's env
    registry under its Gymnasium id ("dsim/Walker-v0", ...). RLlib then makes
    one env per name, or, with ``gym_env_vectorize_mode="vector_entry_point"``
    in ``config.env_runners(...)``, one native batched env per env runner
    (DsimVectorEnv: num_envs_per_env_runner envs stepped together). The env
    config dict is passed to the env as keyword arguments (render_mode,
    reward, action_scale, config overrides). Returns the registered ids."""
    from ray.tune.registry import register_env

    ids = []
    for name in classes():
        gid = env_id(name)
        register_env(gid, _rllib_creator(name))
        ids.append(gid)
    return ids
