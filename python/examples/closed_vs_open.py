"""Closed loop against open loop on the walker, under perturbations neither
controller saw in training.

    python python/examples/closed_vs_open.py [--seeds 3] [--substeps 4800] [--open-iterations 20]
        [--closed-iterations 100] [--out closed_vs_open.csv]

Task: forward progress of the walker's centre of mass (m) in an episode of
--substeps substeps (32 per control step). Per seed S:
  open loop   the built-in sinusoid controller of `dsim run` (dsim.Run,
              method state: the centre-of-mass loss to a goal --goal m ahead,
              far enough that the optimiser pushes for progress), the actions
              of its lowest-loss iteration replayed step by step;
  closed loop an MLP policy of the full state (dsim.learn.train_shac on the
              dense reward, whose episode sum is the progress).
Both are then evaluated, forward only, on 4 episodes (seeds 1000..1003)
under each condition:
  nominal     the training conditions;
  push        a push in the x-y plane, random direction per episode, on
              every particle for 2 steps at mid-episode (an acceleration of
              --push m/s^2, i.e. a velocity change of push x 2 steps x 1/60 s;
              ds_env_set_external_force through dsim.residual.set_forces);
  start       a shifted start: dropped from 0.2 m higher and thrown back at
              0.5 m/s (env.scene.start, env.scene.velocity);
  mu 0.2, mu 1.0  changed ground friction (env.contact.mu; trained at 0.5).
Prints a table of the progress (median over seeds of each seed's mean over
the 4 episodes) and writes every value to --out (CSV).
"""
import argparse
import csv
import ctypes
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import dsim  # noqa: E402
import dsim.learn as dl  # noqa: E402
import dsim.residual as dr  # noqa: E402

CONDITIONS = [
    ("nominal", {}),
    ("push", {}),
    ("start", dict(start=[0, 0.2, 0], velocity=[-0.5, 0, 0])),
    ("mu 0.2", dict(mu=0.2)),
    ("mu 1.0", dict(mu=1.0)),
]
EVAL_SEED, EVAL_ENVS = 1000, 4


class _TrainerIter(ctypes.Structure):
    """dsTrainerIter of dsim/controller.h (what ds_run_step reports)."""
    _fields_ = [("iteration", ctypes.c_int), ("loss", ctypes.c_double), ("metric", ctypes.c_double),
                ("grad_norm", ctypes.c_double), ("lr", ctypes.c_double), ("params", ctypes.POINTER(ctypes.c_double)),
                ("nparams", ctypes.c_int), ("actions", dsim._lib.RP), ("nsteps", ctypes.c_int),
                ("action_dim", ctypes.c_int), ("backtracks", ctypes.c_int), ("rejected", ctypes.c_int)]


def train_open(seed, substeps, goal, iterations, width):
    """The sinusoid controller of `dsim run` (dsim.Run, iteration by
    iteration): the actions (S x A) of its lowest-loss iteration, the one a
    run returns, and its metric (the progress, m)."""
    ov = {"env.physics.substeps": substeps, "env.goal.x_min": goal, "env.goal.x_max": goal,
          "env.render.width": width, "env.render.height": width, "env.render.supersample": 1,
          "run.method": "state", "run.iterations": iterations, "run.seed": seed, "run.threads": 1}
    best, acts, metric = np.inf, None, None
    # dsim.Run.step keeps the iteration's report to itself; its actions come
    # from ds_run_step's dsTrainerIter directly
    with dsim.Run("walker", ov, log=False) as run:
        it = _TrainerIter()
        while not run.done:
            rc = dsim._lib.run_step_c(run._p, ctypes.byref(it))
            if rc:
                raise dsim.DsimError("walker", "open-loop iteration failed", rc, dsim._lib.run_error(run._p))
            if it.loss < best:
                best, metric = it.loss, it.metric
                acts = np.ctypeslib.as_array(it.actions, shape=(it.nsteps, it.action_dim)).astype(np.float64)
    return acts, metric


def evaluate(act_fn, over, push, rng, label):
    """Progress (m) of EVAL_ENVS episodes: act_fn(k, obs) gives the actions."""
    ls = dsim.Lockstep("walker", EVAL_ENVS, label=label, gradients=False, **over)
    obs = ls.reset(EVAL_SEED)
    mass = np.stack([ls.param(i, "particle.mass") for i in range(EVAL_ENVS)])     # N x P
    T, total = ls.num_steps, np.zeros(EVAL_ENVS)
    ang = rng.uniform(0, 2 * np.pi, EVAL_ENVS)
    dirs = np.stack([np.cos(ang), np.sin(ang), np.zeros(EVAL_ENVS)], 1)           # N x 3
    for k in range(T):
        if push and k == T // 2:
            dr.set_forces(ls, (mass[:, :, None] * push * dirs[:, None, :]).reshape(EVAL_ENVS, -1))
        if push and k == T // 2 + 2:
            dr.set_forces(ls, None)
        obs, r = ls.step(act_fn(k, obs))
        total += r
    ls.close()
    return float(total.mean())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--substeps", type=int, default=4800)
    ap.add_argument("--goal", type=float, default=10.0)
    ap.add_argument("--open-iterations", type=int, default=20)
    ap.add_argument("--closed-iterations", type=int, default=100)
    ap.add_argument("--envs", type=int, default=8)
    ap.add_argument("--horizon", type=int, default=16)
    ap.add_argument("--push", type=float, default=30.0, help="push acceleration, m/s^2, for 2 steps")
    ap.add_argument("--out", default="closed_vs_open.csv")
    ap.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    a = ap.parse_args()
    if os.path.exists(a.out) and not a.overwrite:
        sys.exit(f"{a.out}: exists; refusing to replace it (--overwrite replaces it)")
    torch.set_num_threads(1)
    dsim._lib.set_num_threads(1)
    base = dict(substeps=a.substeps, width=16, height=16, supersample=1, state="full", reward="dense")
    rows, t0 = [], time.time()
    for seed in range(a.seeds):
        ts = time.time()
        acts, m_open = train_open(seed, a.substeps, a.goal, a.open_iterations, 16)
        t_open = time.time() - ts
        ts = time.time()
        out = dl.train_shac("walker", num_envs=a.envs, horizon=a.horizon, iterations=a.closed_iterations,
                            seed=seed, hidden=(128, 128), **base)
        t_closed = time.time() - ts
        policy = out["policy"]
        print(f"seed {seed}: open loop {t_open:.0f} s ({a.open_iterations} iterations, progress {m_open:.3f} m), "
              f"closed loop {t_closed:.0f} s ({a.closed_iterations} updates, "
              f"{out['history'][-1]['env_steps']} env steps)", flush=True)
        for name, extra in CONDITIONS:
            over = dict(base, **extra)
            push = a.push if name == "push" else 0.0
            rng_o, rng_c = np.random.default_rng(seed + 17), np.random.default_rng(seed + 17)  # same pushes
            with torch.no_grad():
                p_open = evaluate(lambda k, o: np.repeat(acts[min(k, len(acts) - 1)][None], EVAL_ENVS, 0),
                                  over, push, rng_o, "open")
                p_closed = evaluate(lambda k, o: policy(torch.from_numpy(o)).numpy(), over, push, rng_c,
                                    "closed")
            rows.append(dict(seed=seed, condition=name, open=p_open, closed=p_closed))
            print(f"  {name:8s} open {p_open:7.3f} m   closed {p_closed:7.3f} m", flush=True)
    print(f"\nprogress (m), median over {a.seeds} seeds of the mean of {EVAL_ENVS} episodes "
          f"({time.time() - t0:.0f} s in all)")
    print("| condition | open loop (sinusoid, dsim run) | closed loop (MLP, SHAC) |")
    print("|---|---|---|")
    for name, _ in CONDITIONS:
        o = statistics.median(r["open"] for r in rows if r["condition"] == name)
        c = statistics.median(r["closed"] for r in rows if r["condition"] == name)
        print(f"| {name} | {o:.2f} | {c:.2f} |")
    with open(a.out, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["seed", "condition", "open", "closed"])
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
