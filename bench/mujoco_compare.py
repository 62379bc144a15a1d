#!/usr/bin/env python3
"""dsim and MuJoCo on the same MJCF files.

Run it through bench/mujoco-compare, which provides the Python environment
with the mujoco package and builds dsim's half (bench/bench_artic_mjcf).

Models (configs/models/): pendulum.xml, double_pendulum.xml, chain16.xml and
runner.xml, each loaded by both engines from the same file. The double
pendulum has no actuators; for the speed rows the script writes a copy with a
motor on each joint (double_pendulum_motors.xml in the work folder).

Fair settings. Both engines integrate with semi-implicit Euler (velocity
first, then positions with the new velocity). MuJoCo's Euler integrates joint
damping implicitly by default; the comparison turns that off (the eulerdamp
disable flag), so MuJoCo's Euler is the scheme dsim uses. Armature, damping
and joint springs come from the file in both; neither adds any by default.
Differences that remain are the models' own, and are reported, not hidden:
- joint limits: MuJoCo's are constraints (solref/solimp), dsim's a smooth
  one-sided spring-damper; the runner's torques are kept small enough to stay
  inside the ranges;
- motors with a ctrlrange: MuJoCo clamps the control, dsim bounds it
  smoothly (gear * tanh(u)); MuJoCo gets ctrl = tanh(u), the same torque;
- ground contact: MuJoCo's soft constraints against dsim's penalty spring
  (contact.ke, kd, kf, mu): the runner is compared in the air (started 1.5 m
  up, the feet never land within 0.5 s) and, for context only, on the ground.

Agreement: joint angles every 1 ms over 1 s (runner: 0.5 s) against MuJoCo
RK4 at 1e-5 s (its convergence: the same at 2e-5 s, printed); dsim at the
file's step (1 ms) and MuJoCo Euler at the same step, max abs error (rad; m for
the runner's slides).

Speed, one thread: forward steps/s over 1,000 steps (MuJoCo: mujoco.rollout,
the loop in C), median of 5; the gradient of L = sum_t |q_t|^2 over a
1,000-step rollout with respect to every action: dsim's adjoint (forward +
backward) against MuJoCo's mjd_transitionFD chained (forward rollout, one
transition Jacobian per step, forward differences, then the adjoint
recursion lambda_t = dl/dx_t + A_t^T lambda_{t+1}, dL/du_t = B_t^T
lambda_{t+1} in numpy), median of 5 (3 for the slow ones); perturbed full
rollouts (T nu + 1 of them) would cost more and are given as an estimate from
the measured forward rate.
"""
import argparse
import json
import math
import os
import subprocess
import time

import mujoco
import numpy as np

CLOCK = time.perf_counter
STEPS = 1000
REPS = 5


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def load(path):
    m = mujoco.MjModel.from_xml_path(path)
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_EULERDAMP)
    return m


def hinge_slide_names(m):
    """Names and qpos addresses of the hinge and slide joints."""
    out = []
    for j in range(m.njnt):
        if int(m.jnt_type[j]) in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE)):
            out.append((mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j), int(m.jnt_qposadr[j])))
    return out


def dsim_traj(args, path, ground, names, q0, actions):
    """dsim's joint values after each step, (T + 1) x len(names)."""
    T = len(actions)
    lines = [f"{T} {len(names)}", " ".join(names), " ".join(repr(float(v)) for v in q0)]
    lines += [" ".join(repr(float(v)) for v in row) for row in actions]
    cmd = [args.dsim, path, "traj"] + (["ground"] if ground else [])
    r = subprocess.run(cmd, input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    out = json.loads(r.stdout)
    return np.array(out["q"]), out["dt"]


def mj_traj(m, adr, q0, ctrl_of_t, dt, T, dt_out):
    """MuJoCo's joint values every dt_out over T samples, at step dt."""
    m.opt.timestep = dt
    d = mujoco.MjData(m)
    d.qpos[adr] = q0
    mujoco.mj_forward(m, d)
    sub = int(round(dt_out / dt))
    out = [d.qpos[adr].copy()]
    for t in range(T):
        if m.nu:
            d.ctrl[:] = ctrl_of_t(t)
        mujoco.mj_step(m, d, nstep=sub)
        out.append(d.qpos[adr].copy())
    return np.array(out)


def agreement(args, name, path, ground, q0_of, u_of, ctrl_map, seconds):
    """Max abs angle error of dsim and MuJoCo Euler (file step) against MuJoCo RK4 at 1e-5."""
    m = load(path)
    names = [n for n, _ in hinge_slide_names(m)]
    adr = [a for _, a in hinge_slide_names(m)]
    dt_file = m.opt.timestep
    T = int(round(seconds / dt_file))
    q0 = np.array([q0_of(n) for n in names])
    actions = np.array([u_of(t * dt_file) for t in range(T)]).reshape(T, m.nu)
    held = lambda t: ctrl_map(actions[t])  # zero-order hold over each step of the file
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    ref = mj_traj(m, adr, q0, held, 1e-5, T, dt_file)
    ref2 = mj_traj(m, adr, q0, held, 2e-5, T, dt_file)
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    eul = mj_traj(m, adr, q0, held, dt_file, T, dt_file)
    ds, ds_dt = dsim_traj(args, path, ground, names, q0, actions)
    assert abs(ds_dt - dt_file) < 1e-15, (ds_dt, dt_file)
    row = dict(model=name, seconds=seconds, dt=dt_file, joints=len(names),
               ref_converged=float(np.max(np.abs(ref - ref2))),
               dsim_err=float(np.max(np.abs(ds - ref))),
               mj_euler_err=float(np.max(np.abs(eul - ref))),
               dsim_vs_mj_euler=float(np.max(np.abs(ds - eul))),
               final_ref=[float(v) for v in ref[-1][:4]])
    return row


def speed_actions(nu, dt):
    t = np.arange(STEPS)[:, None]
    k = np.arange(nu)[None, :]
    return 0.5 * np.sin(4 * math.pi * t * dt + 0.7 * k)  # as bench_artic_mjcf.c's speed_action


def mj_start(m, ground):
    d = mujoco.MjData(m)
    if not ground:
        d.qpos[:] = 0.3  # hinge-only models, as bench_artic_mjcf.c
    mujoco.mj_forward(m, d)
    return d


def mj_forward_speed(m, ground, ctrl):
    import mujoco.rollout as rollout
    d = mj_start(m, ground)
    state = np.zeros(mujoco.mj_stateSize(m, mujoco.mjtState.mjSTATE_FULLPHYSICS))
    mujoco.mj_getState(m, d, state, mujoco.mjtState.mjSTATE_FULLPHYSICS)
    times = []
    for _ in range(REPS + 1):  # the first is a warm-up
        t0 = CLOCK()
        rollout.rollout(m, d, state[None, :], ctrl[None, :, :])
        times.append(CLOCK() - t0)
    return STEPS / median(times[1:])


def mj_gradient(m, ground, ctrl, reps):
    """dL/du of L = sum_t |qpos_t|^2 (hinge and slide models: qpos = q) by
    mjd_transitionFD chained; (seconds, gradient)."""
    nv, nu = m.nv, m.nu
    times, g = [], None
    for _ in range(reps):
        t0 = CLOCK()
        d = mj_start(m, ground)
        A = np.zeros((STEPS, 2 * nv + m.na, 2 * nv + m.na))
        B = np.zeros((STEPS, 2 * nv + m.na, nu))
        q = np.zeros((STEPS + 1, m.nq))
        q[0] = d.qpos
        for t in range(STEPS):
            d.ctrl[:] = ctrl[t]
            mujoco.mjd_transitionFD(m, d, 1e-6, 0, A[t], B[t], None, None)
            mujoco.mj_step(m, d)
            q[t + 1] = d.qpos
        lam = np.zeros(2 * nv + m.na)
        lam[:nv] = 2 * q[STEPS]
        g = np.zeros((STEPS, nu))
        for t in range(STEPS - 1, -1, -1):
            g[t] = B[t].T @ lam
            lam = A[t].T @ lam
            lam[:nv] += 2 * q[t]
        times.append(CLOCK() - t0)
    return median(times), g


def dsim_speed(args, path, ground):
    cmd = [args.dsim, path, "speed"] + (["ground"] if ground else [])
    return json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)


def motors_copy(args, path):
    """The double pendulum with a motor on each joint (the bundled file has none)."""
    text = open(path).read()
    act = ('  <actuator>\n    <motor name="shoulder" joint="shoulder" gear="1"/>\n'
           '    <motor name="elbow" joint="elbow" gear="1"/>\n  </actuator>\n</mujoco>')
    out = os.path.join(args.work, "double_pendulum_motors.xml")
    with open(out, "w") as f:
        f.write(text.replace("</mujoco>", act))
    return out


def speed(args, name, path, ground):
    m = load(path)
    m.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    ctrl = speed_actions(m.nu, m.opt.timestep)
    ds = dsim_speed(args, path, ground)
    mj_fwd = mj_forward_speed(m, ground, ctrl)
    reps = 1 if args.quick else (3 if m.nv * m.nu > 40 else REPS)
    mj_grad_s, g = mj_gradient(m, ground, ctrl, reps)
    perturbed = (STEPS * m.nu + 1) * STEPS / mj_fwd
    return dict(model=name, nv=m.nv, nu=m.nu, dsim_steps_per_s=ds["forward_steps_per_s"], mj_steps_per_s=mj_fwd,
                forward_ratio=ds["forward_steps_per_s"] / mj_fwd, dsim_grad_s=ds["gradient_s"], mj_fd_grad_s=mj_grad_s,
                grad_speedup=mj_grad_s / ds["gradient_s"], mj_perturbed_estimate_s=perturbed,
                grad_norm_dsim=ds["grad_norm"], grad_norm_mj=float(np.linalg.norm(g)),
                # the same loss and dynamics without contact; with it the contact models differ
                grad_rel_diff=None if ground else abs(ds["grad_norm"] - float(np.linalg.norm(g))) / ds["grad_norm"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsim", required=True)
    ap.add_argument("--src", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--quick", action="store_true", help="agreement only on the pendula, one gradient run")
    ap.add_argument("--json", help="write the figures here too")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="cpu: process CPU time for both engines (time spent descheduled on a loaded machine is not counted)")
    args = ap.parse_args()
    if args.clock == "cpu":
        global CLOCK
        CLOCK = time.process_time
        os.environ["DS_BENCH_CLOCK"] = "cpu"
    models = os.path.join(args.src, "configs", "models")
    p = lambda f: os.path.join(models, f)
    print(f"mujoco {mujoco.__version__}; numpy {np.__version__}; clock {args.clock}; load {open('/proc/loadavg').read().split()[:3]}")

    rows = []
    zero = lambda t: np.zeros(0)
    rows.append(agreement(args, "pendulum", p("pendulum.xml"), False, lambda n: 1.0,
                          lambda t: np.zeros(1), lambda u: u, 1.0))
    rows.append(agreement(args, "double pendulum", p("double_pendulum.xml"), False,
                          lambda n: {"shoulder": 1.0, "elbow": 0.5}[n], zero, lambda u: u, 1.0))
    if not args.quick:
        amp = 0.25  # small enough to keep every joint inside its range
        u_run = lambda t: amp * np.sin(2 * math.pi * 2.0 * t + np.arange(6))
        air = lambda n: 1.5 if n == "rootz" else 0.0
        rows.append(agreement(args, "runner, in the air", p("runner.xml"), True, air, u_run, np.tanh, 0.5))
        rows.append(agreement(args, "runner, on the ground", p("runner.xml"), True, lambda n: 0.0, u_run,
                              np.tanh, 0.5))
    print("\nagreement: max |q - q_ref| (rad, m), reference MuJoCo RK4 at 1e-5 s")
    print(f"{'model':24s} {'T (s)':>6s} {'dt':>7s} {'ref conv':>9s} {'dsim':>9s} {'MJ Euler':>9s} {'dsim-MJE':>9s}")
    for r in rows:
        print(f"{r['model']:24s} {r['seconds']:6.2f} {r['dt']:7.0e} {r['ref_converged']:9.2e} {r['dsim_err']:9.2e} "
              f"{r['mj_euler_err']:9.2e} {r['dsim_vs_mj_euler']:9.2e}")

    srows = []
    srows.append(speed(args, "double pendulum", motors_copy(args, p("double_pendulum.xml")), False))
    srows.append(speed(args, "16-link chain", p("chain16.xml"), False))
    srows.append(speed(args, "runner", p("runner.xml"), True))
    print(f"\nspeed, one thread, {STEPS} steps: forward steps/s; gradient of the {STEPS}-step loss w.r.t. every action")
    print(f"{'model':16s} {'nv':>3s} {'nu':>3s} {'dsim st/s':>10s} {'MJ st/s':>10s} {'ratio':>6s} "
          f"{'dsim grad':>10s} {'MJ FD grad':>10s} {'speedup':>8s} {'MJ pert.':>9s} {'|g| rel diff':>12s}")
    for r in srows:
        print(f"{r['model']:16s} {r['nv']:3d} {r['nu']:3d} {r['dsim_steps_per_s']:10.0f} {r['mj_steps_per_s']:10.0f} "
              f"{r['forward_ratio']:6.2f} {r['dsim_grad_s']:10.4f} {r['mj_fd_grad_s']:10.4f} {r['grad_speedup']:8.1f} "
              f"{r['mj_perturbed_estimate_s']:9.1f} "
              + (f"{r['grad_rel_diff']:12.1e}" if r['grad_rel_diff'] is not None else f"{'(contact)':>12s}"))
    print(f"load after: {open('/proc/loadavg').read().split()[:3]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(mujoco=mujoco.__version__, agreement=rows, speed=srows), f, indent=1)


if __name__ == "__main__":
    main()
