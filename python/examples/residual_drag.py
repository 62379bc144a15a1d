"""A hybrid model learns a force the simulator lacks: quadratic air drag.

    python python/examples/residual_drag.py [--train 20] [--test 10] [--iterations 60] [--drag 0.1]
        [--seed 0] [--out residual_drag.csv]

"Reality" is dsim's control-cloth (an 8 x 8 sheet thrown with an initial
velocity, its own aerodynamic model included) plus a quadratic drag
-c |v_i| v_i on every particle, applied step by step with the same API the
model uses (ds_env_set_external_force through dsim.residual.set_forces).
The model is the same simulator without it, plus a dsim.residual.ResidualForce
(an MLP of each particle's velocity, shared by the particles) whose force is
added at every step. It is trained end to end on the particle positions at
every step of --train observed throws (random initial velocities), the
gradient going through the physics into its weights, and evaluated on
--test other throws: the RMS position error per step and at the end,
without and with the residual, and the learned force against the true
drag at a few speeds. Writes the per-step curves to --out (CSV).
"""
import argparse
import csv
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import dsim.learn as dl  # noqa: E402
import dsim.residual as dr  # noqa: E402

CLOTH = dict(size_min=8, size_max=8, width=16, height=16, supersample=1, reward="dense", state="full")


def throws(n, rng):
    """Initial velocities (m/s): forwards and up, some sideways."""
    v = np.stack([rng.uniform(1, 5, n), rng.uniform(0, 4, n), rng.uniform(-2, 2, n)], 1)
    return v


def actions_of(ro, v):
    a = torch.zeros(ro.num_envs, ro.num_steps, ro.action_size, dtype=torch.float64)
    a[:, 0] = torch.from_numpy(v)
    return a


@torch.no_grad()
def reality(ro, acts, c, seed):
    """Positions N x H x n3 of throws with the drag -c |v| v added each step."""
    _, s = ro.reset(seed)
    n3 = (ro.state_size - 1) // 2
    xs = []
    for k in range(ro.num_steps):
        v = s[:, 1 + n3:1 + 2 * n3].reshape(ro.num_envs, -1, 3)
        dr.set_forces(ro, (-c * v.norm(dim=2, keepdim=True) * v).reshape(ro.num_envs, -1))
        ro.batch.step(acts[:, k].numpy())
        s = ro.state()
        xs.append(dr.positions(ro, s))
    return torch.stack(xs, 1)


def rmse_curve(pred, obs):
    """RMS over envs and particles of the position error (m), per step."""
    e = (pred - obs).reshape(pred.shape[0], pred.shape[1], -1, 3)
    return torch.sqrt((e ** 2).sum(3).mean((0, 2))).numpy()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", type=int, default=20)
    ap.add_argument("--test", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--drag", type=float, default=0.1, help="c of the drag -c|v|v, N s^2/m^2 per particle")
    ap.add_argument("--substeps", type=int, default=1440)
    ap.add_argument("--control-interval", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="residual_drag.csv")
    ap.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    a = ap.parse_args()
    if os.path.exists(a.out) and not a.overwrite:
        sys.exit(f"{a.out}: exists; refusing to replace it (--overwrite replaces it)")
    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    over = dict(CLOTH, substeps=a.substeps, control_interval=a.control_interval)
    t0 = time.time()
    tr = dl.Rollout("control-cloth", a.train, **over)
    te = dl.Rollout("control-cloth", a.test, **over)
    a_tr, a_te = actions_of(tr, throws(a.train, rng)), actions_of(te, throws(a.test, rng))
    obs_tr, obs_te = reality(tr, a_tr, a.drag, a.seed), reality(te, a_te, a.drag, a.seed)
    mass = float(tr.batch.param(0, "particle.mass")[0])
    model = dr.ResidualForce(tr, hidden=(32, 32), inputs="velocity", velocity_scale=5.0,
                             force_scale=mass * 9.8)
    with torch.no_grad():
        base = rmse_curve(dr.rollout(te, None, seed=a.seed, actions=a_te), obs_te)
        base_tr = float(((dr.rollout(tr, None, seed=a.seed, actions=a_tr) - obs_tr) ** 2).mean())
    print(f"control-cloth, {tr.num_steps} steps of {a.control_interval} substeps, "
          f"{(tr.state_size - 1) // 6} particles of {mass:g} kg, drag c = {a.drag:g}; "
          f"train {a.train} throws, test {a.test}", flush=True)
    print(f"physics alone: train loss {base_tr:.4g} m^2, held-out final RMSE {base[-1]:.4f} m", flush=True)
    hist = dr.fit(tr, model, obs_tr, seed=a.seed, actions=a_tr, iterations=a.iterations, lr=a.lr,
                  callback=lambda it, m, r: (it % 10 == 9 or it == 0) and print(
                      f"iteration {it + 1}: train loss {r['loss']:.4g} m^2 ({r['seconds']:.0f} s)", flush=True))
    with torch.no_grad():
        hyb = rmse_curve(dr.rollout(te, model, seed=a.seed, actions=a_te), obs_te)
    print(f"\nheld-out final-position RMSE: physics alone {base[-1]:.4f} m, hybrid {hyb[-1]:.4f} m "
          f"({base[-1] / max(hyb[-1], 1e-12):.1f}x lower); mean over steps {base.mean():.4f} m -> "
          f"{hyb.mean():.4f} m; train loss {hist[0]['loss']:.4g} -> {hist[-1]['loss']:.4g} m^2; "
          f"{time.time() - t0:.0f} s")
    print("step  RMSE physics alone (m)  RMSE hybrid (m)")
    for k in range(len(base)):
        if k % max(1, len(base) // 8) == 0 or k == len(base) - 1:
            print(f"{k:4d}  {base[k]:.4f}  {hyb[k]:.4f}")
    with torch.no_grad():  # the learned force against the true drag along -v
        print("speed (m/s)  true drag (N)  learned force along -v (N)")
        for sp in (1.0, 3.0, 5.0, 8.0):
            for d in (np.array([1.0, 0, 0]), np.array([0, -1.0, 0])):
                st = torch.zeros(1, tr.state_size, dtype=torch.float64)
                n3 = (tr.state_size - 1) // 2
                st[0, 1 + n3:1 + n3 + 3] = torch.from_numpy(sp * d)
                f = model(st)[0, :3].numpy()
                print(f"{sp:5.1f} {'x' if d[0] else '-y'}  {a.drag * sp * sp:8.3f}  {-f @ d:8.3f}")
    with open(a.out, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["step", "rmse_physics", "rmse_hybrid"])
        for k in range(len(base)):
            w.writerow([k, f"{base[k]:.6g}", f"{hyb[k]:.6g}"])


if __name__ == "__main__":
    main()
