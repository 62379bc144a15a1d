"""A policy that sees only pixels, trained end to end through the rasterizer
and the physics (dsim.learn with images=True), against the same trainer
with state observations, on control-fem's goal task.

    python python/examples/visuomotor_fem.py [--method shac] [--envs 4] [--horizon 8]
        [--iterations 60] [--size 64] [--seeds 0 1 2] [--out visuomotor]

Task: control-fem with the dense reward (each step's decrease of the gear's
distance to its goal: an episode's rewards sum to how much closer it got),
the goal fixed at x = 3 m so that both policies face the same task without
seeing it. The pixel policy is dsim.learn.CNNPolicy (three stride-2
convolutions, then an MLP) on the SIZE x SIZE RGBA frame of every step; the
state policy an MLP on the centre of mass and its velocity. For each seed,
both are trained with the same method, horizon, envs and iterations; the
script prints the evaluation return (4 envs, seeds 1000..) and the wall
time of each, and writes OUT-{state,pixels}-sSEED.csv (one row per update).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import dsim.learn as dl  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--method", choices=["bptt", "shac"], default="shac")
    ap.add_argument("--envs", type=int, default=4)
    ap.add_argument("--horizon", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--out", default="visuomotor")
    ap.add_argument("--overwrite", action="store_true", help="replace the OUT-*.csv logs if they exist")
    a = ap.parse_args()
    torch.set_num_threads(1)
    task = dict(reward="dense", goal__x_min=3.0, goal__x_max=3.0, width=a.size, height=a.size, supersample=1)
    train = dl.train_shac if a.method == "shac" else dl.train_bptt
    rows = []
    for seed in a.seeds:
        for kind in ("state", "pixels"):
            t0 = time.time()
            out = train("control-fem", num_envs=a.envs, horizon=a.horizon, iterations=a.iterations, lr=a.lr,
                        seed=seed, hidden=(64,), images=kind == "pixels", log_csv=f"{a.out}-{kind}-s{seed}.csv",
                        overwrite=a.overwrite, **task)
            wall = time.time() - t0
            ev = dl.evaluate(out["policy"], "control-fem", num_envs=4, seed=1000, **task)
            steps = out["history"][-1]["env_steps"] if out["history"] else 0
            rows.append((seed, kind, ev, steps, wall))
            print(f"seed {seed} {kind:6s}: evaluation return {ev:.4f} m closer, {steps} env steps, {wall:.0f} s",
                  flush=True)
    for kind in ("state", "pixels"):
        ev = [r[2] for r in rows if r[1] == kind]
        wall = [r[4] for r in rows if r[1] == kind]
        print(f"{kind:6s}: median return {np.median(ev):.4f} (min {min(ev):.4f}, max {max(ev):.4f}), "
              f"median wall {np.median(wall):.0f} s over seeds {a.seeds}")


if __name__ == "__main__":
    main()
