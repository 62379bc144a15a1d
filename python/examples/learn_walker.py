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
against the env steps trained so far (docs/learning.md quotes a run).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

import dsim.learn as dl  # noqa: E402


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
    a = ap.parse_args()
    torch.set_num_threads(1)
    over = dict(state="full", reward="dense")
    for kv in a.set:
        k, v = kv.split("=", 1)
        over[k.replace(".", "__")] = float(v) if v.replace(".", "", 1).lstrip("-").isdigit() else v
    train = dl.train_shac if a.method == "shac" else dl.train_bptt
    t0 = time.time()

    def report(it, policy, env_steps):
        if (it + 1) % a.eval_every == 0 or it + 1 == a.iterations:
            ev = dl.evaluate(policy, "walker", num_envs=4, seed=1000, **over)
            print(f"\n{a.method}: {it + 1} updates, {env_steps} env steps, {time.time() - t0:.0f} s: "
                  f"evaluation displacement {ev:.3f} m", flush=True)

    train("walker", num_envs=a.envs, horizon=a.horizon, iterations=a.iterations, lr=a.lr, seed=a.seed,
          hidden=(128, 128), log_csv=f"{a.out}.csv", progress=True, callback=report, **over)


if __name__ == "__main__":
    main()
