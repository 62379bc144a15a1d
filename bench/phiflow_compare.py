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

MacCormack (docs/fluids.md, "MacCormack against PhiFlow"): PhiFlow 3.4's
advect.mac_cormack clamps a StaggeredGrid's components to the wrong nodes.
Its clamp bounds come from Field.closest_values, which returns the
centred-grid computation for every field (the staggered branch after it is
never reached): each face component is clamped to the 2^d nodes of its own
array around the index x/dx - 1/2 on every axis, where its faces sit at
index x/dx - 1 along their normal (the stored faces start one cell in from
the wall): the stencil of a point half a cell further along +normal, which
can leave out a node the interpolation used. dsim clamps to the nodes the
interpolation used. Centred fields (the density) agree to roundoff.
--advect-once compares one advection of given fields (no sources, forces or
projection; dsim's side is `bench_fluid_phiflow advect`); --mc-face-clamp
runs the plume with PhiFlow's MacCormack clamped on each component's own
stencil: mc_clamp_torch below, torch operations that the step's
jit_compile traces and autograd differentiates, so the MacCormack gradient
row compares like with like; its forward equals mc_face_clamp's (the same
clamp in NumPy, the reference: --advect-once prints the difference, 0).

dL/dv0 entry by entry: the agreement table's "dv0 rel" is
|g_dsim - g_phiflow|_2 / |g_phiflow|_2 over the interior faces, dsim's
g from libdsim through ctypes (dsim_grad_entries: bench_fluid_phiflow
prints only the norm). Under MacCormack it is not a sharp figure: the
clamp's branch (clamped: a copy of one node, nothing to the velocity;
unclamped: the correction's derivative) flips wherever the corrected value
lies within roundoff of a bound, and a flipped branch changes that output's
derivative by O(1); dsim against itself with its PCG in place of the FFT
solve moves dL/dv0 by 26% entry by entry at 32^2 after 20 steps
(semi-Lagrangian: 2.5e-5), PhiFlow against itself at tolerance 1e-9
instead of 1e-5 by 27% (--spread; docs/fluids.md, "MacCormack gradients").
"""
import argparse
import ctypes
import json
import os
import subprocess
import time

import numpy as np
import torch
from phi.torch.flow import (Box, CenteredGrid, Solve, StaggeredGrid, ZERO_GRADIENT, advect, extrapolation, fluid,
                            math, resample, vec)
from phi.field import reduce_sample, sample
from phi.physics.advect import euler
import phi

def int64_sparse_indices():
    """Work around phiml 1.16's int32 overflow in sparse compress (docs above):
    ravel (row, column) pairs in int64."""
    from phiml.backend._numpy_backend import NumPyBackend
    orig = NumPyBackend.ravel_multi_index

    def ravel64(self, multi_index, shape, mode='undefined'):
        return orig(self, np.asarray(multi_index).astype(np.int64), shape, mode)
    NumPyBackend.ravel_multi_index = ravel64


def mc_face_clamp(field, velocity, dt):
    """advect.mac_cormack with a staggered field's components clamped to the
    nodes of their own interpolation stencils (docstring above); 2-D, closed
    box (ZERO: the wall faces and the tangential ghosts are 0). Centred
    fields go to PhiFlow's own."""
    if not field.is_staggered:
        return advect.mac_cormack(field, velocity, dt)
    v0 = sample(velocity, field.geometry, at=field.sampled_at, boundary=field.boundary)
    pts_b = euler(field, velocity, -dt, v0=v0)
    pts_f = euler(field, velocity, dt, v0=v0)
    hat = field.with_values(reduce_sample(field, pts_b))
    back = field.with_values(reduce_sample(hat, pts_f))
    mc = hat + 0.5 * (field - back)
    n = field.resolution.get_size('x')
    dx = 1.0 / n  # the plume's box is 1 m
    comps = []
    for comp in 'xy':
        q = field.values[{'~vector': comp}].numpy('y,x')
        v = mc.values[{'~vector': comp}].numpy('y,x')
        p = pts_b[{'~vector': comp}].numpy('y,x,vector')
        # index coordinates in the stored array: faces along the normal from x = dx, cells from dx / 2
        ix = p[..., 0] / dx - (1.0 if comp == 'x' else 0.5)
        iy = p[..., 1] / dx - (1.0 if comp == 'y' else 0.5)
        i0 = np.clip(np.floor(ix).astype(int), -1, q.shape[1] - 1)
        j0 = np.clip(np.floor(iy).astype(int), -1, q.shape[0] - 1)
        qp = np.pad(q, 1)  # ZERO beyond the stored faces
        nodes = np.stack([qp[j0 + 1 + b, i0 + 1 + a] for b in (0, 1) for a in (0, 1)])
        comps.append(math.tensor(np.clip(v, nodes.min(0), nodes.max(0)).T.copy(), math.spatial('x,y')))
    return field.with_values(math.stack(comps, math.dual(vector='x,y')))



def _first_extreme(nodes, pick):
    """the value of the first node (in the stencil's order) holding the
    stencil's max (pick: torch.gt) or min (torch.lt): strict comparisons in
    order, as dsim's mc_value, so autograd sends a clamped output's gradient
    to that one node (torch.amax/maximum would split it over ties)"""
    best = nodes[0]
    for q in nodes[1:]:
        best = torch.where(pick(q, best), q, best)
    return best


def mc_clamp_torch(field, velocity, dt, centred_too=True):
    """mc_face_clamp in torch operations, which autograd differentiates and
    math.jit_compile traces: the same MacCormack (PhiFlow's backtrace,
    lookups and correction), each component clamped to the 2^d nodes of its
    own interpolation stencil at the backward departure point, any
    dimension. Derivative as dsim's adjoint (engine/fluid_advect.h):
    unclamped (mc within [min, max], ties included) the correction's; clamped
    above the max (below the min), a copy of the first such node; the node
    indices (floor of the departure point) carry no gradient. PhiFlow's own
    clamp, math.clip = maximum(lo, minimum(mc, hi)), has the same forward but
    splits the gradient at ties (mc == hi, common where a field is 0), as
    math.max over the nodes does; centred_too=False leaves a centred field
    (the density) to PhiFlow's advect.mac_cormack and its tie rule. Node
    values beyond the stored array: the boundary's (ZERO: 0, the walls' faces
    and the tangential ghosts; ZERO_GRADIENT: the edge's)."""
    if not field.is_staggered and not centred_too:
        return advect.mac_cormack(field, velocity, dt)
    v0 = sample(velocity, field.geometry, at=field.sampled_at, boundary=field.boundary)
    pts_b = euler(field, velocity, -dt, v0=v0)
    pts_f = euler(field, velocity, dt, v0=v0)
    hat = field.with_values(reduce_sample(field, pts_b))
    back = field.with_values(reduce_sample(hat, pts_f))
    mc = hat + 0.5 * (field - back)
    axes = field.resolution.names  # 'x', 'y'(, 'z')
    order = ','.join(reversed(axes))  # native arrays: the last axis x
    lo = [float(field.bounds.lower[a]) for a in axes]
    dx = [float(field.dx[a]) for a in axes]
    mode = 'replicate' if field.boundary == ZERO_GRADIENT else 'constant'
    if field.is_staggered:
        assert field.boundary == extrapolation.ZERO, "mc_clamp_torch: a staggered field with a ZERO boundary only"
    comps = axes if field.is_staggered else [None]
    out = []
    for comp in comps:
        sel = {'~vector': comp} if comp else {}
        q = field.values[sel].native(order)
        v = mc.values[sel].native(order)
        p = pts_b[sel].native(order + ',vector').detach()
        # one layer of ghosts around the stored nodes (F.pad pads the last axes first: x, y, z)
        qp = torch.nn.functional.pad(q[None, None], (1, 1) * len(axes), mode=mode)[0, 0] if mode == 'replicate' \
            else torch.nn.functional.pad(q, (1, 1) * len(axes))
        base = []  # per axis, lower node index + 1 (the ghost shift), in the native array's axis order
        for d in reversed(range(len(axes))):
            # stored faces along their normal start at x = lower + dx; cells (and tangential axes) at lower + dx/2
            s = (p[..., d] - lo[d]) / dx[d] - (1.0 if comps[0] and axes[d] == comp else 0.5)
            n_d = q.shape[len(axes) - 1 - d]
            base.append(torch.clamp(torch.floor(s).long(), -1, n_d - 1) + 1)
        nodes = []  # dsim's stencil order: the x offset fastest
        for c in range(2 ** len(axes)):
            idx = tuple(base[k] + ((c >> (len(axes) - 1 - k)) & 1) for k in range(len(axes)))
            nodes.append(qp[idx])
        hi, low = _first_extreme(nodes, torch.gt), _first_extreme(nodes, torch.lt)
        r = torch.where(v > hi, hi, torch.where(v < low, low, v))
        # x first, as PhiFlow's
        out.append(math.tensor(r.permute(*reversed(range(r.dim()))), math.spatial(','.join(axes))))
    if not field.is_staggered:
        return field.with_values(out[0])
    return field.with_values(math.stack(out, math.dual(vector=','.join(axes))))


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


def phiflow_side(n, scheme, tol, steps, reps, grad=True, dim=2, face_clamp=False):
    """PhiFlow's figures and final density. The step is jit-compiled
    (math.jit_compile: torch.jit traces it once, the rollout then runs the
    traced graph; about 5x faster than eager at 32^2 here, where Python
    bookkeeping dominates). Tracing is done in a warm-up outside the timings
    (a 2-step rollout and a 2-step gradient); the gradient through the traced
    steps equals the eager one (checked at 32^2, 4 steps: same loss and
    dL/drate to 16 digits)."""
    p = Plume(n, scheme, tol, dim)
    p.jstep = math.jit_compile(p.step)
    if face_clamp and scheme == "mc":  # torch operations: jit-compiled and differentiated as PhiFlow's own
        # the density keeps advect.mac_cormack (its clamp was right; its tie rule gives the same gradient
        # here, to 1e-15, as mc_clamp_torch's, face_clamp="all")
        p.advect = lambda f, v, dt: mc_clamp_torch(f, v, dt, centred_too=face_clamp == "all")
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
    dv0 = [gv.values[{'~vector': c}].numpy(p.order) for c in 'xyz'[:dim]]
    return dict(forward_ms=1e3 * median(tf), fwdbwd_ms=1e3 * median(tb), loss=float(loss),
                dloss_drate=float(gr), dloss_dvel0_norm=gvn, mass=float(dens.sum()), dv0=dv0), dens


def dsim_side(args, n, scheme, tol, steps, reps, dim=2):
    out = os.path.join(args.work, f"dsim_density_{n}{'c' if dim == 3 else ''}_{scheme}.bin")
    cmd = [args.dsim, f"{n}^3" if dim == 3 else str(n), scheme, repr(tol), str(steps), str(reps), out]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(r.stdout), np.fromfile(out, dtype='<f8')


# dsim's dL/dv0 entry by entry: bench_fluid_phiflow prints only its norm, so
# the same plume (its plume(): the numbers, the order of the settings) runs
# once more through libdsim's fluid API (include/dsim/fluid.h) by ctypes. The
# structs below copy dsFluidDef's fields by hand; the figures this run prints
# (loss, dL/drate, |dL/dv0|) must equal bench_fluid_phiflow's to the last
# digit, which checks the copy (the JSON row records both).
class _Box(ctypes.Structure):
    _fields_ = [("lo", ctypes.c_double * 3), ("hi", ctypes.c_double * 3)]


class _Source(ctypes.Structure):
    _fields_ = [("box", _Box), ("density_rate", ctypes.c_double), ("temperature_rate", ctypes.c_double),
                ("set_velocity", ctypes.c_int), ("velocity", ctypes.c_double * 3)]


class _Soft(ctypes.Structure):
    _fields_ = [("center", ctypes.c_double * 3), ("half", ctypes.c_double * 3), ("width", ctypes.c_double),
                ("damping", ctypes.c_double)]


class _FluidDef(ctypes.Structure):  # enums are ints
    _fields_ = [("n", ctypes.c_int * 3), ("dx", ctypes.c_double), ("dt", ctypes.c_double),
                ("boundary", ctypes.c_int * 3), ("advection", ctypes.c_int), ("alpha", ctypes.c_double),
                ("beta", ctypes.c_double), ("ambient_temperature", ctypes.c_double), ("up_axis", ctypes.c_int),
                ("gravity", ctypes.c_double * 3), ("force_field", ctypes.c_int), ("cfl_max", ctypes.c_double),
                ("tolerance", ctypes.c_double), ("max_iterations", ctypes.c_int), ("nsource", ctypes.c_int),
                ("source", _Source * 4), ("nobstacle", ctypes.c_int), ("obstacle", _Box * 8), ("solver", ctypes.c_int),
                ("solid_cells", ctypes.c_void_p), ("nsoft", ctypes.c_int), ("soft", _Soft * 4)]


class _FluidGrad(ctypes.Structure):
    _fields_ = [(k, ctypes.POINTER(ctypes.c_double)) for k in
                ("velocity0", "density0", "temperature0", "force", "force_total", "param")]


def dsim_grad_entries(lib_path, n, scheme, tol, steps, dim=2, solver=0):
    """dsim's loss, dL/drate and dL/dv0 (the interior faces, per axis, as
    PhiFlow stores them: arrays in z,y,x order) for the plume, through
    libdsim; None when the library cannot be loaded (a static build).
    solver: dsFluidSolver (0 AUTO: FFT where the build has it, 1 PCG)."""
    try:
        lib = ctypes.CDLL(lib_path)
    except OSError:
        return None
    P, vp = ctypes.POINTER, ctypes.c_void_p
    lib.ds_fluid_default_def.restype = _FluidDef
    lib.ds_fluid_model_create.argtypes = [P(_FluidDef), P(vp), ctypes.c_char_p, ctypes.c_size_t]
    lib.ds_fluid_data_create.argtypes = [vp, ctypes.c_int, ctypes.c_int, P(vp)]
    for f in ("ds_fluid_ncell", "ds_fluid_nvel", "ds_fluid_nparam", "ds_fluid_step", "ds_fluid_model_free"):
        getattr(lib, f).argtypes = [vp] + ([vp, vp] if f == "ds_fluid_step" else [])
    lib.ds_fluid_param_index.argtypes = [vp, ctypes.c_char_p]
    lib.ds_fluid_reset.argtypes = [vp, vp, vp, vp, vp]
    lib.ds_fluid_backward.argtypes = [vp, vp, vp, vp, vp, P(_FluidGrad)]
    lib.ds_fluid_density.argtypes = [vp]
    lib.ds_fluid_density.restype = P(ctypes.c_double)
    lib.ds_fluid_data_free.argtypes = [vp]
    d = lib.ds_fluid_default_def()  # bench_fluid_phiflow.c's plume()
    d.n[0] = d.n[1] = n
    d.n[2] = n if dim == 3 else 1
    d.dx = d.dt = 1.0 / n
    d.advection = 1 if scheme == "mc" else 0
    d.alpha, d.beta, d.up_axis, d.tolerance, d.max_iterations, d.nsource = ALPHA, 0.0, 1, tol, 100000, 1
    d.solver = solver
    s = d.source[0]
    s.box.lo[:] = SRC_LO if dim == 3 else (SRC_LO[0], SRC_LO[1], 0.0)
    s.box.hi[:] = SRC_HI if dim == 3 else (SRC_HI[0], SRC_HI[1], 1.0)
    s.density_rate, s.set_velocity, s.velocity[1] = RATE, 1, INFLOW
    m, data, err = vp(), vp(), ctypes.create_string_buffer(512)
    if lib.ds_fluid_model_create(ctypes.byref(d), ctypes.byref(m), err, 512):
        raise RuntimeError(f"dsim model: {err.value.decode()}")
    try:
        if lib.ds_fluid_data_create(m, steps, 0, ctypes.byref(data)):
            raise RuntimeError("dsim data: out of memory")
        nc, nv, npar = lib.ds_fluid_ncell(m), lib.ds_fluid_nvel(m), lib.ds_fluid_nparam(m)
        w = (np.arange(nc) % 7) / 7.0
        gv, gp = np.zeros(nv), np.zeros(npar)
        as_p = lambda a: a.ctypes.data_as(P(ctypes.c_double))
        g = _FluidGrad(velocity0=as_p(gv), param=as_p(gp))
        lib.ds_fluid_reset(m, data, None, None, None)
        for t in range(steps):
            if lib.ds_fluid_step(m, data, None):
                raise RuntimeError(f"dsim step {t} failed")
        if lib.ds_fluid_backward(m, data, None, w.ctypes.data_as(vp), None, ctypes.byref(g)):
            raise RuntimeError("dsim backward failed")
        rho = np.ctypeslib.as_array(lib.ds_fluid_density(data), (nc,)).copy()
        rate = gp[lib.ds_fluid_param_index(m, b"source.0.density_rate")]
    finally:
        if data:
            lib.ds_fluid_data_free(data)
        lib.ds_fluid_model_free(m)
    comps, off = [], 0
    for a in range(dim):  # faces normal to a: n + 1 along a, walls' included (x fastest)
        shape = [n + (1 if b == a else 0) for b in range(dim)]
        f = gv[off:off + int(np.prod(shape))].reshape(shape[::-1])
        off += f.size
        cut = [slice(None)] * dim
        cut[dim - 1 - a] = slice(1, -1)
        comps.append(f[tuple(cut)])
    return dict(loss=float(w @ rho), dloss_drate=float(rate), dloss_dvel0_norm=float(np.linalg.norm(gv)), dv0=comps)


# --advect-once: one advection of given fields by both (docstring above)
def once_velocity(kind, x, y):
    """interior: a Gaussian vortex at the centre (speed 4e-6 of its peak at
    the walls); walls: one cell filling the box, tangential flow along the
    walls, none through them. Peak speed 0.6 m/s (CFL 0.6 at dt = dx)."""
    if kind == "interior":
        s, a = 0.1, 0.1
        g = a * np.exp(-((x - .5) ** 2 + (y - .5) ** 2) / (2 * s * s)) / (s * s)
        return -g * (y - .5), g * (x - .5)
    return 0.6 * np.sin(np.pi * x) * np.cos(np.pi * y), -0.6 * np.cos(np.pi * x) * np.sin(np.pi * y)


def once_density(kind, x, y):
    """interior: a smoothed disc (radius 0.15 m, edge 0.05 m) off the centre;
    walls: a field with gradients at every wall."""
    if kind == "interior":
        return 0.5 * (1 - np.tanh((np.hypot(x - .45, y - .55) - .15) / .05))
    return 1 + x + 0.5 * np.sin(2 * np.pi * x) * np.cos(3 * np.pi * y)


def once_fields(n, vk, dk):
    """dsim's layout: x faces [j, i] (N x N+1, the walls' included, 0),
    y faces (N+1 x N), cells (N x N)"""
    dx, f, c = 1.0 / n, np.arange(n + 1) / n, (np.arange(n) + .5) / n
    ux = once_velocity(vk, *np.meshgrid(f, c))[0]
    uy = once_velocity(vk, *np.meshgrid(c, f))[1]
    ux[:, [0, -1]] = 0
    uy[[0, -1], :] = 0
    return ux, uy, once_density(dk, *np.meshgrid(c, c)), dx


def once_dsim(args, n, scheme, ux, uy, rho):
    fin, fout = os.path.join(args.work, "advect_in.bin"), os.path.join(args.work, "advect_out.bin")
    np.concatenate([ux.ravel(), uy.ravel(), rho.ravel()]).astype('<f8').tofile(fin)
    subprocess.run([args.dsim, "advect", str(n), scheme, fin, fout], check=True, capture_output=True)
    o = np.fromfile(fout, dtype='<f8')
    a, b = (n + 1) * n, 2 * (n + 1) * n
    return o[:a].reshape(n, n + 1)[:, 1:-1], o[a:b].reshape(n + 1, n)[1:-1, :], o[b:].reshape(n, n)


def once_phiflow(n, how, ux, uy, rho, dx):
    res = dict(x=n, y=n, bounds=Box(x=1, y=1))
    t = lambda a: math.tensor(a.T.copy(), math.spatial('x,y'))
    v = StaggeredGrid(0.0, extrapolation.ZERO, **res)
    v = v.with_values(math.stack([t(ux[:, 1:-1]), t(uy[1:-1, :])], math.dual(vector='x,y')))
    s = CenteredGrid(t(rho), ZERO_GRADIENT, **res)
    adv = dict(sl=advect.semi_lagrangian, mc=advect.mac_cormack, mcf=mc_face_clamp, mct=mc_clamp_torch)[how]
    v1, s1 = adv(v, v, dx), adv(s, v, dx)
    return (v1.values[{'~vector': 'x'}].numpy('y,x'), v1.values[{'~vector': 'y'}].numpy('y,x'),
            s1.values.numpy('y,x'))


def advect_once(args, n):
    rel = lambda a, b: float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))
    print(f"one advection at {n}^2, dt = dx, closed box: relative L2 difference dsim - PhiFlow of the advected "
          f"density and face velocity (interior faces); mc*: PhiFlow's MacCormack with the clamp on each face "
          f"component's own stencil")
    print(f"{'velocity':9s} {'density':9s} {'rho sl':>9s} {'rho mc':>9s} {'u sl':>9s} {'u mc':>9s} {'u mc*':>9s}"
          f"  {'u mc: largest difference':s}")
    torch_vs_numpy = 0.0  # mc_clamp_torch against mc_face_clamp (velocity) and advect.mac_cormack (density)
    for vk in ("interior", "walls"):
        for dk in ("interior", "walls"):
            ux, uy, rho, dx = once_fields(n, vk, dk)
            pt, pn, pm = (once_phiflow(n, h, ux, uy, rho, dx) for h in ("mct", "mcf", "mc"))
            torch_vs_numpy = max(torch_vs_numpy, *(float(np.abs(a - b).max()) for a, b in
                                                   ((pt[0], pn[0]), (pt[1], pn[1]), (pt[2], pm[2]))))
            r = {}
            for how in ("sl", "mc", "mcf"):
                d = once_dsim(args, n, "sl" if how == "sl" else "mc", ux, uy, rho)
                p = once_phiflow(n, how, ux, uy, rho, dx)
                r[how] = (rel(d[2], p[2]), rel(np.concatenate([d[0].ravel(), d[1].ravel()]),
                                                np.concatenate([p[0].ravel(), p[1].ravel()])))
                if how == "mc":
                    e = np.abs(d[0] - p[0])
                    j, i = np.unravel_index(np.argmax(e), e.shape)
                    at = f"x face ({i + 1}, {j}), {min(i, n - 2 - i, j, n - 1 - j)} cells in from the row beside a wall"
            print(f"{vk:9s} {dk:9s} {r['sl'][0]:9.2e} {r['mc'][0]:9.2e} {r['sl'][1]:9.2e} {r['mc'][1]:9.2e} "
                  f"{r['mcf'][1]:9.2e}  {at}", flush=True)
    print(f"mc*: the torch clamp (mc_clamp_torch, the one the plume runs) against the NumPy one (mc_face_clamp) and, "
          f"on the density, PhiFlow's own: largest difference {torch_vs_numpy:.1e}")


def libdsim_path(args):
    return args.libdsim or os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(args.dsim))), ".libs",
                                        "libdsim.so")


def grad_spread(args):
    """--spread: how far dL/dv0 (entry by entry) and dL/drate move on each
    side when only the pressure solve changes (docs/fluids.md, "MacCormack
    gradients"): dsim's MIC(0)-PCG at --tol and at 1e-9 against its FFT
    solve at --tol; with --spread-phiflow also PhiFlow's CG at 1e-9 against
    --tol (MacCormack with --mc-face-clamp as in the plume run)."""
    flat = lambda r: np.concatenate([c.ravel() for c in r["dv0"]])
    rel = lambda a, b: float(np.linalg.norm(a - b) / np.linalg.norm(b))
    lib = libdsim_path(args)
    print(f"{args.steps} steps: relative L2 of the change of dL/dv0; relative change of dL/drate")
    for g in args.grids.split(","):
        n, dim = int(g.split("^")[0]), (3 if g.endswith("^3") else 2)
        for scheme in args.schemes.split(","):
            ref = dsim_grad_entries(lib, n, scheme, args.tol, args.steps, dim, solver=0)
            if ref is None:
                raise SystemExit(f"phiflow-compare: cannot load {lib} (--libdsim)")
            for tol in (args.tol, 1e-9):
                r = dsim_grad_entries(lib, n, scheme, tol, args.steps, dim, solver=1)
                print(f"  {g} {scheme}: dsim, PCG to {tol:g} against FFT to {args.tol:g}: dL/dv0 "
                      f"{rel(flat(r), flat(ref)):.2e}, dL/drate {abs(r['dloss_drate'] / ref['dloss_drate'] - 1):.1e}",
                      flush=True)
            if args.spread_phiflow:
                a, b = (phiflow_side(n, scheme, tol, args.steps, 1, dim=dim, face_clamp=args.mc_face_clamp)[0]
                        for tol in (args.tol, 1e-9))
                print(f"  {g} {scheme}: PhiFlow, CG to 1e-9 against {args.tol:g}: dL/dv0 {rel(flat(b), flat(a)):.2e}, "
                      f"dL/drate {abs(b['dloss_drate'] / a['dloss_drate'] - 1):.1e}", flush=True)


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
    ap.add_argument("--advect-once", type=int, metavar="N",
                    help="compare one advection of given fields at N^2 instead (docstring) and stop")
    ap.add_argument("--mc-face-clamp", action="store_true",
                    help="PhiFlow's MacCormack clamped on each face component's own stencil (torch: with gradient)")
    ap.add_argument("--spread", action="store_true",
                    help="how far dL/dv0 moves when only the pressure solve changes (dsim: PCG against FFT), and stop")
    ap.add_argument("--spread-phiflow", action="store_true", help="with --spread: PhiFlow's too (tolerance 1e-9)")
    ap.add_argument("--libdsim", help="libdsim's shared library, for dL/dv0 entry by entry (default: .libs/libdsim.so "
                    "in the build folder of --dsim; absent: the column reads nan)")
    args = ap.parse_args()
    if not args.no_int64_fix:
        int64_sparse_indices()
    math.set_global_precision(64)
    torch.set_num_threads(args.threads)
    if args.advect_once:
        advect_once(args, args.advect_once)
        return
    if args.spread:
        grad_spread(args)
        return
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
                                          grad=g not in args.no_grad.split(","), dim=dim,
                                          face_clamp=args.mc_face_clamp)
            except Exception as e:  # e.g. PhiFlow's int32 sparse indices with --no-int64-fix
                print(f"  {n}^{dim} {scheme}: PhiFlow failed: {type(e).__name__}: {e} (dsim: forward "
                      f"{ds['forward_ms']:.2f}, forward + backward {ds['fwdbwd_ms']:.2f} ms/step)", flush=True)
                continue
            np.save(os.path.join(args.work, f"phiflow_density_{n}{'c' if dim == 3 else ''}_{scheme}.npy"), p_dens)
            rel = float(np.linalg.norm(d_dens - p_dens) / np.linalg.norm(p_dens))
            ds["dv0_rel"], pv = float('nan'), pf.pop("dv0", None)
            if pv is not None:
                de = dsim_grad_entries(libdsim_path(args), n, scheme, args.tol, args.steps, dim)
                if de is not None:
                    a, b = (np.concatenate([c.ravel() for c in x]) for x in (de["dv0"], pv))
                    ds["dv0_rel"] = float(np.linalg.norm(a - b) / np.linalg.norm(b))
                    # the ctypes run is the bench's plume: its figures must be the bench's
                    ds["ctypes_dloss_drate"], ds["ctypes_dloss_dvel0_norm"] = de["dloss_drate"], de["dloss_dvel0_norm"]
            rows.append(dict(n=n, dim=dim, scheme=scheme, dsim=ds, phiflow=pf, rel_l2_density=rel,
                             fwd_ratio=ds["forward_ms"] / pf["forward_ms"], fb_ratio=ds["fwdbwd_ms"] / pf["fwdbwd_ms"],
                             load=loadavg()))
            print(f"  {n}^{dim} {scheme}: done (max CFL {ds['max_cfl']:.2f}, dsim solver {ds['solver']}, "
                  f"PCG iterations {ds['pcg_iterations_last']}; load {loadavg()})", flush=True)
    print(f"load after: {loadavg()}")
    print(f"\nagreement after {args.steps} steps: |rho_dsim - rho_phiflow|_2 / |rho_phiflow|_2; the source's mass and "
          "dL/drate of each; dv0 rel: |dL/dv0 dsim - dL/dv0 PhiFlow|_2 / |dL/dv0 PhiFlow|_2, entry by entry")
    print(f"{'grid':8s} {'scheme':6s} {'rel L2':>9s} {'mass dsim':>10s} {'mass Phi':>10s} {'dL/drate dsim':>14s} "
          f"{'dL/drate Phi':>13s} {'|dL/dv0| dsim':>14s} {'|dL/dv0| Phi':>13s} {'dv0 rel':>9s}")
    for r in rows:
        ds, pf = r["dsim"], r["phiflow"]
        print(f"{r['n']:4d}^{r['dim']}   {r['scheme']:6s} {r['rel_l2_density']:9.2e} {ds['mass']:10.4f} {pf['mass']:10.4f} "
              f"{ds['dloss_drate']:14.6e} {pf['dloss_drate']:13.6e} {ds['dloss_dvel0_norm']:14.6e} "
              f"{pf['dloss_dvel0_norm']:13.6e} {ds['dv0_rel']:9.2e}")
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
