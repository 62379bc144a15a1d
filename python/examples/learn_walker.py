"""BPTT or SHAC (dsim.learn) on the walker: a closed-loop MLP policy trained
with the simulator's gradients, for comparison with ppo_walker.py.

    python python/examples/learn_walker.py [--method shac] [--envs 8] [--horizon 16]
        [--iterations 150] [--seed 0] [--out learn_walker] [--set physics.substeps=960]

The task is ppo_walker.py's: the walker's dense reward (the forward progress
of the centre of mass each step; an episode's rewards sum to its
displacement) with the full state observation (normalised by the policy's
running statistics). Writes OUT.csv (one row per update: env steps, mean
reward per step, losses) and prints, every --eval-every updates and at the
end, the displacement of whole evaluation episodes (4 envs, seeds 1000..)
against the env steps trained so far, also written to OUT_eval.csv (updates,
env_steps, seconds, displacement) (docs/learning.md quotes a run).
--plot PNG CSV...: one figure of the evaluations of several runs (seeds)
with their median, beside SB3 PPO's figures of docs/rl.md.
"""
import argparse
import csv
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

import dsim.learn as dl  # noqa: E402


def plot_runs(png, csvs):
    """Each run's evaluation displacement against env steps and their median,
    with PPO's figures from docs/rl.md (5 seeds, 150,000 env steps) marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    fig, ax = plt.subplots(figsize=(6.4, 3.8), dpi=90)
    curves = []
    for path in csvs:
        with open(path) as f:
            rows = list(csv.DictReader(f))
        x = np.array([float(r["env_steps"]) for r in rows])
        y = np.array([float(r["displacement"]) for r in rows])
        ax.plot(x, y, "-", lw=1, alpha=0.6, label=os.path.basename(path).replace("_eval.csv", ""))
        curves.append((x, y))
    grid = min((c[0] for c in curves), key=len)
    if len(curves) > 1:
        ax.plot(grid, np.median([np.interp(grid, cx, cy) for cx, cy in curves], axis=0), "k-", lw=2.2,
                label="median")
    ax.axhline(6.33, color="tab:red", ls="--", lw=1, label="PPO at 151,552 steps (median, 40 episodes)")
    ax.axvline(88800, color="tab:red", ls=":", lw=1, label="PPO's 40-episode mean first >= 1 m (median)")
    ax.axhline(0.0, color="gray", ls="-", lw=0.5)
    ax.set_xlabel("env steps trained (all 8 envs)")
    ax.set_ylabel("evaluation Δx, m (4 episodes)")
    ax.set_title("SHAC (dsim.learn) on the walker")
    ax.legend(fontsize=6.5, ncol=2)
    fig.tight_layout()
    fig.savefig(png)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--method", choices=["bptt", "shac"], default="shac")
    ap.add_argument("--envs", type=int, default=8)
    ap.add_argument("--horizon", type=int, default=16)
    ap.add_argument("--iterations", type=int, default=150)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="learn_walker")
    ap.add_argument("--set", action="append", default=[], help="config key=value (e.g. physics.substeps=960)")
    ap.add_argument("--plot", nargs="+", metavar=("PNG", "CSV"), help="only plot the runs' OUT_eval.csv into PNG")
    ap.add_argument("--overwrite", action="store_true", help="replace existing output files")
    a = ap.parse_args()
    outs = [a.plot[0]] if a.plot else [f"{a.out}.csv", f"{a.out}_eval.csv"]
    for path in outs:  # before any work: an earlier run's files are never replaced unasked
        if os.path.exists(path) and not a.overwrite:
            sys.exit(f"learn_walker.py: {path} exists; refusing to replace it (--overwrite replaces it)")
    if a.plot:
        plot_runs(a.plot[0], a.plot[1:])
        return
    torch.set_num_threads(1)
    over = dict(state="full", reward="dense")
    for kv in a.set:
        k, v = kv.split("=", 1)
        over[k.replace(".", "__")] = float(v) if v.replace(".", "", 1).lstrip("-").isdigit() else v
    train = dl.train_shac if a.method == "shac" else dl.train_bptt
    t0 = time.time()
    with open(f"{a.out}_eval.csv", "w", newline="") as f:
        csv.writer(f).writerow(["updates", "env_steps", "seconds", "displacement"])

    def report(it, policy, env_steps):
        if (it + 1) % a.eval_every == 0 or it + 1 == a.iterations:
            ev = dl.evaluate(policy, "walker", num_envs=4, seed=1000, **over)
            print(f"\n{a.method}: {it + 1} updates, {env_steps} env steps, {time.time() - t0:.0f} s: "
                  f"evaluation displacement {ev:.3f} m", flush=True)
            with open(f"{a.out}_eval.csv", "a", newline="") as f:
                csv.writer(f).writerow([it + 1, env_steps, f"{time.time() - t0:.1f}", f"{ev:.6g}"])

    train("walker", num_envs=a.envs, horizon=a.horizon, iterations=a.iterations, lr=a.lr, seed=a.seed,
          hidden=(128, 128), log_csv=f"{a.out}.csv", progress=True, callback=report, overwrite=a.overwrite, **over)


if __name__ == "__main__":
    main()
