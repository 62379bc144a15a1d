"""Closed loop against open loop on the walker, under perturbations neither
controller saw in training.

    python python/examples/closed_vs_open.py [--seeds 0 1 2] [--substeps 4800]
        [--closed-iterations 800] [--val-every 20] [--open-iterations N]
        [--randomize [--val-randomized]] [--noise-std 0.35] [--betas 0.7 0.95]
        [--no-layer-norm] [--lr-schedule linear] [--out closed_vs_open.csv]
    python python/examples/closed_vs_open.py --table A.csv B.csv ...

Task: forward progress of the walker's centre of mass (m) in an episode of
--substeps substeps (32 per control step: 150 steps at 4800). Per seed S:
  closed loop an MLP policy of the full state (dsim.learn.train_shac on the
              dense reward, whose episode sum is the progress), trained for
              --closed-iterations updates of 8 envs x 16-step windows,
              with learn_walker.py's settings (exploration noise 0.35,
              Adam betas 0.7 0.95, LayerNorm, linear decay; docs/learning.md
              quotes tables of the earlier deterministic settings too:
              --noise-std 0 --betas 0.9 0.999 --no-layer-norm
              --lr-schedule constant);
  open loop   the built-in sinusoid controller of `dsim run` (dsim.Run,
              method state: the centre-of-mass loss to a goal --goal m ahead,
              far enough that the optimiser pushes for progress), one
              150-step episode per iteration, --open-iterations iterations;
              by default as many as make the closed loop's training env
              steps (whole episodes, rounded up), so both get the same number
              of simulated steps.
With --randomize the closed loop trains under domain randomisation
(friction, start and pushes drawn per env and episode, in ranges short of
the test conditions: see domain_randomisation); the open loop is unchanged.
--val-randomized validates the closed loop on 4 episodes drawn from that
distribution (the same draws every time) instead of the nominal episode.
Which controller is kept (the same rule for both: the best one on the
unperturbed episode, chosen during training):
  open loop   its lowest-loss iteration (the loss of its training episode),
              whose actions are then replayed step by step;
  closed loop every --val-every updates (and after the last) the policy is
              evaluated, forward only, on validation episodes (seeds
              2000..2003, no perturbation) and a copy of its state_dict
              (weights and observation statistics) is kept when its mean
              progress is the highest so far; that copy is tested. The last
              policy is tested too (column closed_last of --out).
The walker's reset draws nothing that changes its dynamics (only the goal,
which the dense reward and the state observation ignore), so every
unperturbed episode is the same: validation and the nominal test are the
same episode, for both controllers, and only the perturbed conditions are
unseen.
Both are then tested, forward only, on 4 episodes (seeds 1000..1003) under
each condition:
  nominal     the training conditions;
  push        a push in the x-y plane, random direction per episode, on
              every particle for 2 steps at mid-episode (an acceleration of
              --push m/s^2, i.e. a velocity change of push x 2 steps x 1/60 s;
              ds_env_set_external_force through dsim.residual.set_forces);
  start       a shifted start: dropped from 0.2 m higher and thrown back at
              0.5 m/s (env.scene.start, env.scene.velocity);
  mu 0.2, mu 1.0  changed ground friction (env.contact.mu; trained at 0.5).
Prints a table of the progress (median over seeds of each seed's mean over
the 4 episodes, per-seed values after it, and the drop from nominal) and
writes every value, with each side's training cost (env steps, CPU seconds
of the process, the chosen iteration), to --out (CSV). --table only prints
the table of one or more such CSVs (seeds run as separate processes).
"""
import argparse
import copy
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
EVAL_SEED, EVAL_ENVS, VAL_SEED = 1000, 4, 2000


class _TrainerIter(ctypes.Structure):
    """dsTrainerIter of dsim/controller.h (what ds_run_step reports)."""
    _fields_ = [("iteration", ctypes.c_int), ("loss", ctypes.c_double), ("metric", ctypes.c_double),
                ("grad_norm", ctypes.c_double), ("lr", ctypes.c_double), ("params", ctypes.POINTER(ctypes.c_double)),
                ("nparams", ctypes.c_int), ("actions", dsim._lib.RP), ("nsteps", ctypes.c_int),
                ("action_dim", ctypes.c_int), ("backtracks", ctypes.c_int), ("rejected", ctypes.c_int)]


def train_open(seed, substeps, goal, iterations, width):
    """The sinusoid controller of `dsim run` (dsim.Run, iteration by
    iteration). Returns the actions (S x A) of its lowest-loss iteration, the
    one a run returns, with that iteration, its metric (the progress, m), the
    last iteration's metric, the env steps simulated (every episode run,
    backtracked ones included) and the CPU seconds."""
    ov = {"env.physics.substeps": substeps, "env.goal.x_min": goal, "env.goal.x_max": goal,
          "env.render.width": width, "env.render.height": width, "env.render.supersample": 1,
          "run.method": "state", "run.iterations": iterations, "run.seed": seed, "run.threads": 1}
    best, res, steps, c0 = np.inf, {}, 0, time.process_time()
    # dsim.Run.step keeps the iteration's report to itself; its actions come
    # from ds_run_step's dsTrainerIter directly
    with dsim.Run("walker", ov, log=False) as run:
        if not run.config_path:  # the class's defaults are not the bundled controller settings
            raise dsim.DsimError("walker", "the bundled configs/walker.json was not found (the library finds it "
                                 "beside itself or in DSIM_CONFIG_DIR); the open loop runs its controller settings",
                                 dsim._lib.DS_ERR_NOTFOUND)
        it = _TrainerIter()
        while not run.done:
            rc = dsim._lib.run_step_c(run._p, ctypes.byref(it))
            if rc:
                raise dsim.DsimError("walker", "open-loop iteration failed", rc, dsim._lib.run_error(run._p))
            steps += it.nsteps * (1 + it.backtracks)
            if it.loss < best:
                best = it.loss
                res = dict(best_iteration=it.iteration, metric=it.metric, actions=np.ctypeslib.as_array(
                    it.actions, shape=(it.nsteps, it.action_dim)).astype(np.float64))
    return dict(res, last_metric=it.metric, iterations=iterations, env_steps=steps, cpu=time.process_time() - c0)


def evaluate(act_fn, over, push, rng, label, seed=EVAL_SEED):
    """Progress (m) of EVAL_ENVS episodes (seeds seed, seed + 1, ...):
    act_fn(k, obs) gives the actions."""
    ls = dsim.Lockstep("walker", EVAL_ENVS, label=label, gradients=False, **over)
    obs = ls.reset(seed)
    mass = np.stack([ls.param(i, "particle.mass") for i in range(EVAL_ENVS)])     # N x P
    T, total = ls.num_steps, np.zeros(EVAL_ENVS)
    ang = rng.uniform(0, 2 * np.pi, EVAL_ENVS) if push else None
    for k in range(T):
        if push and k == T // 2:
            dirs = np.stack([np.cos(ang), np.sin(ang), np.zeros(EVAL_ENVS)], 1)   # N x 3
            dr.set_forces(ls, (mass[:, :, None] * push * dirs[:, None, :]).reshape(EVAL_ENVS, -1))
        if push and k == T // 2 + 2:
            dr.set_forces(ls, None)
        obs, r = ls.step(act_fn(k, obs))
        total += r
    ls.close()
    return float(total.mean())


class _Lockstep:
    """A dsim.Lockstep seen as the hooks of domain_randomisation see a
    dsim.learn.Rollout (batch, num_envs, num_steps)."""

    def __init__(self, ls):
        self.batch, self.num_envs, self.num_steps = ls, ls.num_envs, ls.num_steps


def evaluate_randomized(act_fn, over, a, seed):
    """Progress (m) of EVAL_ENVS episodes drawn from the training
    distribution of --randomize (its hooks, generator episode_rng(seed, 0))."""
    ls = dsim.Lockstep("walker", EVAL_ENVS, label="val", gradients=False, **over)
    hooks, view, rng = domain_randomisation(a), _Lockstep(ls), dl.episode_rng(seed, 0)
    ls.reset(seed)
    hooks["randomize"](view, 0, rng)
    obs = ls.reset(seed)
    total = np.zeros(EVAL_ENVS)
    for k in range(ls.num_steps):
        hooks["perturb"](view, k, rng)
        obs, r = ls.step(act_fn(k, obs))
        total += r
    ls.close()
    return float(total.mean())


def policy_fn(policy):
    return lambda k, o: policy(torch.from_numpy(o)).numpy()


def domain_randomisation(a):
    """randomize and perturb hooks of dsim.learn for --randomize: every
    training episode, per env, a friction coefficient mu ~ U(a.mu_range), a
    start raised by U(0, a.lift_max) m and thrown back at U(0, a.throw_max)
    m/s (initial_position, initial_velocity), and with probability 1/2 a
    push of U(0, a.push_max) m/s^2 in a random x-y direction for 2 steps at
    a random step of the middle half of the episode. The ranges stop short
    of the test conditions (mu 0.2 and 1.0, 0.2 m and 0.5 m/s, 30 m/s^2),
    so those stay unseen."""
    plan = {}

    def randomize(ro, episode, rng):
        b, n, T = ro.batch, ro.num_envs, ro.num_steps
        if "x0" not in plan:  # the env's own start, before any change
            plan["x0"] = [b.param(i, "initial_position").reshape(-1, 3) for i in range(n)]
            plan["mass"] = np.stack([b.param(i, "particle.mass") for i in range(n)])
        mu = rng.uniform(a.mu_range[0], a.mu_range[1], n)
        lift, throw = rng.uniform(0, a.lift_max, n), rng.uniform(0, a.throw_max, n)
        pushed = rng.uniform(size=n) < 0.5
        at = rng.integers(T // 4, 3 * T // 4, n)
        ang, acc = rng.uniform(0, 2 * np.pi, n), rng.uniform(0, a.push_max, n) * pushed
        for i in range(n):
            b.set_param(i, "contact.mu", [mu[i]])
            x = plan["x0"][i].copy()
            x[:, 1] += lift[i]
            v = np.zeros_like(x)
            v[:, 0] = -throw[i]
            b.set_param(i, "initial_position", x.ravel())
            b.set_param(i, "initial_velocity", v.ravel())
        plan.update(at=at, dirs=np.stack([np.cos(ang), np.sin(ang), np.zeros(n)], 1) * acc[:, None])

    def perturb(ro, k, rng):
        on = (k >= plan["at"]) & (k < plan["at"] + 2)  # held from step k on: set (or cleared) every step
        f = plan["mass"][:, :, None] * (plan["dirs"] * on[:, None])[:, None, :]
        dr.set_forces(ro, f.reshape(ro.num_envs, -1))

    return dict(randomize=randomize, perturb=perturb)


def train_closed(seed, a, base):
    """SHAC for a.closed_iterations updates, validated every a.val_every
    updates and after the last (VAL_SEED.., no perturbation). Returns the
    best-validated policy (a copy of its state_dict loaded into a copy of the
    policy), the last policy, the update and validation progress of each,
    the env steps trained (the validations' forward steps apart) and the CPU
    seconds (validations included)."""
    best = dict(val=-np.inf, state=None, update=0, env_steps=0)
    curve, c0 = [], time.process_time()

    def validate(it, policy, env_steps):
        if (it + 1) % a.val_every and it + 1 != a.closed_iterations:
            return
        with torch.no_grad():
            if a.val_randomized:
                v = evaluate_randomized(policy_fn(policy), base, a, VAL_SEED)
            else:
                v = evaluate(policy_fn(policy), base, 0.0, None, "val", seed=VAL_SEED)
        curve.append((it + 1, env_steps, v))
        if v > best["val"]:
            best.update(val=v, update=it + 1, env_steps=env_steps,
                        state={k: t.detach().clone() for k, t in policy.state_dict().items()})

    hooks = domain_randomisation(a) if a.randomize else {}
    out = dl.train_shac("walker", num_envs=a.envs, horizon=a.horizon, iterations=a.closed_iterations,
                        seed=seed, hidden=(128, 128), callback=validate, noise_std=a.noise_std or None,
                        betas=tuple(a.betas), layer_norm=a.layer_norm, lr_schedule=a.lr_schedule, **hooks, **base)
    last = out["policy"]
    chosen = copy.deepcopy(last)
    chosen.load_state_dict(best["state"])
    return dict(policy=chosen, last=last, best_update=best["update"], best_val=best["val"],
                best_env_steps=best["env_steps"], last_val=curve[-1][2], curve=curve,
                env_steps=out["history"][-1]["env_steps"], episode_steps=out["rollout"].num_steps,
                val_steps=len(curve) * EVAL_ENVS * out["rollout"].num_steps, cpu=time.process_time() - c0)


def shac_settings(a) -> str:
    """The closed loop's trainer settings, as a CSV cell."""
    return (f"noise {a.noise_std:g} betas {a.betas[0]:g} {a.betas[1]:g} "
            f"{'layer-norm' if a.layer_norm else 'no-layer-norm'} lr {a.lr_schedule}")


def run_seed(seed, a, base):
    """Train both controllers of one seed and test them under every
    condition: one CSV row per condition."""
    closed = train_closed(seed, a, base)
    n_open = a.open_iterations or -(-closed["env_steps"] // closed["episode_steps"])
    opn = train_open(seed, a.substeps, a.goal, n_open, 16)
    print(f"seed {seed}: closed loop {closed['cpu']:.0f} s CPU, {a.closed_iterations} updates, "
          f"{closed['env_steps']} env steps (+{closed['val_steps']} validating); kept update {closed['best_update']} "
          f"(validation {closed['best_val']:.3f} m; last {closed['last_val']:.3f} m); "
          f"open loop {opn['cpu']:.0f} s CPU, {n_open} iterations, {opn['env_steps']} env steps; "
          f"kept iteration {opn['best_iteration']} "
          f"(progress {opn['metric']:.3f} m; last {opn['last_metric']:.3f} m)", flush=True)
    print("  validation (updates, env steps, m): " + ", ".join(f"{u} {e} {v:.2f}" for u, e, v in closed["curve"]),
          flush=True)
    acts, rows = opn["actions"], []
    cost = dict(open_iterations=n_open, open_kept=opn["best_iteration"], open_env_steps=opn["env_steps"],
                open_cpu=f"{opn['cpu']:.1f}", closed_updates=a.closed_iterations, closed_kept=closed["best_update"],
                closed_env_steps=closed["env_steps"], closed_val_steps=closed["val_steps"],
                closed_cpu=f"{closed['cpu']:.1f}", randomized=int(a.randomize),
                val_randomized=int(a.val_randomized), shac=shac_settings(a))
    for name, extra in CONDITIONS:
        over = dict(base, **extra)
        push = a.push if name == "push" else 0.0
        rng = [np.random.default_rng(seed + 17) for _ in range(3)]  # the same pushes for all three
        with torch.no_grad():
            p_open = evaluate(lambda k, o: np.repeat(acts[min(k, len(acts) - 1)][None], EVAL_ENVS, 0),
                              over, push, rng[0], "open")
            p_closed = evaluate(policy_fn(closed["policy"]), over, push, rng[1], "closed")
            p_last = evaluate(policy_fn(closed["last"]), over, push, rng[2], "last")
        rows.append(dict(seed=seed, condition=name, open=p_open, closed=p_closed, closed_last=p_last, **cost))
        print(f"  {name:8s} open {p_open:7.3f} m   closed {p_closed:7.3f} m   closed (last update) {p_last:7.3f} m",
              flush=True)
    return rows


def _cell(vals, fmt="{:.2f}"):
    return f"{fmt.format(statistics.median(vals))} ({', '.join(fmt.format(v) for v in vals)})"


def print_table(rows):
    """Markdown tables: progress per condition (median over seeds, per-seed
    values in brackets), its change from nominal, and each side's cost."""
    seeds = sorted({int(r["seed"]) for r in rows})
    val = {(int(r["seed"]), r["condition"], k): float(r[k]) for r in rows for k in ("open", "closed", "closed_last")}
    cols = [("open", "open loop (sinusoid, `dsim run`)"), ("closed", "closed loop (MLP, SHAC, kept)"),
            ("closed_last", "closed loop, last update")]
    print(f"progress (m), median over seeds {seeds} of the mean of {EVAL_ENVS} episodes; per seed in brackets\n")
    print("| condition | " + " | ".join(c for _, c in cols) + " |\n|---|---|---|---|")
    for name, _ in CONDITIONS:
        print(f"| {name} | " + " | ".join(_cell([val[s, name, k] for s in seeds]) for k, _ in cols) + " |")
    print("\nchange from nominal, % (median over seeds of each seed's (condition - nominal) / nominal)\n")
    print("| condition | " + " | ".join(c for _, c in cols) + " |\n|---|---|---|---|")
    for name, _ in CONDITIONS[1:]:
        print(f"| {name} | " + " | ".join(_cell([100 * (val[s, name, k] / val[s, 'nominal', k] - 1) for s in seeds],
                                                "{:+.0f}") for k, _ in cols) + " |")
    print("\n| seed | open: iterations (kept), env steps, CPU s | closed: updates (kept), env steps "
          "(+ validation), CPU s |\n|---|---|---|")
    for s in seeds:
        r = next(r for r in rows if int(r["seed"]) == s)
        print(f"| {s} | {r['open_iterations']} ({r['open_kept']}), {int(r['open_env_steps']):,}, {r['open_cpu']} | "
              f"{r['closed_updates']} ({r['closed_kept']}), {int(r['closed_env_steps']):,} "
              f"(+{int(r['closed_val_steps']):,}), {r['closed_cpu']} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--substeps", type=int, default=4800)
    ap.add_argument("--goal", type=float, default=10.0)
    ap.add_argument("--open-iterations", type=int, default=0,
                    help="0: the closed loop's training env steps in whole episodes")
    ap.add_argument("--closed-iterations", type=int, default=800)
    ap.add_argument("--val-every", type=int, default=20, help="validate the closed loop every K updates")
    ap.add_argument("--envs", type=int, default=8)
    ap.add_argument("--horizon", type=int, default=16)
    ap.add_argument("--push", type=float, default=30.0, help="push acceleration, m/s^2, for 2 steps")
    ap.add_argument("--randomize", action="store_true",
                    help="train the closed loop with domain randomisation (friction, start, pushes; ranges below)")
    ap.add_argument("--mu-range", type=float, nargs=2, default=[0.3, 0.8], help="--randomize: friction range")
    ap.add_argument("--lift-max", type=float, default=0.1, help="--randomize: start raised by up to this, m")
    ap.add_argument("--throw-max", type=float, default=0.25, help="--randomize: thrown back at up to this, m/s")
    ap.add_argument("--push-max", type=float, default=20.0, help="--randomize: push up to this, m/s^2, 2 steps")
    ap.add_argument("--val-randomized", action="store_true",
                    help="validate the closed loop on episodes of the --randomize distribution (fixed draws) "
                    "instead of the nominal one")
    ap.add_argument("--noise-std", type=float, default=0.35,
                    help="the closed loop's exploration noise (dsim.learn noise_std; 0: deterministic)")
    ap.add_argument("--betas", type=float, nargs=2, default=(0.7, 0.95), help="Adam's beta1 beta2 of the closed loop")
    ap.add_argument("--layer-norm", action=argparse.BooleanOptionalAction, default=True,
                    help="LayerNorm in the closed loop's networks")
    ap.add_argument("--lr-schedule", choices=list(dl.LR_SCHEDULES), default="linear",
                    help="the closed loop's learning-rate schedule")
    ap.add_argument("--out", default="closed_vs_open.csv")
    ap.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    ap.add_argument("--table", nargs="+", metavar="CSV", help="only print the table of these CSVs")
    a = ap.parse_args()
    if a.table:
        rows = []
        for path in a.table:
            with open(path, newline="") as fh:
                rows += list(csv.DictReader(fh))
        print_table(rows)
        return
    if os.path.exists(a.out) and not a.overwrite:
        sys.exit(f"{a.out}: exists; refusing to replace it (--overwrite replaces it)")
    torch.set_num_threads(1)
    dsim._lib.set_num_threads(1)
    base = dict(substeps=a.substeps, width=16, height=16, supersample=1, state="full", reward="dense")
    rows, t0 = [], time.time()
    for seed in a.seeds:
        rows += run_seed(seed, a, base)
        with open(a.out, "w", newline="") as fh:  # after every seed: a stopped run keeps what it finished
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    print(f"\n{time.time() - t0:.0f} s wall, {time.process_time():.0f} s CPU in all\n")
    print_table(rows)

if __name__ == "__main__":
    main()
