"""A policy that sees only pixels, trained end to end through the rasterizer
and the physics (dsim.learn with images=True), against the same trainer
with state observations, on control-fem's goal task.

    python python/examples/visuomotor_fem.py [--method shac] [--envs 4] [--horizon 8]
        [--iterations 60] [--size 64] [--seeds 0 1 2] [--out visuomotor]
        [--goal [--goal-range 1 5] [--relative] [--kinds ...]] [--eval-envs 4]
        [--noise-std 0.35 --betas 0.7 0.95 --layer-norm --lr-schedule linear]
    python python/examples/visuomotor_fem.py --plot PNG OUT-KIND-sSEED.csv ...

Task: control-fem with the dense reward (each step's decrease of the gear's
distance to its goal: an episode's rewards sum to how much closer it got).
The pixel policy is dsim.learn.CNNPolicy (three stride-2 convolutions, then
an MLP) on the SIZE x SIZE RGBA frame of every step; the state policy an
MLP on the centre of mass and its velocity. For each seed, every policy is
trained with the same method, horizon, envs and iterations; the script
prints the evaluation return (--eval-envs envs, seeds 1000..: goals no
training episode drew), env steps, and the CPU seconds of each (training and
evaluation), and writes OUT-KIND-sSEED.csv (one row per update).

Without --goal the goal is fixed at x = 3 m so that both policies face the
same task without seeing it. With --goal every episode draws each env's goal
x from [1, 5) m (--goal-range; with --relative: metres ahead of the start
centre of mass, at its height) and four policies are compared:
pixels + goal image (the CNN on 8 channels: frame RGBA, goal RGBA; goal=True),
state + goal position (the MLP with the target centre appended), state
alone (the control: the same MLP that does not see the goal) and zero
actions (the gear rolling by itself).

--plot draws the runs' training curves into PNG: per kind (from each CSV's
name), the median over seeds of the reward per step (the mean of 20
updates) with the seeds' range shaded, and zero actions' reward per step
on the same task (one evaluation episode).
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import dsim.learn as dl  # noqa: E402

# kind: (images, goal); None: zero actions, nothing trained
KINDS = {"state": (False, False), "pixels": (True, False)}
GOAL_KINDS = {"pixels+goal": (True, True), "state+goal": (False, True), "state": (False, False), "zero": None}


class Zero(torch.nn.Module):
    """Zero actions whatever the observation."""

    def __init__(self, action_size: int):
        super().__init__()
        self.action_size = action_size

    def forward(self, obs):
        return torch.zeros(obs.shape[0], self.action_size, dtype=torch.float64)


def run_kind(a, seed: int, kind: str, spec, task: dict):
    """(evaluation return, env steps, CPU seconds of training, of evaluation)."""
    t0 = time.process_time()
    steps = 0
    if spec is None:
        policy = Zero(dl.Rollout("control-fem", 1, **task).action_size)
    else:
        images, goal = spec
        train = dl.train_shac if a.method == "shac" else dl.train_bptt
        out = train("control-fem", num_envs=a.envs, horizon=a.horizon, iterations=a.iterations, lr=a.lr,
                    seed=seed, hidden=(64,), images=images, goal=goal, log_csv=f"{a.out}-{kind}-s{seed}.csv",
                    overwrite=a.overwrite, noise_std=a.noise_std or None, betas=tuple(a.betas),
                    layer_norm=a.layer_norm, lr_schedule=a.lr_schedule, critic_obs=a.critic_obs,
                    encoder_lr=a.encoder_lr if images else None, **task)
        policy = out["policy"]
        steps = out["history"][-1]["env_steps"] if out["history"] else 0
    t1 = time.process_time()
    r = dl.evaluate(policy, "control-fem", num_envs=a.eval_envs, seed=1000, on_error="end", details=True, **task)
    ev = r["mean"]
    for msg in r["errors"]:  # an inverted tet ends that episode with the rewards before it
        print(f"seed {seed} {kind}: evaluation episode ended early: {msg}", flush=True)
    return ev, steps, t1 - t0, time.process_time() - t1


def plot(png: str, csvs, task: dict, window: int = 20):
    """The training curves of the runs in csvs (OUT-KIND-sSEED.csv), grouped
    by KIND: median over seeds of the moving mean of reward_per_step."""
    import csv
    import re

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = {}
    for path in csvs:
        m = re.search(r"-([a-z+_]+)-s(\d+)\.csv$", os.path.basename(path))  # KIND: "_" shown as " "
        if not m:
            sys.exit(f"{path}: expected a name OUT-KIND-sSEED.csv")
        with open(path) as f:
            rows = list(csv.DictReader(f))
        steps = np.array([int(r["env_steps"]) for r in rows])
        rew = np.array([float(r["reward_per_step"]) for r in rows])
        smooth = np.convolve(rew, np.ones(window) / window, mode="valid")
        runs.setdefault(m.group(1).replace("_", " "), []).append((steps[window - 1:], smooth))
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for kind, rs in sorted(runs.items()):
        n = min(len(r[1]) for r in rs)
        y = np.stack([r[1][:n] for r in rs])
        x = rs[0][0][:n]
        line, = ax.plot(x, np.median(y, 0), label=f"{kind} (median of {len(rs)} seeds)")
        ax.fill_between(x, y.min(0), y.max(0), color=line.get_color(), alpha=0.15)
    ro = dl.Rollout("control-fem", 1, **task)
    zero = dl.evaluate(Zero(ro.action_size), "control-fem", num_envs=1, seed=1000, **task) / ro.num_steps
    ax.axhline(zero, color="gray", ls="--", lw=1, label="zero actions")
    ax.set_xlabel("env steps trained (all envs)")
    ax.set_ylabel(f"training reward per step (m; mean of {window} updates)")
    ax.set_title("control-fem from pixels and from the state (SHAC, dsim.learn)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png)
    print(f"wrote {png}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--method", choices=["bptt", "shac"], default="shac")
    ap.add_argument("--envs", type=int, default=4)
    ap.add_argument("--horizon", type=int, default=8)
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--lr-schedule", choices=list(dl.LR_SCHEDULES), default="constant")
    ap.add_argument("--noise-std", type=float, default=0.0,
                    help="exploration noise of the training policy (dsim.learn noise_std; 0: none, the default)")
    ap.add_argument("--betas", type=float, nargs=2, default=(0.9, 0.999), help="Adam's beta1 beta2")
    ap.add_argument("--layer-norm", action="store_true", help="LayerNorm before each hidden activation")
    ap.add_argument("--critic-obs", choices=list(dl.CRITIC_OBS), default="auto",
                    help="what the pixel policy's critic reads (dsim.learn critic_obs; auto: the state)")
    ap.add_argument("--encoder-lr", type=float, default=None,
                    help="the pixel policy's CNN learning rate (dsim.learn encoder_lr; default: --lr)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--eval-envs", type=int, default=4, help="evaluation envs (held-out goals: seeds 1000..)")
    ap.add_argument("--goal", action="store_true", help="goals drawn per episode (--goal-range); goal-conditioned "
                    "policies against state alone and zero actions")
    ap.add_argument("--goal-range", type=float, nargs=2, default=[1.0, 5.0], metavar=("LO", "HI"),
                    help="--goal: goal x ~ U[LO, HI) m (goal.x_min, goal.x_max)")
    ap.add_argument("--relative", action="store_true", help="--goal: the goal relative to the start centre of mass "
                    "(goal.relative; its height that of the start: goal.y 0)")
    ap.add_argument("--kinds", nargs="+", help="a subset of the kinds to run (default: all of the mode's)")
    ap.add_argument("--out", default="visuomotor")
    ap.add_argument("--overwrite", action="store_true", help="replace the OUT-*.csv logs if they exist")
    ap.add_argument("--plot", nargs="+", metavar=("PNG", "CSV"), help="only plot the runs' OUT-KIND-sSEED.csv "
                    "training logs into PNG (the task's options as they were trained)")
    a = ap.parse_args()
    torch.set_num_threads(1)
    xr = a.goal_range if a.goal else (3.0, 3.0)
    task = dict(reward="dense", goal__x_min=xr[0], goal__x_max=xr[1], width=a.size, height=a.size, supersample=1)
    if a.goal and a.relative:
        task.update(goal__relative=True, goal__y=0.0)
    if a.plot:
        if len(a.plot) < 2:
            sys.exit("--plot PNG CSV [CSV ...]")
        plot(a.plot[0], a.plot[1:], task)
        return
    kinds = GOAL_KINDS if a.goal else KINDS
    names = a.kinds or list(kinds)
    rows = []
    for seed in a.seeds:
        for kind in names:
            ev, steps, cpu, cpu_ev = run_kind(a, seed, kind, kinds[kind], task)
            rows.append((seed, kind, ev, steps, cpu))
            print(f"seed {seed} {kind:11s}: evaluation return {ev:.4f} m closer, {steps} env steps, "
                  f"CPU {cpu:.0f} s training + {cpu_ev:.0f} s evaluation", flush=True)
    for kind in names:
        ev = [r[2] for r in rows if r[1] == kind]
        cpu = [r[4] for r in rows if r[1] == kind]
        print(f"{kind:11s}: median return {np.median(ev):.4f} (min {min(ev):.4f}, max {max(ev):.4f}), "
              f"median training CPU {np.median(cpu):.0f} s over seeds {a.seeds}")


if __name__ == "__main__":
    main()
