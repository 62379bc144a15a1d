"""Stable-Baselines3 PPO on the dsim walker through the native batched env.

    python python/examples/ppo_walker.py [--steps 150000] [--seed 0] [--out ppo_walker]
    python python/examples/ppo_walker.py --plot docs/ppo_walker.png run_s0.csv run_s1.csv ...

The walker's task is its metric: the centre-of-mass displacement along x at
the episode's end (goal +2 m; 300 steps of 32 substeps, 5 s). What makes PPO
learn it (docs/rl.md):

- Observation (--obs rich, the default): the env's full state
  (observation.state = "full") turned into the positions (x, y) of the 74
  particles relative to the centre of mass, their velocities (x, y; times
  0.1), and phase features sin/cos(2 pi k / P) of the step index k for
  P = 60, 30, 15 steps (1, 0.5, 0.25 s): a gait is periodic, and the phase
  lets the policy express one without having to invent a clock. 302 values.
  --obs com: the env's default 6 (centre of mass and its velocity).
- Reward (--reward dense, the default): loss.reward = "dense", the forward
  progress of the centre of mass in each step (the rewards of an episode sum
  to its metric), scaled by SB3's VecNormalize (rewards only). --reward
  sparse: the env's default (minus the image loss at the last step).
- Policy: PPO, MLP 128-128, initial log std -1 (std 0.37: a policy as noisy
  as uniform random activations walks backwards about 2 m an episode),
  8 envs x 256 steps a rollout, minibatch 512, 5 epochs, lr 3e-4,
  gamma 0.99, GAE 0.95; actions are the 104 activations as they are.

Writes OUT.csv (episode, env_steps at its end, substeps, return, metric) and
OUT.png (the metric of every episode against env steps), and prints the
final figures. --plot PNG CSV...: one figure of several runs (seeds) with
their median. Any config key can be set: --set physics.substeps=960.
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

PERIODS = (60.0, 30.0, 15.0)  # steps; 60 steps = 1 s


def features_wrapper(venv, rich: bool):
    """The VecEnvWrapper that makes the rich observation (module doc) and
    records every finished episode (rows: env_steps, return, metric)."""
    from stable_baselines3.common.vec_env import VecEnvWrapper

    class Features(VecEnvWrapper):
        def __init__(self):
            self.n = venv.num_envs
            self.np3 = venv.observation_space.shape[0] // 2 if rich else 0
            d = 4 * (self.np3 // 3) + 2 * len(PERIODS) if rich else venv.observation_space.shape[0]
            space = gymnasium.spaces.Box(-np.inf, np.inf, (d,), np.float32)
            super().__init__(venv, observation_space=space)
            self.k = np.zeros(self.n)
            self.ret = np.zeros(self.n)
            self.env_steps = 0
            self.rows = []

        def feat(self, obs, k):
            if not rich:
                return obs.astype(np.float32)
            n = obs.shape[0]
            x = obs[:, :self.np3].reshape(n, -1, 3)[..., :2]
            v = obs[:, self.np3:].reshape(n, -1, 3)[..., :2]
            parts = [(x - x.mean(1, keepdims=True)).reshape(n, -1), 0.1 * v.reshape(n, -1)]
            for p in PERIODS:
                parts += [np.sin(2 * np.pi * k / p)[:, None], np.cos(2 * np.pi * k / p)[:, None]]
            return np.concatenate(parts, 1).astype(np.float32)

        def reset(self):
            self.k[:] = 0
            self.ret[:] = 0
            return self.feat(self.venv.reset(), self.k)

        def step_wait(self):
            obs, rew, done, infos = self.venv.step_wait()
            self.env_steps += self.n
            self.ret += rew
            for i in np.flatnonzero(done):
                last = infos[i]["terminal_observation"][None]
                infos[i]["terminal_observation"] = self.feat(last, self.k[i:i + 1] + 1)[0]
                self.rows.append((len(self.rows), self.env_steps, float(self.ret[i]), infos[i]["metric"]))
            self.k += 1
            self.k[done] = 0
            self.ret[done] = 0
            return self.feat(obs, self.k), rew, done, infos

    return Features()


def parse_sets(sets):
    kw = {}
    for s in sets:
        k, v = s.split("=", 1)
        for conv in (int, float, str):
            try:
                kw[k.replace(".", "__")] = conv(v)
                break
            except ValueError:
                pass
    return kw


def plot_runs(png, csvs, title=None):
    """The metric of every episode against env steps for each run, each run's
    running mean over 40 episodes, and their median."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 3.8), dpi=90)
    grid, curves = None, []
    for path in csvs:
        with open(path) as f:
            rows = list(csv.DictReader(f))
        x = np.array([float(r["env_steps"]) for r in rows])
        m = np.array([float(r["metric"]) for r in rows])
        k = min(40, len(m))
        sm = np.convolve(m, np.ones(k) / k, mode="valid")
        label = os.path.splitext(os.path.basename(path))[0]
        ax.plot(x[k - 1:], sm, "-", lw=1, alpha=0.7, label=label)
        grid = x[k - 1:] if grid is None or len(x[k - 1:]) < len(grid) else grid
        curves.append((x[k - 1:], sm))
    if len(curves) > 1:
        med = np.median([np.interp(grid, cx, cy) for cx, cy in curves], axis=0)
        ax.plot(grid, med, "k-", lw=2.2, label="median")
    ax.axhline(1.0, color="gray", ls=":", lw=1, label="1 m")
    ax.axhline(0.0, color="gray", ls="-", lw=0.5)
    ax.set_xlabel("env steps (all 8 envs)")
    ax.set_ylabel("Δx of the centre of mass, m")
    ax.set_title(title or "SB3 PPO on dsim/Walker-v0 (mean of 40 episodes)")
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(png)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--env", default="walker")
    ap.add_argument("--steps", type=int, default=150000, help="env steps in all (8 envs: 300 steps an episode)")
    ap.add_argument("--num-envs", type=int, default=8)
    ap.add_argument("--n-steps", type=int, default=256, help="PPO rollout length per env")
    ap.add_argument("--obs", choices=("rich", "com"), default="rich")
    ap.add_argument("--reward", choices=("dense", "sparse"), default="dense")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="ppo_walker")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="env config key")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--save", metavar="ZIP", help="save the trained policy (SB3 model.save) to look at its gait")
    ap.add_argument("--plot", nargs="+", metavar=("PNG", "CSV"), help="only plot the runs CSV... into PNG")
    ap.add_argument("--overwrite", action="store_true", help="replace existing output files")
    args = ap.parse_args(argv)
    # refuse before any work: a finished run's CSV or picture is not replaced unasked
    outs = [args.plot[0]] if args.plot else [args.out + ".csv"] + ([] if args.no_plot else [args.out + ".png"])
    taken = [p for p in outs if os.path.exists(p)]
    if taken and not args.overwrite:
        ap.error(f"{', '.join(taken)} exists; choose another --out / PNG or pass --overwrite")
    if args.plot:
        plot_runs(args.plot[0], args.plot[1:])
        return None
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import VecNormalize

    torch.set_num_threads(1)
    kw = parse_sets(args.set)
    kw.setdefault("loss__reward", args.reward)
    if args.obs == "rich":
        kw.setdefault("observation__state", "full")
    venv = gymnasium.make_vec(dsim.env_id(args.env), num_envs=args.num_envs, **kw)
    cfg = venv.unwrapped.config["physics"]
    C = int(cfg["control_interval"])
    feats = features_wrapper(SB3VecEnv(venv, seed=args.seed), args.obs == "rich")
    env = VecNormalize(feats, norm_obs=False, norm_reward=True, gamma=0.99)
    n_steps = min(args.n_steps, max(8, args.steps // args.num_envs))
    model = PPO("MlpPolicy", env, n_steps=n_steps, batch_size=min(512, n_steps * args.num_envs), n_epochs=5,
                learning_rate=3e-4, gamma=0.99, gae_lambda=0.95, seed=args.seed, verbose=0, device="cpu",
                policy_kwargs=dict(log_std_init=-1.0, net_arch=[128, 128]))
    t0 = time.time()
    model.learn(total_timesteps=args.steps)
    wall = time.time() - t0
    if args.save:
        model.save(args.save)
    rows = feats.rows
    with open(args.out + ".csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["episode", "env_steps", "substeps", "return", "metric"])
        for ep, steps, ret, met in rows:
            w.writerow([ep, steps, steps * C, f"{ret:.6g}", f"{met:.6g}"])
    mets = [r[3] for r in rows]
    last = mets[-40:] if mets else [float("nan")]
    print(f"ppo {args.env} seed {args.seed}: {model.num_timesteps} env steps ({model.num_timesteps * C} substeps), "
          f"{len(rows)} episodes, {wall:.1f} s; metric of the last {len(last)} episodes: mean {np.mean(last):.4g}, "
          f"best episode {max(mets) if mets else float('nan'):.4g}")
    if not args.no_plot and rows:
        plot_runs(args.out + ".png", [args.out + ".csv"], f"SB3 PPO on dsim {args.env}, seed {args.seed}")
    env.close()
    return rows


if __name__ == "__main__":
    main()
