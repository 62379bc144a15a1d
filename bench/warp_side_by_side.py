#!/usr/bin/env python3
"""dsim and NVIDIA Warp (warp.sim, CPU device) on the same scenes.

Run it through bench/warp-side-by-side, which provides the Python
environment with warp-lang and builds dsim's half (bench/side_by_side_dsim).

Scenes (free flight: no ground, gravity on):
  soft-15x15x1   tet grid of 15 x 15 x 1 cells (Warp's add_soft_grid: 5 tets
                 per cell, 1,125 tets)
  soft-40x40x4   40 x 40 x 4 cells (32,000 tets)
  cloth-31x31    add_cloth_grid of 31 x 31 cells (1,922 triangles and the
                 bending edges Warp adds)

Both engines simulate the same model: the Warp builder makes it and this
script hands its particles, masses, elements and rest shapes to dsim, so the
element counts and the mass distribution are the same. Warp's soft grid also
adds its surface triangles as membrane elements; they are removed here (a
tet body in dsim has none). The body starts out of its rest shape
(stretched along x) and spinning, so the elastic forces work throughout.

Agreement: the centre of mass at the end, the loss L = sum_i |x_i(T)|^2 / N
and |dL/dv0| (the gradient with respect to every particle's initial
velocity, from each engine's backward) must agree within the tolerances
printed. Warp's simulation runs in single precision, dsim in double (its
default build), so the tolerances are those of float32 over the episode
(measured: 1e-7 to 6e-7 on the soft grids; the cloth's gradient differs by
3e-4 because Warp takes the bending angle as acos(cos theta) with a sign,
whose derivative is ill-conditioned near a flat hinge in float32, where dsim
uses atan2).

Timings: forward, and forward + backward (Warp: wp.Tape over the episode's
states on the CPU device; dsim: its tape), medians of --reps runs after a
warm-up run, in ns per element-substep, with the ratio Warp / dsim (> 1:
dsim faster). Warp's CPU kernels run on one thread; dsim is shown with 1 and
2 threads.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

# Material and time settings. Warp's tet model is dflex's stable Neo-Hookean,
# the same family as dsim's (docs: FORMULAS "Tet stable Neo-Hookean"); k_mu,
# k_lambda are densities per rest volume in both (alpha = 1 + 3/4 k_mu/k_lambda
# in both). Damping is 0: Warp damps the volume term with the vertices'
# absolute velocities, dsim with velocities relative to vertex 0 (they differ
# for a moving body). Triangles: Warp's tri_ke, tri_ka, tri_kd are dsim's
# k_mu, k_lambda, k_damp; bending edge_ke, edge_kd are dsim's ke, kd; lift
# and drag are 0 (Warp averages the vertex velocities with 0.3333, dsim with
# 1/3).
SOFT = dict(cell=0.1, density=1000.0, k_mu=1.0e4, k_lambda=1.0e4, k_damp=0.0, dt=1.0e-3, substeps=400)
CLOTH = dict(cell=0.1, mass=0.01, k_mu=100.0, k_lambda=1.0e3, k_damp=0.0, bend_ke=10.0, bend_kd=0.0, dt=5.0e-4,
             substeps=800)
GRAVITY = (0.0, -9.8, 0.0)
STRETCH = 1.1      # initial stretch along x (soft grid; cloth: 1.05)
SPIN = 2.0         # initial angular velocity about the body's axis, rad/s
VLIN = (1.0, 2.0, 0.5)

CLOCK = time.perf_counter  # --clock cpu: time.process_time

# Agreement tolerances (relative): float32 against float64 over the episode,
# each some 10 to 100 times what was measured.
TOL = dict(com=1e-5, loss=1e-5, grad=2e-3)


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def start_state(rest, axis, stretch, center):
    """Stretched positions and a spin about `axis` (1: y, 2: z) through center."""
    x = rest.copy()
    x[:, 0] = center[0] + stretch * (rest[:, 0] - center[0])
    r = x - center
    w = np.zeros(3)
    w[axis] = SPIN
    v = np.cross(np.broadcast_to(w, r.shape), r) + np.array(VLIN)
    return x, v


def build_warp(wp, sim, scene):
    b = sim.ModelBuilder(gravity=GRAVITY[1])
    if scene.startswith("soft"):
        nx, ny, nz = (int(s) for s in scene.split("-")[1].split("x"))
        c = SOFT["cell"]
        b.add_soft_grid(pos=wp.vec3(0.0, 1.0, 0.0), rot=wp.quat_identity(), vel=wp.vec3(0.0, 0.0, 0.0),
                        dim_x=nx, dim_y=ny, dim_z=nz, cell_x=c, cell_y=c, cell_z=c, density=SOFT["density"],
                        k_mu=SOFT["k_mu"], k_lambda=SOFT["k_lambda"], k_damp=SOFT["k_damp"],
                        tri_ke=0.0, tri_ka=0.0, tri_kd=0.0, tri_drag=0.0, tri_lift=0.0)
        # the surface triangles are membrane elements in Warp: not part of a tet body
        for name in ("tri_indices", "tri_poses", "tri_activations", "tri_materials", "tri_areas"):
            lst = getattr(b, name, None)
            if isinstance(lst, list):
                lst.clear()
        cfg, axis, stretch = SOFT, 1, STRETCH
    else:
        n = int(scene.split("-")[1].split("x")[0])
        c = CLOTH["cell"]
        b.add_cloth_grid(pos=wp.vec3(0.0, 1.0, 0.0), rot=wp.quat_identity(), vel=wp.vec3(0.0, 0.0, 0.0),
                         dim_x=n, dim_y=n, cell_x=c, cell_y=c, mass=CLOTH["mass"], tri_ke=CLOTH["k_mu"],
                         tri_ka=CLOTH["k_lambda"], tri_kd=CLOTH["k_damp"], tri_drag=0.0, tri_lift=0.0,
                         edge_ke=CLOTH["bend_ke"], edge_kd=CLOTH["bend_kd"])
        cfg, axis, stretch = CLOTH, 2, 1.05
    model = b.finalize(device="cpu", requires_grad=True)
    model.ground = False
    model.particle_max_radius = 0.0   # no particle-particle contact
    model.enable_tri_collisions = False
    rest = model.particle_q.numpy().astype(np.float64)
    mass = model.particle_mass.numpy().astype(np.float64)
    center = (rest * mass[:, None]).sum(0) / mass.sum()
    x0, v0 = start_state(rest, axis, stretch, center)
    x0 = x0.astype(np.float32)
    v0 = v0.astype(np.float32)
    model.particle_q.assign(x0)
    model.particle_qd.assign(v0)
    return model, cfg, rest, x0, v0, mass


def write_scene(path, model, cfg, rest, x0, v0, mass):
    """The model for dsim: rest positions (rest shapes), start positions and
    velocities (Warp's, float32 values), masses, elements."""
    tets = model.tet_indices.numpy() if model.tet_count else np.zeros((0, 4), int)
    tris = model.tri_indices.numpy() if model.tri_count else np.zeros((0, 3), int)
    edges = model.edge_indices.numpy() if model.edge_count else np.zeros((0, 4), int)
    edges = edges[(edges >= 0).all(axis=1)]  # boundary edges (-1: no second triangle) carry no bending
    with open(path, "w") as f:
        f.write("dt %.17g\nsubsteps %d\ngravity %.17g %.17g %.17g\n" % ((cfg["dt"], cfg["substeps"]) + GRAVITY))
        f.write("tet_material %.17g %.17g %.17g\n" % (cfg.get("k_mu", 0), cfg.get("k_lambda", 0), cfg.get("k_damp", 0)))
        f.write("tri_material %.17g %.17g %.17g\n" % (cfg.get("k_mu", 0), cfg.get("k_lambda", 0), cfg.get("k_damp", 0)))
        f.write("bend_material %.17g %.17g\n" % (cfg.get("bend_ke", 0), cfg.get("bend_kd", 0)))
        f.write("particles %d\n" % len(rest))
        for i in range(len(rest)):
            f.write("%.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g %.17g\n" % (
                tuple(rest[i]) + tuple(float(t) for t in x0[i]) + tuple(float(t) for t in v0[i]) + (mass[i],)))
        f.write("tets %d\n" % len(tets))
        for t in tets:
            f.write("%d %d %d %d\n" % tuple(t))
        f.write("tris %d\n" % len(tris))
        for t in tris:
            f.write("%d %d %d\n" % tuple(t))
        f.write("bends %d\n" % len(edges))
        for t in edges:
            f.write("%d %d %d %d\n" % tuple(t))
    return len(tets) + len(tris) + len(edges)


def warp_runs(wp, sim, model, cfg, reps):
    T, dt = cfg["substeps"], cfg["dt"]
    n = model.particle_count
    integ = sim.SemiImplicitIntegrator()

    @wp.kernel
    def spread_loss(x: wp.array(dtype=wp.vec3), inv_n: float, loss: wp.array(dtype=float)):
        i = wp.tid()
        wp.atomic_add(loss, 0, wp.dot(x[i], x[i]) * inv_n)

    def forward():
        s0, s1 = model.state(), model.state()
        t0 = CLOCK()
        for _ in range(T):
            s0.clear_forces()
            integ.simulate(model, s0, s1, dt)
            s0, s1 = s1, s0
        wp.synchronize()
        return CLOCK() - t0, s0

    states = [model.state(requires_grad=True) for _ in range(T + 1)]
    loss = wp.zeros(1, dtype=float, device="cpu", requires_grad=True)

    def fwdbwd():
        for s in states:
            s.clear_forces()
        loss.zero_()
        tape = wp.Tape()
        t0 = CLOCK()
        with tape:
            for t in range(T):
                integ.simulate(model, states[t], states[t + 1], dt)
            wp.launch(spread_loss, dim=n, inputs=[states[T].particle_q, 1.0 / n], outputs=[loss], device="cpu")
        tape.backward(loss)
        wp.synchronize()
        el = CLOCK() - t0
        g = states[0].particle_qd.grad.numpy().astype(np.float64)
        tape.zero()
        return el, g

    forward()
    fwdbwd()  # warm-up: kernels are compiled on first use
    tf, tb = [], []
    for _ in range(reps):
        tf.append(forward()[0])
        el, g = fwdbwd()
        tb.append(el)
    xT = states[T].particle_q.numpy().astype(np.float64)
    return tf, tb, xT, float(loss.numpy()[0]), float(np.linalg.norm(g))


def dsim_runs(prog, scene_path, threads, reps, xt_path=None):
    cmd = [prog, scene_path, str(threads), str(reps)] + ([xt_path] if xt_path else [])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    res = {}
    for line in out.splitlines():
        k, *v = line.split()
        res[k] = [float(t) for t in v]
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsim", required=True, help="the side_by_side_dsim program")
    ap.add_argument("--work", required=True, help="folder for scene files and Warp's kernel cache")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", default="1,2", help="dsim thread counts")
    ap.add_argument("--scenes", default="soft-15x15x1,soft-40x40x4,cloth-31x31")
    ap.add_argument("--quick", action="store_true", help="a tenth of the substeps (smoke run)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: process CPU time (with --threads 1: steadier on a shared machine)")
    args = ap.parse_args()
    global CLOCK
    if args.clock == "cpu":
        CLOCK = time.process_time
        os.environ["BENCH_CLOCK"] = "cpu"
    os.makedirs(args.work, exist_ok=True)
    import warp as wp
    wp.config.kernel_cache_dir = os.path.join(args.work, "kernel-cache")
    wp.config.quiet = True
    wp.init()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import warp.sim as sim
    print("warp %s (CPU device, float32), dsim %s; median of %d, %s time, load %s" % (
        wp.__version__, args.dsim, args.reps, args.clock, " ".join("%.2f" % x for x in os.getloadavg())))
    threads = [int(t) for t in args.threads.split(",")]
    fail = 0
    rows = []
    for scene in args.scenes.split(","):
        model, cfg, rest, x0, v0, mass = build_warp(wp, sim, scene)
        cfg = dict(cfg)
        if args.quick:
            cfg["substeps"] = max(10, cfg["substeps"] // 10)
        path = os.path.join(args.work, scene + ".scene")
        nelem = write_scene(path, model, cfg, rest, x0, v0, mass)
        T = cfg["substeps"]
        tf, tb, xw, lw, gw = warp_runs(wp, sim, model, cfg, args.reps)
        comw = (xw * mass[:, None]).sum(0) / mass.sum()
        d = {}
        for th in threads:
            d[th] = dsim_runs(args.dsim, path, th, args.reps, os.path.join(args.work, scene + ".xT") if th == threads[0] else None)
        r = d[threads[0]]
        xd = np.loadtxt(os.path.join(args.work, scene + ".xT")).reshape(-1, 3)
        comd = np.array(r["com"])
        size = np.ptp(rest, axis=0).max()
        e_com = np.abs(comd - comw).max() / max(1.0, np.abs(comd).max())
        e_loss = abs(r["loss"][0] - lw) / abs(r["loss"][0])
        e_grad = abs(r["grad_v0"][0] - gw) / abs(r["grad_v0"][0])
        e_x = np.abs(xd - xw).max() / size
        ok = e_com <= TOL["com"] and e_loss <= TOL["loss"] and e_grad <= TOL["grad"]
        fail |= not ok
        print("\n%s: %d particles, %d elements, %d substeps of %g s" % (scene, len(rest), nelem, T, cfg["dt"]))
        print("  agreement %s: com %.2e (tol %.0e)  loss %.2e (tol %.0e; dsim %.9g, warp %.9g)  |dL/dv0| %.2e (tol %.0e)"
              "  max |x_dsim - x_warp| / size %.2e" % ("ok" if ok else "FAILED", e_com, TOL["com"], e_loss, TOL["loss"],
                                                      r["loss"][0], lw, e_grad, TOL["grad"], e_x))
        scale = 1e9 / (nelem * T)
        wf, wb = median(tf), median(tb)
        print("  %-16s forward %8.1f ns  forward+backward %8.1f ns  (per element-substep; %.3f s, %.3f s)" % (
            "warp (1 thread)", wf * scale, wb * scale, wf, wb))
        for th in threads:
            df, db = median(d[th]["forward"]), median(d[th]["fwdbwd"])
            print("  %-16s forward %8.1f ns  forward+backward %8.1f ns  (%.3f s, %.3f s)  warp/dsim %.2fx, %.2fx" % (
                "dsim (%d thread%s)" % (th, "" if th == 1 else "s"), df * scale, db * scale, df, db, wf / df, wb / db))
            rows.append((scene, th, wf / df, wb / db))
        if scene.startswith("soft"):  # dsim's own grid builder, for reference (its own tet count)
            nx, ny, nz = scene.split("-")[1].split("x")
            for th in threads:
                out = subprocess.run([args.dsim, "--grid", nx, ny, nz, str(SOFT["cell"]), str(SOFT["density"]),
                                      str(SOFT["k_mu"]), str(SOFT["k_lambda"]), str(SOFT["k_damp"]), str(SOFT["dt"]),
                                      str(T), str(th), str(args.reps)], check=True, capture_output=True,
                                     text=True).stdout
                g = {l.split()[0]: [float(t) for t in l.split()[1:]] for l in out.splitlines()}
                s2 = 1e9 / (g["elements"][0] * T)
                print("  %-16s forward %8.1f ns  forward+backward %8.1f ns  (dsim's own grid builder: %d tets, at rest)" % (
                    "dsim (%d thread%s)" % (th, "" if th == 1 else "s"), median(g["forward"]) * s2,
                    median(g["fwdbwd"]) * s2, g["elements"][0]))
    print("\nratios warp/dsim (forward, forward+backward; > 1: dsim faster):")
    for scene, th, a, b in rows:
        print("  %-14s dsim %d thread%s  %.2fx  %.2fx" % (scene, th, "" if th == 1 else "s", a, b))
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
