#!/usr/bin/env python3
"""dsim and PhiFlow on the same buoyant smoke plume, 2-D and 3-D.

Run it through bench/phiflow-compare, which provides the Python environment
with phiflow and builds dsim's half (bench/bench_fluid_phiflow).

The plume (bench_fluid_phiflow.c has the same numbers): a closed 1 m x 1 m box
of N x N cells (a grid "N^3" in --grids: a 1 m cube of N^3 cells, the
source's box [0.4, 0.6] along z too), dt = dx, buoyancy alpha = 2 m/s^2 per unit density along +y,
a source gaining 5 units of density per second in the cells whose centres lie
in x in [0.4, 0.6], y in [0.04, 0.12] m, whose faces are set to 0.5 m/s
upwards before the projection. Every field starts at zero.

One step, in both, in this order (dsim's, docs/fluids.md "One step"):
  1. advect the density and the velocity by the old velocity
     (semi-Lagrangian: one Euler backtrace, (bi)linear interpolation;
     MacCormack: both libraries clamp to the min/max of the backtrace's
     interpolation stencil);
  2. density += dt * rate in the source cells;
  3. v_y += dt * alpha * (density averaged onto the face);
  4. the source's faces take the inflow velocity;
  5. pressure projection: CG to the same relative tolerance, from p = 0.
Choices to make the two as alike as the APIs allow:
  - PhiFlow's velocity is a StaggeredGrid (MAC, like dsim's), the density a
    CenteredGrid with ZERO_GRADIENT boundaries (dsim clamps sample points to
    the grid: the same constant extrapolation);
  - the velocity's boundary is ZERO (PhiFlow's closed box): no flow through
    the walls, as dsim's;
  - float64 in PhiFlow (dsim's fluids are double);
  - the source masks are built from the same cell/face centre positions.
What the APIs do not let us match (the relative L2 difference comes from
these): a tangential velocity sampled within half a cell of a wall is
interpolated towards a ghost value of 0 in PhiFlow (its ZERO boundary) and
held at the last face row's value in dsim (the clamp; PhiFlow's
combine_by_direction(normal=ZERO, tangential=ZERO_GRADIENT), the match,
cannot be sampled on a StaggeredGrid in 3.4); dsim stops its MIC(0)-PCG on max|r| <= tol max|b| (a max norm, a
preconditioned solver), PhiFlow its plain CG on |r|_2 <= tol |b|_2; PhiFlow
removes the mean of the divergence before the solve (dsim's right-hand side
is consistent by construction); roundoff differs in every operator.

Speed: forward time per step over the STEPS-step rollout, and forward +
backward per step: dsim's adjoint against torch autograd through PhiFlow's
rollout (its linear solve has an implicit, adjoint-solve gradient) of
L = sum_c w_c rho_c on the final density (w_c = (c mod 7) / 7, c = i + N j
(+ N^2 k))
with respect to the initial velocity and the source's rate. Medians of REPS.
Both at the same thread count (dsim: OMP_NUM_THREADS; torch:
set_num_threads).

PhiFlow 3.4 (phiml 1.16) cannot build the pressure matrix once the square of
the cell count reaches 2^31 (256^2 and 64^3 do): phiml's sparse compress
packs (row, column) pairs into one int32 index (NumPyBackend's
ravel_multi_index casts numpy's int64 result back to the indices' int32) and
fails with "ValueError: index -2147451136 is out of bounds for array with
size 4294967296". int64_sparse_indices() below makes that one function keep
int64 (matrix, solve and gradient are otherwise PhiFlow's own);
--no-int64-fix shows the failure.
"""
import argparse
import json
import os
import subprocess
import time

import numpy as np
import torch
from phi.torch.flow import (Box, CenteredGrid, Solve, StaggeredGrid, ZERO_GRADIENT, advect, extrapolation, fluid,
                            math, resample, vec)
import phi

def int64_sparse_indices():
    """Work around phiml 1.16's int32 overflow in sparse compress (docs above):
    ravel (row, column) pairs in int64."""
    from phiml.backend._numpy_backend import NumPyBackend
    orig = NumPyBackend.ravel_multi_index

    def ravel64(self, multi_index, shape, mode='undefined'):
        return orig(self, np.asarray(multi_index).astype(np.int64), shape, mode)
    NumPyBackend.ravel_multi_index = ravel64


ALPHA = 2.0
RATE = 5.0
INFLOW = 0.5
SRC_LO = (0.4, 0.04, 0.4)  # z: the 3-D plume only
SRC_HI = (0.6, 0.12, 0.6)


def median(v):
    v = sorted(v)
    return v[len(v) // 2]


def in_box(p, dim):
    """1.0 where the point p lies in the source box (inclusive, as dsim's in_box)."""
    inside = 1.0
    for a, ax in enumerate('xyz'[:dim]):
        inside = inside * ((p.vector[ax] >= SRC_LO[a]) & (p.vector[ax] <= SRC_HI[a]))
    return inside * 1.0


class Plume:
    def __init__(self, n, scheme, tol, dim=2):
        self.n, self.dx, self.dt, self.tol, self.dim = n, 1.0 / n, 1.0 / n, tol, dim
        axes = 'xyz'[:dim]
        self.bounds = Box(**{a: 1 for a in axes})
        self.vbc = extrapolation.ZERO  # closed box (combine_by_direction cannot be sampled on a StaggeredGrid in 3.4)
        self.advect = advect.mac_cormack if scheme == "mc" else advect.semi_lagrangian
        res = dict(**{a: n for a in axes}, bounds=self.bounds)
        self.src = CenteredGrid(lambda p: in_box(p, dim), ZERO_GRADIENT, **res)
        # per face component: 1 inside the box, and the inflow velocity there
        self.inmask = StaggeredGrid(lambda p: vec(**{a: in_box(p, dim) for a in axes}), self.vbc, **res)
        self.up = vec(**{a: (1.0 if a == 'y' else 0.0) for a in axes})
        self.vin = self.inmask * (INFLOW * self.up)
        self.res = res
        self.order = ','.join(reversed(axes))  # 'y,x' or 'z,y,x': x fastest, as dsim's cells
        w = (np.arange(n ** dim) % 7) / 7.0
        self.w = math.tensor(w.reshape((n,) * dim), math.spatial(self.order))

    def zero_state(self):
        v = StaggeredGrid(0.0, self.vbc, **self.res)
        s = CenteredGrid(0.0, ZERO_GRADIENT, **self.res)
        return v, s

    def step(self, v, s, rate):
        dt = self.dt
        s_new = self.advect(s, v, dt) + (dt * rate) * self.src
        v_new = self.advect(v, v, dt)
        v_new = v_new + dt * resample(s_new * (ALPHA * self.up), to=v_new)
        v_new = v_new * (1 - self.inmask) + self.vin
        # rank_deficiency=1: the closed box's pressure is defined up to a constant (PhiFlow sets it too, and warns)
        v_new, _ = fluid.make_incompressible(v_new, (), Solve('CG', self.tol, 0, max_iterations=100000,
                                                                rank_deficiency=1))
        return v_new, s_new

    def rollout(self, v, s, rate, steps):
        for _ in range(steps):
            v, s = self.jstep(v, s, rate)
        return v, s

    def loss(self, v0, rate, steps):
        _, s = self.rollout(v0, self.zero_state()[1], rate, steps)
        return math.sum(self.w * s.values, self.order)


def phiflow_side(n, scheme, tol, steps, reps, grad=True, dim=2):
    """PhiFlow's figures and final density. The step is jit-compiled
    (math.jit_compile: torch.jit traces it once, the rollout then runs the
    traced graph; about 5x faster than eager at 32^2 here, where Python
    bookkeeping dominates). Tracing is done in a warm-up outside the timings
    (a 2-step rollout and a 2-step gradient); the gradient through the traced
    steps equals the eager one (checked at 32^2, 4 steps: same loss and
    dL/drate to 16 digits)."""
    p = Plume(n, scheme, tol, dim)
    p.jstep = math.jit_compile(p.step)
    v0, s0 = p.zero_state()
    rate = math.tensor(RATE)
    grad_fn = math.gradient(p.loss, wrt='v0,rate', get_output=True)
    with torch.no_grad():
        p.rollout(v0, s0, rate, 2)
    if grad:
        grad_fn(v0, rate, 2)
    tf = []
    s = None
    for _ in range(reps):
        t0 = time.perf_counter()
        with torch.no_grad():
            _, s = p.rollout(v0, s0, rate, steps)
            s.values.native(p.order)  # nothing lazy left
        tf.append((time.perf_counter() - t0) / steps)
    dens = s.values.numpy(p.order).reshape(-1)
    print(f"  PhiFlow {n}^{dim} {scheme}: forward {1e3 * median(tf):.1f} ms/step", flush=True)
    if not grad:
        return dict(forward_ms=1e3 * median(tf), fwdbwd_ms=float('nan'), loss=float(math.sum(p.w * s.values, p.order)),
                    dloss_drate=float('nan'), dloss_dvel0_norm=float('nan'), mass=float(dens.sum())), dens
    tb = []
    for _ in range(reps):
        t0 = time.perf_counter()
        loss, (gv, gr) = grad_fn(v0, rate, steps)
        float(gr)
        tb.append((time.perf_counter() - t0) / steps)
    gvn = float(np.sqrt(sum(float(math.sum(gv.values[c] ** 2, p.order)) for c in 'xyz'[:dim])))
    return dict(forward_ms=1e3 * median(tf), fwdbwd_ms=1e3 * median(tb), loss=float(loss),
                dloss_drate=float(gr), dloss_dvel0_norm=gvn, mass=float(dens.sum())), dens


def dsim_side(args, n, scheme, tol, steps, reps, dim=2):
    out = os.path.join(args.work, f"dsim_density_{n}{'c' if dim == 3 else ''}_{scheme}.bin")
    cmd = [args.dsim, f"{n}^3" if dim == 3 else str(n), scheme, repr(tol), str(steps), str(reps), out]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(r.stdout), np.fromfile(out, dtype='<f8')


def loadavg():
    return " ".join(open('/proc/loadavg').read().split()[:3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dsim", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--grids", default="128,256", help="N (an N^2 square) or N^3 (a cube), comma separated")
    ap.add_argument("--schemes", default="sl,mc", help="sl (semi-Lagrangian), mc (MacCormack)")
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-grad", default="", help="grids (comma separated) on which PhiFlow's gradient is not timed")
    ap.add_argument("--json", help="write the figures here too")
    ap.add_argument("--no-int64-fix", action="store_true",
                    help="leave phiml's int32 sparse indices (fails from 256^2 and 64^3 on)")
    args = ap.parse_args()
    if not args.no_int64_fix:
        int64_sparse_indices()
    math.set_global_precision(64)
    torch.set_num_threads(args.threads)
    print(f"phiflow {phi.__version__}; torch {torch.__version__} ({torch.get_num_threads()} threads); dsim "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '(unset)')}; {args.steps} steps, median of {args.reps}, "
          f"relative tolerance {args.tol:g}")
    print(f"load before: {loadavg()}")
    rows = []
    for g in args.grids.split(","):
        n, dim = int(g.split("^")[0]), (3 if g.endswith("^3") else 2)
        for scheme in args.schemes.split(","):
            ds, d_dens = dsim_side(args, n, scheme, args.tol, args.steps, args.reps, dim)
            try:
                pf, p_dens = phiflow_side(n, scheme, args.tol, args.steps, args.reps,
                                          grad=g not in args.no_grad.split(","), dim=dim)
            except Exception as e:  # e.g. PhiFlow's int32 sparse indices with --no-int64-fix
                print(f"  {n}^{dim} {scheme}: PhiFlow failed: {type(e).__name__}: {e} (dsim: forward "
                      f"{ds['forward_ms']:.2f}, forward + backward {ds['fwdbwd_ms']:.2f} ms/step)", flush=True)
                continue
            np.save(os.path.join(args.work, f"phiflow_density_{n}{'c' if dim == 3 else ''}_{scheme}.npy"), p_dens)
            rel = float(np.linalg.norm(d_dens - p_dens) / np.linalg.norm(p_dens))
            rows.append(dict(n=n, dim=dim, scheme=scheme, dsim=ds, phiflow=pf, rel_l2_density=rel,
                             fwd_ratio=ds["forward_ms"] / pf["forward_ms"], fb_ratio=ds["fwdbwd_ms"] / pf["fwdbwd_ms"],
                             load=loadavg()))
            print(f"  {n}^{dim} {scheme}: done (max CFL {ds['max_cfl']:.2f}, dsim solver {ds['solver']}, "
                  f"PCG iterations {ds['pcg_iterations_last']}; load {loadavg()})", flush=True)
    print(f"load after: {loadavg()}")
    print(f"\nagreement after {args.steps} steps: |rho_dsim - rho_phiflow|_2 / |rho_phiflow|_2; the source's mass and "
          "dL/drate of each")
    print(f"{'grid':8s} {'scheme':6s} {'rel L2':>9s} {'mass dsim':>10s} {'mass Phi':>10s} {'dL/drate dsim':>14s} "
          f"{'dL/drate Phi':>13s} {'|dL/dv0| dsim':>14s} {'|dL/dv0| Phi':>13s}")
    for r in rows:
        ds, pf = r["dsim"], r["phiflow"]
        print(f"{r['n']:4d}^{r['dim']}   {r['scheme']:6s} {r['rel_l2_density']:9.2e} {ds['mass']:10.4f} {pf['mass']:10.4f} "
              f"{ds['dloss_drate']:14.6e} {pf['dloss_drate']:13.6e} {ds['dloss_dvel0_norm']:14.6e} "
              f"{pf['dloss_dvel0_norm']:13.6e}")
    print(f"\nspeed, ms per step ({args.threads} threads each): forward; forward + backward; ratios PhiFlow / dsim")
    print(f"{'grid':8s} {'scheme':6s} {'dsim fwd':>9s} {'Phi fwd':>9s} {'x':>6s} {'dsim f+b':>9s} {'Phi f+b':>9s} "
          f"{'x':>6s}")
    for r in rows:
        ds, pf = r["dsim"], r["phiflow"]
        print(f"{r['n']:4d}^{r['dim']}   {r['scheme']:6s} {ds['forward_ms']:9.2f} {pf['forward_ms']:9.2f} "
              f"{1 / r['fwd_ratio']:6.1f} {ds['fwdbwd_ms']:9.2f} {pf['fwdbwd_ms']:9.2f} {1 / r['fb_ratio']:6.1f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(phiflow=phi.__version__, torch=torch.__version__, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
