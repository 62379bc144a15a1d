"""Stable-Baselines3 PPO on a dsim env through the native batched env.

    python python/examples/ppo_walker.py [--env walker] [--steps 12000] [--num-envs 8] [--out ppo_walker]

Writes OUT.csv (episode, control_steps, substeps, return, metric) and OUT.png
(the learning curve: the metric at each episode's end against simulated
substeps), and prints the final figures. The metric is the env's own
(walker: centre-of-mass x displacement, goal +2 m), so the curve compares
directly with `dsim run` (the built-in gradient controller) at equal
simulated substeps. Any config key can be set: --set physics.substeps=960.
"""
import argparse
import csv
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import gymnasium  # noqa: E402
import numpy as np  # noqa: E402

import dsim  # noqa: E402
from dsim.sb3 import SB3VecEnv  # noqa: E402


class Recorder:
    def __init__(self):
        self.rows = []
        self.ret = None

    def __call__(self, locals_, globals_):
        rew, dones, infos = locals_["rewards"], locals_["dones"], locals_["infos"]
        if self.ret is None:
            self.ret = np.zeros(len(rew))
        self.ret += rew
        for i in np.flatnonzero(dones):
            self.rows.append((len(self.rows), self.ret[i], infos[i]["metric"]))
            self.ret[i] = 0
        return True


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="walker")
    ap.add_argument("--steps", type=int, default=12000, help="control steps in all (walker: 40 episodes of 300)")
    ap.add_argument("--num-envs", type=int, default=8)
    ap.add_argument("--n-steps", type=int, default=300, help="PPO rollout length per env")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="ppo_walker")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="env config key")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)
    import torch
    from stable_baselines3 import PPO

    torch.set_num_threads(1)
    kw = {}
    for s in args.set:
        k, v = s.split("=", 1)
        try:
            kw[k.replace(".", "__")] = int(v)
        except ValueError:
            try:
                kw[k.replace(".", "__")] = float(v)
            except ValueError:
                kw[k.replace(".", "__")] = v
    venv = gymnasium.make_vec(dsim.env_id(args.env), num_envs=args.num_envs, **kw)
    cfg = venv.unwrapped.config["physics"]
    C = int(cfg["control_interval"])
    env = SB3VecEnv(venv, seed=args.seed)
    n_steps = min(args.n_steps, max(8, args.steps // args.num_envs))
    model = PPO("MlpPolicy", env, n_steps=n_steps, batch_size=max(8, n_steps * args.num_envs // 30), n_epochs=5, learning_rate=3e-4, gamma=0.99, seed=args.seed, verbose=0,
                device="cpu")
    rec = Recorder()
    t0 = time.time()
    model.learn(total_timesteps=args.steps, callback=rec)
    wall = time.time() - t0
    steps_per_ep = int(np.ceil(int(cfg["substeps"]) / C))
    with open(args.out + ".csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["episode", "control_steps", "substeps", "return", "metric"])
        for ep, ret, met in rec.rows:
            w.writerow([ep, (ep + 1) * steps_per_ep, (ep + 1) * int(cfg["substeps"]), f"{ret:.6g}", f"{met:.6g}"])
    mets = [m for _, _, m in rec.rows]
    last = mets[-args.num_envs:] if mets else [float("nan")]
    print(f"ppo {args.env}: {model.num_timesteps} control steps ({model.num_timesteps * C} substeps), "
          f"{len(rec.rows)} episodes, {wall:.1f} s; metric of the last {len(last)} episodes: "
          f"mean {np.mean(last):.4g}, best episode {max(mets) if mets else float('nan'):.4g}; "
          f"return of the last: {np.mean([r for _, r, _ in rec.rows[-args.num_envs:]]):.4g}")
    if not args.no_plot and rec.rows:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        x = [(ep + 1) * int(cfg["substeps"]) for ep, _, _ in rec.rows]
        fig, ax = plt.subplots(figsize=(6, 3.5), dpi=80)
        ax.plot(x, mets, ".", alpha=0.4, label="PPO episode")
        k = max(1, args.num_envs)
        if len(mets) >= k:
            ax.plot(x[k - 1:], np.convolve(mets, np.ones(k) / k, mode="valid"), "-", label=f"PPO mean of {k}")
        goal = venv.unwrapped.config.get("goal", {}).get("x_min")
        if goal is not None and args.env in ("walker", "walker-springs"):
            ax.axhline(goal, color="gray", ls="--", lw=1, label="goal")
        ax.set_xlabel("simulated substeps")
        ax.set_ylabel("metric (walker: Δx, m)" if args.env == "walker" else "metric")
        ax.set_title(f"SB3 PPO on dsim {args.env} ({args.num_envs} envs, batched)")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(args.out + ".png")
    env.close()
    return rec.rows


if __name__ == "__main__":
    main()
