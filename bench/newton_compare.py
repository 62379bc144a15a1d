#!/usr/bin/env python3
"""dsim's implicit integrator and Newton's VBD solver (CPU device) on a clamped soft grid.

Run it through bench/newton-compare, which provides the Python environment
with newton and builds dsim's half (bench/side_by_side_dsim --traj).

Scene: a tet grid of NX x NY x NZ cells of 0.1 m (Newton's add_soft_grid,
5 tets per cell; the grids of bench/warp-side-by-side), z up, its x = 0
face clamped (fix_left: mass 0 in both engines), starting straight and at
rest, falling under gravity (-9.81 m/s^2 along z) as a cantilever plate,
no ground, no damping. Newton's builder makes the model and this script
hands its particles, masses and tets to dsim, so both simulate the same
mesh and mass distribution (Newton's surface triangles, which carry no
material here, are removed).

Material: both are stable Neo-Hookean variants, not the same energy.
Newton's VBD: psi = mu/2 (Ic - 3) + l/2 (J - a)^2 with l = lambda + mu,
a = 1 + mu/l, and (mu, lambda) the Lame parameters. dsim: psi = m/2 (Ic - 3)
- m/2 log(Ic + 1) + k/2 (J - b)^2, b = 1 + 3/4 m/k, whose small-strain Lame
parameters are mu = 3/4 m, lambda = k - 5/8 m. dsim gets m = 4/3 mu and
k = lambda + 5/6 mu: the same Lame parameters, so the two agree to first
order in the strain and differ at second order (strains here are a few
per cent).

Time stepping: both take backward Euler steps of h = 1/FPS, one per frame:
M (x' - x - h v) / h^2 = f(x') + M g, v' = (x' - x) / h. dsim solves each
step by Newton's method (its newton_tol is relative, see
docs/integrators.md), Newton's VBD by a fixed number of block Gauss-Seidel
iterations over the vertices in float32; --vbd also accepts SxK (S
substeps of h/S with K iterations each, the way Newton's examples run VBD).

Accuracy: the residual of each solver's own backward-Euler equations on its
own frames, r = M (x_{n+1} - 2 x_n + x_{n-1}) / h^2 - M g - f(x_{n+1}) over
the free particles, evaluated here in float64 with each solver's own
material, relative to the weight |M g|; median and largest over the frames.
float32 positions have a floor: the residual of dsim's tightest trajectory
rounded to float32 (printed). Agreement: the largest vertex distance
between final frames (dsim against VBD mixes the material difference with
VBD's unconverged iterations; a VBD run at many iterations separates them).

Timings: the time of the frames' steps (Newton: solver.step; dsim: its
forward run), wall or, with --clock cpu, process CPU time, medians of
--reps runs after a warm-up, per frame, with the ratio VBD / dsim (> 1:
dsim faster). Warp's CPU kernels run on one thread; dsim is shown with the
--threads counts. VBD has no gradient; dsim's backward is not timed here.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

CELL = 0.1
DENSITY = 1000.0
MU, LAMBDA = 1.0e7, 1.5e7          # Lame parameters, Pa (E = 26 MPa, nu = 0.3)
DSIM_K_MU, DSIM_K_LAMBDA = 4.0 / 3.0 * MU, LAMBDA + 5.0 / 6.0 * MU
GRAVITY = (0.0, 0.0, -9.81)
FPS = 60.0
FRAMES = {"soft-15x15x1": 30, "soft-40x40x4": 6}   # default frames per scene
CLOCK = time.perf_counter


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def build_newton(wp, newton, scene):
    nx, ny, nz = (int(s) for s in scene.split("-")[1].split("x"))
    b = newton.ModelBuilder(gravity=GRAVITY)  # z up
    b.add_soft_grid(pos=wp.vec3(0.0, 0.0, 1.0), rot=wp.quat_identity(), vel=wp.vec3(0.0, 0.0, 0.0),
                    dim_x=nx, dim_y=ny, dim_z=nz, cell_x=CELL, cell_y=CELL, cell_z=CELL, density=DENSITY,
                    k_mu=MU, k_lambda=LAMBDA, k_damp=0.0, fix_left=True, add_surface_mesh_edges=False)
    # surface triangles without material: not part of a tet body
    for name in ("tri_indices", "tri_poses", "tri_activations", "tri_materials", "tri_areas"):
        lst = getattr(b, name, None)
        if isinstance(lst, list):
            lst.clear()
    b.color()  # VBD's vertex colouring
    model = b.finalize(device="cpu")
    rest = model.particle_q.numpy().astype(np.float64)
    mass = model.particle_mass.numpy().astype(np.float64)
    tets = model.tet_indices.numpy().astype(np.int64)
    return model, rest, mass, tets


def write_scene(path, rest, mass, tets, frames, tol, max_iter):
    """dsim's scene (bench/side_by_side_dsim): Newton's float32 positions
    written exactly (%.17g), since at these stiffnesses a rest shape moved
    by 1e-9 m is a force of 1e-2 N"""
    with open(path, "w") as f:
        f.write("dt %.17g\nsubsteps %d\ngravity %.17g %.17g %.17g\n" % ((1.0 / FPS, frames) + GRAVITY))
        f.write("tet_material %.17g %.17g 0\ntri_material 0 0 0\nbend_material 0 0\n" % (DSIM_K_MU, DSIM_K_LAMBDA))
        f.write("particles %d\n" % len(rest))
        for i in range(len(rest)):
            p = tuple(rest[i])
            f.write("%.17g %.17g %.17g %.17g %.17g %.17g 0 0 0 %.17g\n" % (p + p + (mass[i],)))
        f.write("tets %d\n" % len(tets))
        for t in tets:
            f.write("%d %d %d %d\n" % tuple(t))
        f.write("tris 0\nbends 0\n")
        f.write("integrator implicit %.17g %d\n" % (tol, max_iter))


class Residual:
    """Backward-Euler residual of a trajectory for a stable Neo-Hookean
    material P = phi(Ic) F + l (J - a) cof(F), in float64."""

    def __init__(self, rest, mass, tets, material):
        self.t = tets
        Dm = np.stack([rest[tets[:, k]] - rest[tets[:, 0]] for k in (1, 2, 3)], axis=2)
        self.B = np.linalg.inv(Dm)
        self.V0 = np.linalg.det(Dm) / 6.0
        self.m = mass
        self.free = mass > 0
        self.n = len(rest)
        if material == "dsim":
            mu, lam = DSIM_K_MU, DSIM_K_LAMBDA
            self.phi = lambda Ic: mu * (1.0 - 1.0 / (Ic + 1.0))
            self.l, self.a = lam, 1.0 + 0.75 * mu / lam
        else:  # Newton's VBD
            mu, l = MU, LAMBDA + MU
            self.phi = lambda Ic: mu + 0.0 * Ic
            self.l, self.a = l, 1.0 + mu / l
        self.wg = np.linalg.norm((mass[self.free, None] * np.array(GRAVITY)[None, :]))

    def force(self, x):
        t = self.t
        Ds = np.stack([x[t[:, k]] - x[t[:, 0]] for k in (1, 2, 3)], axis=2)
        F = Ds @ self.B
        Ic = (F * F).sum(axis=(1, 2))
        c0, c1, c2 = F[:, :, 0], F[:, :, 1], F[:, :, 2]
        cof = np.stack([np.cross(c1, c2), np.cross(c2, c0), np.cross(c0, c1)], axis=2)
        J = (c0 * cof[:, :, 0]).sum(axis=1)
        P = self.phi(Ic)[:, None, None] * F + (self.l * (J - self.a))[:, None, None] * cof
        H = -self.V0[:, None, None] * (P @ np.transpose(self.B, (0, 2, 1)))  # columns: forces on vertices 1..3
        f = np.zeros((self.n, 3))
        for k in (1, 2, 3):
            np.add.at(f, t[:, k], H[:, :, k - 1])
        np.add.at(f, t[:, 0], -H.sum(axis=2))
        return f

    def frames(self, X, h):
        """Relative residual of every step of X ((steps + 1) x n x 3, starting at rest)."""
        out = []
        g = np.array(GRAVITY)
        for s in range(1, len(X)):
            xm = X[s - 2] if s >= 2 else X[0]
            r = self.m[:, None] * ((X[s] - 2 * X[s - 1] + xm) / (h * h) - g) - self.force(X[s])
            out.append(np.linalg.norm(r[self.free]) / self.wg)
        return np.array(out)


def vbd_runs(wp, newton, model, frames, substeps, iters, reps):
    solver = newton.solvers.SolverVBD(model, iterations=iters, particle_enable_self_contact=False,
                                      particle_enable_tile_solve=False)
    control = model.control()
    h = 1.0 / FPS / substeps
    s0, s1 = model.state(), model.state()
    solver.step(s0, s1, control, None, h)  # warm-up: kernels compiled and loaded on first use
    times, X = [], None
    for _ in range(reps):
        s0, s1 = model.state(), model.state()
        traj = [s0.particle_q.numpy().astype(np.float64)]
        el = 0.0
        for _ in range(frames):
            for _ in range(substeps):
                s0.clear_forces()
                t0 = CLOCK()
                solver.step(s0, s1, control, None, h)
                wp.synchronize()
                el += CLOCK() - t0
                s0, s1 = s1, s0
                traj.append(s0.particle_q.numpy().astype(np.float64))
        times.append(el)
        X = np.array(traj)
    return times, X


def dsim_runs(prog, scene, threads, reps, traj):
    out = subprocess.run([prog, "--traj", scene, str(threads), str(reps), traj or "-"], check=True,
                         capture_output=True, text=True).stdout
    res = {l.split()[0]: [float(t) for t in l.split()[1:]] for l in out.splitlines()}
    X = None
    if traj:
        X = np.fromfile(traj, dtype=np.float64).reshape(int(res["substeps"][0]) + 1, -1, 3)
    return res["forward"], X


def main():
    global MU, LAMBDA, DSIM_K_MU, DSIM_K_LAMBDA
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dsim", required=True, help="the side_by_side_dsim program")
    ap.add_argument("--work", required=True, help="folder for scene files, trajectories and Warp's kernel cache")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--threads", default="1,2", help="dsim thread counts")
    ap.add_argument("--scenes", default="soft-15x15x1,soft-40x40x4")
    ap.add_argument("--frames", type=int, default=0, help="frames per scene (default: 30 and 6)")
    ap.add_argument("--tols", default="1e-4,1e-8", help="dsim newton_tol values (the last, tightest, is the reference)")
    ap.add_argument("--vbd", default="10,100,1000,10x10",
                    help="VBD settings: K (K iterations per frame) or SxK (S substeps of K iterations)")
    ap.add_argument("--vbd-ref", type=int, default=0,
                    help="iterations of a VBD run near convergence (once, untimed; default 0: none)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: process CPU time (with --threads 1: steadier on a shared machine)")
    ap.add_argument("--lame", default="%g,%g" % (MU, LAMBDA), help="the Lame parameters mu,lambda in Pa")
    ap.add_argument("--quick", action="store_true", help="5 frames, one repetition (smoke run)")
    args = ap.parse_args()
    if args.quick:
        args.reps, args.frames = 1, 5
    MU, LAMBDA = (float(v) for v in args.lame.split(","))
    DSIM_K_MU, DSIM_K_LAMBDA = 4.0 / 3.0 * MU, LAMBDA + 5.0 / 6.0 * MU
    global CLOCK
    if args.clock == "cpu":  # Warp's CPU kernels run in this process's thread
        CLOCK = time.process_time
        os.environ["BENCH_CLOCK"] = "cpu"
    os.makedirs(args.work, exist_ok=True)
    import warp as wp
    wp.config.kernel_cache_dir = os.path.join(args.work, "kernel-cache")
    wp.config.quiet = True
    wp.init()
    import newton
    print("newton %s (VBD, CPU device, float32), warp %s, dsim %s; median of %d, %s time, load %s" % (
        newton.__version__, wp.__version__, args.dsim, args.reps, args.clock,
        " ".join("%.2f" % x for x in os.getloadavg())))
    print("Lame mu %g, lambda %g Pa; density %g kg/m^3; %g fps, one backward-Euler step per frame" % (
        MU, LAMBDA, DENSITY, FPS))
    threads = [int(t) for t in args.threads.split(",")]
    tols = [float(t) for t in args.tols.split(",")]
    for scene in args.scenes.split(","):
        model, rest, mass, tets = build_newton(wp, newton, scene)
        frames = args.frames or FRAMES.get(scene, 30)
        h = 1.0 / FPS
        res_d = Residual(rest, mass, tets, "dsim")
        res_n = Residual(rest, mass, tets, "newton")
        size = np.ptp(rest, axis=0).max()
        print("\n%s: %d particles (%d clamped), %d tets, %d frames of %.4g s" % (
            scene, len(rest), int((mass == 0).sum()), len(tets), frames, h))
        dsx = {}
        rows = []
        for tol in tols:
            path = os.path.join(args.work, "%s-%g.scene" % (scene, tol))
            write_scene(path, rest, mass, tets, frames, tol, 200)
            for th in threads:
                tp = os.path.join(args.work, "%s-%g.traj" % (scene, tol)) if th == threads[0] else None
                tf, X = dsim_runs(args.dsim, path, th, args.reps, tp)
                if X is not None:  # the trajectory: from the first thread count (the same bits on any)
                    dsx[tol] = X
                    r = res_d.frames(X, h)
                rows.append(("dsim newton_tol %g, %d thread%s" % (tol, th, "" if th == 1 else "s"),
                             median(tf) / frames, r, dsx[tol][-1]))
        Xref = dsx[tols[-1]]
        floor = res_d.frames(Xref.astype(np.float32).astype(np.float64), h)
        t_dsim = {row[0]: row[1] for row in rows}
        for spec in filter(None, args.vbd.split(",")):
            S, K = (int(v) for v in spec.split("x")) if "x" in spec else (1, int(spec))
            tv, X = vbd_runs(wp, newton, model, frames, S, K, args.reps)
            r = res_n.frames(X, h / S)
            rows.append(("vbd %d iteration%s%s" % (K, "s" if K > 1 else "", ", %d substeps" % S if S > 1 else ""),
                         median(tv) / frames, r, X[-1]))
        vref = None
        if args.vbd_ref:
            _, X = vbd_runs(wp, newton, model, frames, 1, args.vbd_ref, 1)
            vref = X[-1]
            rows.append(("vbd %d iterations (reference, untimed)" % args.vbd_ref, float("nan"),
                         res_n.frames(X, h), vref))
        print("  float32 floor: residual of dsim's newton_tol %g frames rounded to float32: median %.2e, max %.2e" % (
            tols[-1], np.median(floor), floor.max()))
        d1 = min(t_dsim.values())
        print("  %-44s %10s %22s %12s %12s" % ("solver", "ms/frame", "residual median, max", "|x - dsim|", "|x - vbd ref|"))
        for name, tpf, r, xT in rows:
            e_d = np.linalg.norm(xT - Xref[-1], axis=1).max()
            e_v = "%9.2e m" % np.linalg.norm(xT - vref, axis=1).max() if vref is not None else "-"
            print("  %-44s %10.2f %10.2e, %9.2e %9.2e m %11s" % (name, 1e3 * tpf, np.median(r), r.max(), e_d, e_v))
        print("  load after the scene: %s" % " ".join("%.2f" % x for x in os.getloadavg()))
        print("  size %.2f m; |x - dsim|: the largest vertex distance to dsim's newton_tol %g final frame" % (size, tols[-1]))
        print("  ratios VBD / dsim time per frame (> 1: dsim faster):")
        for name, tpf, r, xT in rows:
            if name.startswith("vbd") and tpf == tpf:
                print("    %-40s" % name + "  ".join("%s %.2fx" % (k.replace("dsim newton_tol ", "tol "), tpf / v)
                                                    for k, v in t_dsim.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
