"""BPTT or SHAC (dsim.learn) on the walker: a closed-loop MLP policy trained
with the simulator's gradients, for comparison with ppo_walker.py.

    python python/examples/learn_walker.py [--method shac] [--envs 8] [--horizon 16]
        [--iterations 150] [--seed 0] [--lr-schedule constant] [--target-tau 0.2]
        [--noise-std 0.35] [--betas 0.7 0.95] [--no-layer-norm] [--hidden 128 128]
        [--critic-iters 8] [--action-cost 0] [--on-failure restart] [--failure-value 0]
        [--out learn_walker] [--set physics.substeps=960]

The task is ppo_walker.py's: the walker's dense reward (the forward progress
of the centre of mass each step; an episode's rewards sum to its
displacement) with the full state observation (normalised by the policy's
running statistics). Writes OUT.csv (one row per update: env steps, mean
reward per step, losses) and prints, every --eval-every updates and at the
end, the displacement of whole evaluation episodes (the noise-free policy) (4 envs, seeds 1000..)
against the env steps trained so far, also written to OUT_eval.csv (updates,
env_steps, seconds, displacement, failed_envs) (docs/learning.md quotes a
run). An evaluation episode that fails (e.g. an inverted tet on control-fem)
ends there with the rewards before it (dsim.learn.evaluate on_error="end"),
is counted in failed_envs and its message printed.
--env control-fem: the same on control-fem's goal task as ppo_walker.py
--env control-fem --obs com --set goal.x_min=3 --set goal.x_max=3 runs it
(dense reward: each step's decrease of the gear's distance to a goal at
x = 3 m; the observation the env's centre of mass and velocity); the
"displacement" column is then the episode's return, metres closer.
--env runner: the articulated runner's forward progress (dense reward, its
Δx over 100 steps, 2 s) observing its joints (q, qd: 18 values), as
ppo_walker.py --env runner --obs com. --env control-cloth: throw the
cloth (a 16 x 16 sheet; the action is its initial velocity, only step 0's
counts) towards a goal fixed at x = 1.5 m (dense reward, the decrease of
its distance each step, 24 steps; observation the centre of mass and its
velocity), as ppo_walker.py --env control-cloth --obs com --set
goal.x_min=1.5 --set goal.x_max=1.5 --set scene.size_min=16 --set
scene.size_max=16.
--plot PNG CSV... [--ppo CSV...]: one figure of the evaluations of several runs (seeds)
with their median, beside SB3 PPO's figures of docs/rl.md. --summary
CSV...: the table of docs/learning.md (first evaluation >= 1 m and >= 6.33 m,
best, final, mean of the last 10, and the share of the evaluations after the
first >= 6.33 m that stay there).
"""
import argparse
import csv
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402

import dsim.learn as dl  # noqa: E402


# the task of each env: config overrides (dsim.learn keyword form)
TASKS = {"walker": dict(state="full", reward="dense"),
         "control-fem": dict(reward="dense", goal__x_min=3.0, goal__x_max=3.0),
         "runner": dict(reward="dense"),  # the runner's default observation: its joints (q, qd)
         # its action is an initial velocity (only step 0's counts); a sheet of one size (D = 16) for all
         "control-cloth": dict(reward="dense", goal__x_min=1.5, goal__x_max=1.5, scene__size_min=16,
                               scene__size_max=16)}
EPISODE_STEPS = {"walker": 300, "control-fem": 180, "runner": 100,
                 "control-cloth": 24}  # (--summary of logs without episode_return)


def median_curve(csvs):
    """(env steps, median displacement) of several runs' OUT_eval.csv on the
    shortest run's evaluation points."""
    import numpy as np
    curves = []
    for path in csvs:
        with open(path) as f:
            rows = list(csv.DictReader(f))
        curves.append((np.array([float(r["env_steps"]) for r in rows]),
                       np.array([float(r["displacement"]) for r in rows])))
    grid = min((c[0] for c in curves), key=len)
    return grid, np.median([np.interp(grid, cx, cy) for cx, cy in curves], axis=0), curves


def ppo_curves(csvs, k=40):
    """Each PPO run's (env steps, mean return of its last k episodes) from
    ppo_walker.py's OUT.csv (its return column: the env's rewards before
    VecNormalize), and their median on the shortest run's steps."""
    import numpy as np
    curves = []
    for path in csvs:
        with open(path) as f:
            rows = list(csv.DictReader(f))
        x = np.array([float(r["env_steps"]) for r in rows])
        m = np.array([float(r["return"]) for r in rows])
        k1 = min(k, len(m))
        curves.append((x[k1 - 1:], np.convolve(m, np.ones(k1) / k1, mode="valid")))
    grid = min((c[0] for c in curves), key=len)
    return grid, np.median([np.interp(grid, cx, cy) for cx, cy in curves], axis=0), curves


def plot_runs(png, csvs, baseline=None, baseline_label="baseline", title="SHAC (dsim.learn)", env="walker",
              ppo=None):
    """Each run's evaluation return against env steps and their median;
    baseline: other runs (OUT_eval.csv) whose median is drawn dashed; ppo:
    ppo_walker.py runs (OUT.csv) drawn as the mean of 40 episodes, each and
    their median, on a logarithmic axis of env steps. Without ppo on the
    walker, PPO's figures of docs/rl.md and docs/learning.md are marked."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(6.4, 3.8), dpi=90)
    grid, med, curves = median_curve(csvs)
    for path, (x, y) in zip(csvs, curves):
        ax.plot(x, y, "-", lw=1, alpha=0.6, label=os.path.basename(path).replace("_eval.csv", ""))
    if len(curves) > 1:
        ax.plot(grid, med, "k-", lw=2.2, label="median")
    if baseline:
        bx, by, _ = median_curve(baseline)
        ax.plot(bx, by, "--", color="gray", lw=1.6, label=f"median, {baseline_label}")
    if ppo:
        px, py, pcs = ppo_curves(ppo)
        for i, (x, y) in enumerate(pcs):
            ax.plot(x, y, ":", color="tab:red", lw=0.8, alpha=0.6, label="PPO runs (40 episodes)" if i == 0 else None)
        ax.plot(px, py, "--", color="tab:red", lw=2, label=f"PPO, median of {len(pcs)}")
        ax.set_xscale("log")
    elif env == "walker":
        ax.axhline(34.90, color="tab:purple", ls="--", lw=1, label="PPO at 1 M steps (median of 5, 40 episodes)")
        ax.axvline(100000, color="tab:purple", ls=":", lw=1, label="a tenth of PPO's 1 M steps")
        ax.axhline(6.33, color="tab:red", ls="--", lw=1, label="PPO at 151,552 steps (median, 40 episodes)")
        ax.axvline(88800, color="tab:red", ls=":", lw=1, label="PPO's 40-episode mean first >= 1 m (median)")
    ax.axhline(0.0, color="gray", ls="-", lw=0.5)
    ax.set_xlabel("env steps trained (all envs)")
    ax.set_ylabel("return, m (SHAC: evaluations)")
    ax.set_title(f"{title} on the {env}")
    ax.legend(fontsize=6.5, ncol=2)
    fig.tight_layout()
    fig.savefig(png)


def training_episodes(path, num_envs, episode_steps):
    """(env steps at its end, the envs' mean return) of every training
    episode in a run's OUT.csv: its episode_return column, or for logs
    without one the sums of reward_per_step over each episode's windows."""
    with open(path) as f:
        rows = list(csv.DictReader(f))
    if rows and "episode_return" in rows[0]:
        return [(int(r["env_steps"]), float(r["episode_return"])) for r in rows if r["episode_return"]]
    eps, ret, steps, prev = [], 0.0, 0, 0
    for r in rows:
        k = (int(r["env_steps"]) - prev) // num_envs  # the window's steps
        prev = int(r["env_steps"])
        ret, steps = ret + float(r["reward_per_step"]) * k, steps + k
        if steps >= episode_steps:
            eps.append((prev, ret))
            ret, steps = 0.0, 0
    return eps


def summarize(csvs, target=6.33, num_envs=8, episode_steps=300):
    """Per run (OUT_eval.csv): env steps of the first evaluation >= 1 m and
    >= target, best, final, the mean of the last 10 evaluations, and "holds":
    the share of the evaluations after the first >= target that are >= target
    too; from the run's OUT.csv, PPO's measure: the mean return of its last 40
    training episodes and the env steps at which that mean of 40 consecutive
    episodes first reaches target; "kept": the evaluation of the policy
    --keep-best kept (OUT_best.csv; "-" without one); then the medians."""
    import numpy as np
    print(f"| run | first >= 1 m at | first >= {target} m at | best | final | last 10 (mean) | holds "
          f"| training, last 40 | first training-40 >= {target} at | kept |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    cols = []
    k = max(1, round(40 / num_envs))  # episodes rows (each the mean of num_envs) in 40 episodes
    for path in csvs:
        with open(path) as f:
            rows = [(int(r["env_steps"]), float(r["displacement"])) for r in csv.DictReader(f)]
        first = lambda v: next((i for i, (_, d) in enumerate(rows) if d >= v), None)  # noqa: E731
        i1, it = first(1.0), first(target)
        later = [d for _, d in rows[it + 1:]] if it is not None else []
        held = sum(d >= target for d in later) / len(later) if later else float("nan")
        eps = training_episodes(path.replace("_eval.csv", ".csv"), num_envs, episode_steps)
        m40 = [float(np.mean([v for _, v in eps[i - k + 1:i + 1]])) for i in range(k - 1, len(eps))]
        c = [rows[i1][0] if i1 is not None else np.inf, rows[it][0] if it is not None else np.inf,
             max(d for _, d in rows), rows[-1][1], float(np.mean([d for _, d in rows[-10:]])), held,
             m40[-1] if m40 else np.nan,
             next((eps[i + k - 1][0] for i, v in enumerate(m40) if v >= target), np.inf), kept_evaluation(path)]
        cols.append(c)
        print("| " + " | ".join([os.path.basename(path).replace("_eval.csv", ""), *cells(c)]) + " |")
    c = np.array(cols)
    m = [*np.median(c[:, :5], axis=0), np.nanmedian(c[:, 5]) if np.isfinite(c[:, 5]).any() else np.nan,
         np.nanmedian(c[:, 6]), np.median(c[:, 7]),
         np.nanmedian(c[:, 8]) if np.isfinite(c[:, 8]).any() else np.nan]
    print("| median | " + " | ".join(cells(m)) + " |")


def kept_evaluation(eval_csv):
    """The evaluation of the policy keep_best kept (OUT_best.csv beside
    OUT_eval.csv), or nan."""
    path = eval_csv.replace("_eval.csv", "_best.csv")
    if not os.path.exists(path):
        return float("nan")
    with open(path) as f:
        return float(next(csv.DictReader(f))["displacement"])


def cells(c):
    """A summary row's cells: env steps ("never" when not reached), m, %."""
    steps = ["never" if v == float("inf") else f"{v:,.0f}" for v in c[:2]]
    out = [*steps, f"{c[2]:.2f}", f"{c[3]:.2f}", f"{c[4]:.2f}", "-" if c[5] != c[5] else f"{100 * c[5]:.0f}%"]
    if len(c) > 6:  # the training episodes' columns
        out += ["-" if c[6] != c[6] else f"{c[6]:.2f}", "never" if c[7] == float("inf") else f"{c[7]:,.0f}",
                "-" if c[8] != c[8] else f"{c[8]:.2f}"]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--method", choices=["bptt", "shac"], default="shac")
    ap.add_argument("--env", choices=sorted(TASKS), default="walker",
                    help="walker (the default), control-fem (roll the gear towards a goal fixed at x = 3 m), runner or "
                    "control-cloth (towards x = 1.5 m)")
    ap.add_argument("--envs", type=int, default=8)
    ap.add_argument("--horizon", type=int, default=16)
    ap.add_argument("--iterations", type=int, default=150)
    ap.add_argument("--eval-every", type=int, default=50)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--lr-schedule", choices=list(dl.LR_SCHEDULES), default="linear",
                    help="linear (default here; the library's is constant): actor and critic learning rates "
                    "decay to 0 over the iterations")
    ap.add_argument("--target-tau", type=float, default=0.0,
                    help="soft-update fraction of a target critic after each critic fit (0: none)")
    ap.add_argument("--noise-std", type=float, default=0.35,
                    help="train a stochastic policy with this initial exploration noise (std of the pre-tanh "
                    "Gaussian, learned; default 0.35; 0: deterministic, the library's default); evaluations use "
                    "the noise-free policy")
    ap.add_argument("--betas", type=float, nargs=2, default=(0.7, 0.95),
                    help="Adam's beta1 beta2 (default SHAC's 0.7 0.95; torch's and the library's: 0.9 0.999)")
    ap.add_argument("--layer-norm", action=argparse.BooleanOptionalAction, default=True,
                    help="LayerNorm before each hidden activation (default on here, off in the library)")
    ap.add_argument("--critic-iters", type=int, default=8, help="critic regression passes per update")
    ap.add_argument("--on-failure", choices=list(dl.ON_FAILURE), default="restart",
                    help="a training window in which an env fails: no update (restart) or learn from the steps "
                         "before it, the failed env's episode ending there with --failure-value (end)")
    ap.add_argument("--failure-value", type=float, default=0.0,
                    help="with --on-failure end: the value of a failed env's last state (e.g. -2 penalises failures)")
    ap.add_argument("--action-cost", type=float, default=0.0,
                    help="train on the reward less this times the mean squared action (relative to its bound)")
    ap.add_argument("--hidden", type=int, nargs="+", default=[128, 128], help="hidden layer sizes")
    ap.add_argument("--keep-best", type=int, default=40,
                    help="keep the policy after the K training episodes of highest mean return (dsim.learn "
                    "keep_best; default 40, PPO's measure; 0: off) and evaluate it at the end into OUT_best.csv")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="learn_walker")
    ap.add_argument("--set", action="append", default=[], help="config key=value (e.g. physics.substeps=960)")
    ap.add_argument("--plot", nargs="+", metavar=("PNG", "CSV"), help="only plot the runs' OUT_eval.csv into PNG")
    ap.add_argument("--baseline", nargs="+", metavar="CSV", help="with --plot: runs whose median is drawn dashed")
    ap.add_argument("--ppo", nargs="+", metavar="CSV", help="with --plot: ppo_walker.py runs (OUT.csv) beside them")
    ap.add_argument("--baseline-label", default="baseline", help="with --baseline: its legend entry")
    ap.add_argument("--title", default="SHAC (dsim.learn)", help="with --plot: the figure's title (+ on the walker)")
    ap.add_argument("--summary", nargs="+", metavar="CSV", help="only print the table of the runs' OUT_eval.csv")
    ap.add_argument("--summary-target", type=float, default=6.33,
                    help="with --summary: the return of the 'first >=' and 'holds' columns (6.33: PPO at 151,552 "
                    "env steps; 21.67: PPO at 1 M)")
    ap.add_argument("--overwrite", action="store_true", help="replace existing output files")
    a = ap.parse_args()
    if a.summary:
        summarize(a.summary, a.summary_target, a.envs, EPISODE_STEPS[a.env])
        return
    outs = [a.plot[0]] if a.plot else [f"{a.out}.csv", f"{a.out}_eval.csv", f"{a.out}_best.csv"]
    for path in outs:  # before any work: an earlier run's files are never replaced unasked
        if os.path.exists(path) and not a.overwrite:
            sys.exit(f"learn_walker.py: {path} exists; refusing to replace it (--overwrite replaces it)")
    if a.plot:
        plot_runs(a.plot[0], a.plot[1:], a.baseline, a.baseline_label, a.title, a.env, a.ppo)
        return
    torch.set_num_threads(1)
    over = dict(TASKS[a.env])
    for kv in a.set:
        k, v = kv.split("=", 1)
        over[k.replace(".", "__")] = float(v) if v.replace(".", "", 1).lstrip("-").isdigit() else v
    train = dl.train_shac if a.method == "shac" else dl.train_bptt
    t0 = time.time()
    with open(f"{a.out}_eval.csv", "w", newline="") as f:
        csv.writer(f).writerow(["updates", "env_steps", "seconds", "displacement", "failed_envs"])

    def evaluation(policy):
        r = dl.evaluate(policy, a.env, num_envs=4, seed=1000, on_error="end", details=True, **over)
        for msg in r["errors"]:
            print(f"  evaluation episode ended early: {msg}", flush=True)
        return r

    def report(it, policy, env_steps):
        if (it + 1) % a.eval_every == 0 or it + 1 == a.iterations:
            r = evaluation(policy)
            ev = r["mean"]
            print(f"\n{a.method}: {it + 1} updates, {env_steps} env steps, {time.time() - t0:.0f} s: "
                  f"evaluation displacement {ev:.3f} m", flush=True)
            with open(f"{a.out}_eval.csv", "a", newline="") as f:
                csv.writer(f).writerow([it + 1, env_steps, f"{time.time() - t0:.1f}", f"{ev:.6g}",
                                        len(r["errors"])])

    out = train(a.env, num_envs=a.envs, horizon=a.horizon, iterations=a.iterations, lr=a.lr, seed=a.seed,
                hidden=tuple(a.hidden), lr_schedule=a.lr_schedule, target_tau=a.target_tau or None,
                noise_std=a.noise_std or None, betas=tuple(a.betas), layer_norm=a.layer_norm,
                log_csv=f"{a.out}.csv", progress=True, callback=report, overwrite=a.overwrite,
                keep_best=a.keep_best, critic_iters=a.critic_iters, action_cost=a.action_cost,
                on_failure=a.on_failure, failure_value=a.failure_value, **over)
    if out["failures"]:
        kept = sum(1 for f in out["failures"] if f["steps_kept"] > 0)
        what = f"{kept} learned from the steps before it, the others no update" if a.on_failure == "end" \
            else "no update"
        print(f"{len(out['failures'])} training windows ended by a failed env ({what}; every env started over; "
              f"the log's failures column), the first at update {out['failures'][0]['iteration'] + 1}: "
              f"{out['failures'][0]['error']}")
    if out["best_policy"] is not None:
        b, r = out["best"], evaluation(out["best_policy"])
        print(f"kept policy (update {b['iteration'] + 1}, {b['env_steps']} env steps, mean return of its "
              f"{b['episodes']} training episodes {b['return']:.3f}): evaluation displacement {r['mean']:.3f} m")
        with open(f"{a.out}_best.csv", "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["updates", "env_steps", "training_return", "displacement", "failed_envs"])
            w.writerow([b["iteration"] + 1, b["env_steps"], f"{b['return']:.6g}", f"{r['mean']:.6g}",
                        len(r["errors"])])


if __name__ == "__main__":
    main()
