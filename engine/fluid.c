/* Incompressible smoke on a MAC grid (dsim/fluid.h, docs/fluids.md).
 *
 * One step from the state (u, rho, T) with force field F:
 *   0. with soft obstacles, (u, rho, T) damped inside them   (fluid_soft.h)
 *   1. u1 = A(u; u), rho1 = A(rho; u), T1 = A(T; u)      (fluid_advect.h)
 *   2. rho2 = rho1 + dt r_s [cell in source s], likewise T; zero in solids
 *   3. u2_f = u1_f + dt (g_a + F_face,a + [a = up] (alpha rho2_face - beta (T2_face - T_amb)))
 *      (cell values averaged onto the face: 1/2 each side, the one cell
 *      at an open boundary)
 *   4. u3_f = v_s,a on the faces inside a velocity source s (the last wins)
 *   5. u' = P u3                                           (fluid_project.h)
 * The adjoint runs 5..1 backwards: P is self-adjoint; step 4's adjoint
 * sends the faces' adjoint to v_s and zeroes it; step 3 is the identity on
 * u plus the linear terms' sums (d/dalpha = dt rho_face, d/dbeta =
 * -dt (T_face - T_amb), d/dT_amb = dt beta, d/dg_a = dt, d/dF = dt w_cell,
 * and into rho2 and T2 with dt alpha w, -dt beta w); step 2 zeroes the
 * solids' adjoint and sends dt times its sum over a box to r_s. Step 3
 * reads rho2, T2, the next state's scalars, so the backward step needs the
 * states before and after it and nothing else (stage 0 is redone from the
 * state before). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "engine/fluid_advect.h"
#include "engine/fluid_priv.h"
#include "engine/fluid_project.h"
#include "engine/fluid_soft.h"

dsFluidDef ds_fluid_default_def(void) {
  dsFluidDef d;
  memset(&d, 0, sizeof d);
  d.n[0] = d.n[1] = 32;
  d.n[2] = 1;
  d.dx = 1.0 / 32;
  d.dt = 0.01;
  d.advection = DS_FLUID_SEMI_LAGRANGIAN;
  d.alpha = 1;
  d.up_axis = 1;
  d.cfl_max = 5;
  d.tolerance = 1e-10;
  d.max_iterations = 2000;
  return d;
}

/* ---- model ---------------------------------------------------------------- */

static int finite3(const double v[3]) { return isfinite(v[0]) && isfinite(v[1]) && isfinite(v[2]); }

/* box inside the grid and lo < hi on the dim axes */
static int check_box(const dsFluidDef* def, int dim, const dsFluidBox* b, const char* what, int k, char* err,
                     size_t errlen) {
  for (int a = 0; a < dim; a++) {
    double ext = def->n[a] * def->dx;
    if (!(isfinite(b->lo[a]) && isfinite(b->hi[a]) && b->lo[a] < b->hi[a]))
      return ds__puterr(err, errlen, DS_ERR_INVALID, "%s[%d]: expected finite lo < hi on axis %c, got [%g, %g]",
                        what, k, 'x' + a, b->lo[a], b->hi[a]);
    if (b->lo[a] < 0 || b->hi[a] > ext)
      return ds__puterr(err, errlen, DS_ERR_INVALID,
                        "%s[%d]: box [%g, %g] on axis %c is outside the grid [0, %g] m (expected inside)", what, k,
                        b->lo[a], b->hi[a], 'x' + a, ext);
  }
  return 0;
}

static int check_def(const dsFluidDef* def, char* err, size_t errlen) {
  for (int a = 0; a < 3; a++)
    if (def->n[a] < 1)
      return ds__puterr(err, errlen, DS_ERR_INVALID, "n[%d]: expected a grid size >= 1, got %d", a, def->n[a]);
  double cells = (double)def->n[0] * def->n[1] * def->n[2];
  if (cells > DS_FLUID_MAX_CELLS)
    return ds__puterr(err, errlen, DS_ERR_RANGE, "n: %d x %d x %d = %.0f cells, expected at most %d", def->n[0],
                      def->n[1], def->n[2], cells, DS_FLUID_MAX_CELLS);
  int dim = def->n[2] > 1 ? 3 : 2;
  if (!(def->dx > 0 && isfinite(def->dx)))
    return ds__puterr(err, errlen, DS_ERR_INVALID, "dx: expected a finite value > 0, got %g", def->dx);
  if (!(def->dt > 0 && isfinite(def->dt)))
    return ds__puterr(err, errlen, DS_ERR_INVALID, "dt: expected a finite value > 0, got %g", def->dt);
  for (int a = 0; a < 3; a++) {
    if ((int)def->boundary[a] < 0 || def->boundary[a] > DS_FLUID_PERIODIC)
      return ds__puterr(err, errlen, DS_ERR_INVALID, "boundary[%d]: expected closed (0), open (1) or periodic (2)",
                        a);
    if (a < dim && def->boundary[a] == DS_FLUID_PERIODIC && def->n[a] < 2)
      return ds__puterr(err, errlen, DS_ERR_INVALID, "n[%d]: a periodic axis needs >= 2 cells, got %d", a,
                        def->n[a]);
  }
  if ((int)def->advection < 0 || def->advection > DS_FLUID_MACCORMACK)
    return ds__puterr(err, errlen, DS_ERR_INVALID, "advection: expected semi-Lagrangian (0) or MacCormack (1)");
  if (def->up_axis < 0 || def->up_axis >= dim)
    return ds__puterr(err, errlen, DS_ERR_INVALID, "up_axis: expected 0 .. %d, got %d", dim - 1, def->up_axis);
  if (!(isfinite(def->alpha) && isfinite(def->beta) && isfinite(def->ambient_temperature) && finite3(def->gravity)))
    return ds__puterr(err, errlen, DS_ERR_INVALID, "alpha, beta, ambient_temperature, gravity: expected finite values");
  if (!(def->cfl_max > 0 && isfinite(def->cfl_max)))
    return ds__puterr(err, errlen, DS_ERR_INVALID, "cfl_max: expected a finite value > 0, got %g", def->cfl_max);
  if (!(def->tolerance > 0 && def->tolerance < 1))
    return ds__puterr(err, errlen, DS_ERR_INVALID, "tolerance: expected a value in (0, 1), got %g", def->tolerance);
  if (def->max_iterations < 1)
    return ds__puterr(err, errlen, DS_ERR_INVALID, "max_iterations: expected >= 1, got %d", def->max_iterations);
  if (def->solver != DS_FLUID_SOLVER_AUTO && def->solver != DS_FLUID_SOLVER_PCG)
    return ds__puterr(err, errlen, DS_ERR_INVALID, "solver: expected auto (0) or pcg (1), got %d", def->solver);
  if (def->nsource < 0 || def->nsource > DS_FLUID_MAX_SOURCES)
    return ds__puterr(err, errlen, DS_ERR_INVALID, "nsource: expected 0 .. %d, got %d", DS_FLUID_MAX_SOURCES,
                      def->nsource);
  if (def->nobstacle < 0 || def->nobstacle > DS_FLUID_MAX_OBSTACLES)
    return ds__puterr(err, errlen, DS_ERR_INVALID, "nobstacle: expected 0 .. %d, got %d", DS_FLUID_MAX_OBSTACLES,
                      def->nobstacle);
  for (int s = 0; s < def->nsource; s++) {
    const dsFluidSource* src = &def->source[s];
    int rc = check_box(def, dim, &src->box, "source", s, err, errlen);
    if (rc) return rc;
    if (!(isfinite(src->density_rate) && isfinite(src->temperature_rate) && finite3(src->velocity)))
      return ds__puterr(err, errlen, DS_ERR_INVALID, "source[%d]: expected finite rates and velocity", s);
  }
  for (int k = 0; k < def->nobstacle; k++) {
    int rc = check_box(def, dim, &def->obstacle[k], "obstacle", k, err, errlen);
    if (rc) return rc;
  }
  if (def->nsoft < 0 || def->nsoft > DS_FLUID_MAX_SOFT)
    return ds__puterr(err, errlen, DS_ERR_INVALID, "nsoft: expected 0 .. %d, got %d", DS_FLUID_MAX_SOFT, def->nsoft);
  for (int k = 0; k < def->nsoft; k++) {
    const dsFluidSoftObstacle* o = &def->soft[k];
    if (!finite3(o->center))
      return ds__puterr(err, errlen, DS_ERR_INVALID, "soft[%d].center: expected finite values", k);
    for (int a = 0; a < dim; a++)
      if (!(o->half[a] > 0 && isfinite(o->half[a])))
        return ds__puterr(err, errlen, DS_ERR_INVALID, "soft[%d].half[%d]: expected a finite value > 0, got %g", k, a,
                          o->half[a]);
    if (!(o->width > 0 && isfinite(o->width)))
      return ds__puterr(err, errlen, DS_ERR_INVALID, "soft[%d].width: expected a finite value > 0, got %g", k,
                        o->width);
    if (!(o->damping >= 0 && isfinite(o->damping)))
      return ds__puterr(err, errlen, DS_ERR_INVALID, "soft[%d].damping: expected a finite value >= 0, got %g", k,
                        o->damping);
  }
  return 0;
}

static int in_box(const dsFluidBox* b, int dim, const double x[3]) {
  for (int a = 0; a < dim; a++)
    if (x[a] < b->lo[a] || x[a] > b->hi[a]) return 0;
  return 1;
}

static void add_param(dsFluidModel* m, const char* name, double* p) {
  snprintf(m->pname[m->nparam], FL_PNAME, "%s", name);
  m->pptr[m->nparam++] = p;
}

static void build_params(dsFluidModel* m) {
  dsFluidDef* d = &m->def;
  char nm[FL_PNAME];
  add_param(m, "buoyancy.alpha", &d->alpha);
  add_param(m, "buoyancy.beta", &d->beta);
  add_param(m, "ambient_temperature", &d->ambient_temperature);
  for (int a = 0; a < 3; a++) {
    snprintf(nm, sizeof nm, "gravity.%c", 'x' + a);
    add_param(m, nm, &d->gravity[a]);
  }
  for (int s = 0; s < d->nsource; s++) {
    snprintf(nm, sizeof nm, "source.%d.density_rate", s);
    add_param(m, nm, &d->source[s].density_rate);
    snprintf(nm, sizeof nm, "source.%d.temperature_rate", s);
    add_param(m, nm, &d->source[s].temperature_rate);
    for (int a = 0; a < 3; a++) {
      snprintf(nm, sizeof nm, "source.%d.velocity.%c", s, 'x' + a);
      add_param(m, nm, &d->source[s].velocity[a]);
    }
  }
  for (int k = 0; k < d->nsoft; k++) { /* FL_P_SOFT */
    for (int a = 0; a < 3; a++) {
      snprintf(nm, sizeof nm, "soft.%d.position.%c", k, 'x' + a);
      add_param(m, nm, &d->soft[k].center[a]);
    }
    snprintf(nm, sizeof nm, "soft.%d.damping", k);
    add_param(m, nm, &d->soft[k].damping);
  }
}

static void build_grids(dsFluidModel* m) {
  const dsFluidDef* d = &m->def;
  m->ncell = d->n[0] * d->n[1] * d->n[2];
  for (int k = 0; k < 3; k++) {
    m->cellg.cnt[k] = d->n[k];
    m->cellg.off[k] = 0.5;
    m->cellg.per[k] = k < m->dim && d->boundary[k] == DS_FLUID_PERIODIC;
  }
  m->cellg.np = m->ncell;
  m->nvel = 0;
  for (int a = 0; a < 3; a++) {
    FGrid* g = &m->faceg[a];
    *g = m->cellg;
    if (a < m->dim) {
      g->off[a] = 0;
      if (!g->per[a]) g->cnt[a] += 1;
      g->np = g->cnt[0] * g->cnt[1] * g->cnt[2];
    } else {
      g->np = 0;
    }
    m->foff[a] = m->nvel;
    m->nf[a] = g->np;
    m->nvel += g->np;
  }
}

/* the velocity's axis weights at the node coordinates of every grid
 * (dsFluidModel.vtab); 0 or DS_ERR_NOMEM */
static int build_vtab(dsFluidModel* m) {
  const FGrid* gs[4] = {&m->faceg[0], &m->faceg[1], &m->faceg[2], &m->cellg};
  size_t n = 0;
  for (int gi = 0; gi < 4; gi++)
    if (gs[gi]->np)
      for (int d = 0; d < m->dim; d++) n += (size_t)m->dim * (size_t)gs[gi]->cnt[d];
  m->vtab_mem = ds__calloc(n, sizeof(FAxis));
  if (!m->vtab_mem) return DS_ERR_NOMEM;
  FAxis* t = m->vtab_mem;
  m->view.vtab = m->vtab_mem;
  for (int gi = 0; gi < 4; gi++) {
    if (!gs[gi]->np) continue;
    for (int a = 0; a < m->dim; a++)
      for (int d = 0; d < m->dim; d++) {
        m->view.vtoff[gi][a][d] = (int)(t - m->vtab_mem);
        for (int i = 0; i < gs[gi]->cnt[d]; i++)
          t[i] = axis_weights(&m->faceg[a], d, m->def.dx, (i + gs[gi]->off[d]) * m->def.dx);
        t += gs[gi]->cnt[d];
      }
  }
  return 0;
}

/* the view of the bodies (engine/fluid_body.h) on the model's arrays; the
 * interpolation tables' offsets come from build_vtab */
static void fill_view(dsFluidModel* m) {
  const dsFluidDef* d = &m->def;
  dsFluidView* v = &m->view;
  v->dim = m->dim, v->ncell = m->ncell, v->nvel = m->nvel;
  for (int a = 0; a < 3; a++) v->nf[a] = m->nf[a], v->foff[a] = m->foff[a], v->n[a] = d->n[a], v->faceg[a] = m->faceg[a];
  v->cellg = m->cellg;
  v->dx = d->dx, v->dt = d->dt, v->tolerance = d->tolerance;
  v->advection = (int)d->advection, v->up_axis = d->up_axis, v->nsource = d->nsource, v->nsoft = d->nsoft;
  v->nparam = m->nparam, v->max_iterations = d->max_iterations;
  for (int k = 0; k < d->nsoft; k++) {
    for (int a = 0; a < 3; a++) v->soft_half[k][a] = d->soft[k].half[a];
    v->soft_width[k] = d->soft[k].width;
  }
  v->solid = m->solid, v->active = m->active, v->src_cell = m->src_cell, v->insys = m->insys;
  v->src_face = m->src_face, v->nbr = m->nbr, v->diag = m->diag, v->precon = m->precon;
  v->par = NULL;
}

void ds__fluid_view(const dsFluidModel* m, double* par, dsFluidView* v) {
  for (int i = 0; i < m->nparam; i++) par[i] = *m->pptr[i];
  *v = m->view;
  v->par = par;
}

/* solid cells, active faces, source masks, the pressure matrix and its factor */
static void build_masks(dsFluidModel* m) {
  const dsFluidDef* d = &m->def;
  double x[3];
  for (int c = 0; c < m->ncell; c++) {
    grid_pos(&m->cellg, c, d->dx, x);
    for (int k = 0; k < d->nobstacle; k++)
      if (in_box(&d->obstacle[k], m->dim, x)) m->solid[c] = 1;
    if (d->solid_cells && d->solid_cells[c]) m->solid[c] = 1;
    for (int s = 0; s < d->nsource; s++)
      if (in_box(&d->source[s].box, m->dim, x)) m->src_cell[c] |= (unsigned char)(1u << s);
  }
  for (int a = 0; a < m->dim; a++)
    for (int f = 0; f < m->nf[a]; f++) {
      int lo, hi, F = m->foff[a] + f;
      face_cells(&m->view, a, f, &lo, &hi);
      if (lo >= 0 && hi >= 0)
        m->active[F] = !m->solid[lo] && !m->solid[hi];
      else
        m->active[F] = d->boundary[a] == DS_FLUID_OPEN && !m->solid[lo >= 0 ? lo : hi];
      grid_pos(&m->faceg[a], f, d->dx, x);
      m->src_face[F] = -1;
      for (int s = 0; s < d->nsource; s++)
        if (d->source[s].set_velocity && in_box(&d->source[s].box, m->dim, x)) m->src_face[F] = (signed char)s;
    }
  for (int c = 0; c < m->ncell; c++) {
    for (int k = 0; k < 6; k++) m->nbr[6 * c + k] = -1;
    for (int a = 0; a < m->dim; a++) {
      int fl[2];
      cell_faces(&m->view, a, c, &fl[0], &fl[1]);
      for (int side = 0; side < 2; side++) {
        if (!m->active[m->foff[a] + fl[side]]) continue;
        m->diag[c]++;
        int lo, hi;
        face_cells(&m->view, a, fl[side], &lo, &hi);
        int other = side ? hi : lo;
        if (other >= 0) m->nbr[6 * c + 2 * a + side] = other;
      }
    }
    m->insys[c] = !m->solid[c] && m->diag[c] > 0;
  }
  mic_build(m);
}

int ds_fluid_model_create(const dsFluidDef* def, dsFluidModel** out, char* err, size_t errlen) {
  if (!out) return ds__puterr(err, errlen, DS_ERR_INVALID, "ds_fluid_model_create: out is NULL");
  *out = NULL;
  if (!def) return ds__puterr(err, errlen, DS_ERR_INVALID, "ds_fluid_model_create: def is NULL");
  int rc = check_def(def, err, errlen);
  if (rc) return rc;
  dsFluidModel* m = ds__calloc(1, sizeof(dsFluidModel));
  if (!m) return ds__puterr(err, errlen, DS_ERR_NOMEM, "fluid model: out of memory");
  m->def = *def;
  m->dim = def->n[2] > 1 ? 3 : 2;
  build_grids(m);
  size_t nc = (size_t)m->ncell, nv = (size_t)m->nvel;
  int np = FL_P_SRC + FL_P_PER_SRC * def->nsource + 4 * def->nsoft;
  m->solid = ds__calloc(nc, 1);
  m->active = ds__calloc(nv, 1);
  m->src_cell = ds__calloc(nc, 1);
  m->src_face = ds__calloc(nv, 1);
  m->nbr = ds__calloc(6 * nc, sizeof(int));
  m->diag = ds__calloc(nc, sizeof(int));
  m->insys = ds__calloc(nc, 1);
  m->precon = ds__calloc(nc, sizeof(double));
  m->pname = ds__calloc((size_t)np, sizeof(*m->pname));
  m->pptr = ds__calloc((size_t)np, sizeof(double*));
  if (!m->solid || !m->active || !m->src_cell || !m->src_face || !m->nbr || !m->diag || !m->insys || !m->precon ||
      !m->pname || !m->pptr) {
    ds_fluid_model_free(m);
    return ds__puterr(err, errlen, DS_ERR_NOMEM, "fluid model: out of memory for %d cells", m->ncell);
  }
  build_params(m);
  fill_view(m);
  build_masks(m);
  m->def.solid_cells = NULL; /* the caller's array: copied into m->solid */
  if (build_vtab(m)) {
    ds_fluid_model_free(m);
    return ds__puterr(err, errlen, DS_ERR_NOMEM, "fluid model: out of memory for the interpolation tables");
  }
  if (def->solver == DS_FLUID_SOLVER_AUTO && ds__fluid_fft_build(m)) {
    ds_fluid_model_free(m);
    return ds__puterr(err, errlen, DS_ERR_NOMEM, "fluid model: out of memory for the FFT solve of %d cells", (int)nc);
  }
  *out = m;
  return 0;
}

void ds_fluid_model_free(dsFluidModel* m) {
  if (!m) return;
  ds__fluid_fft_free(m);
  ds__free(m->solid);
  ds__free(m->active);
  ds__free(m->src_cell);
  ds__free(m->src_face);
  ds__free(m->nbr);
  ds__free(m->diag);
  ds__free(m->insys);
  ds__free(m->precon);
  ds__free(m->pname);
  ds__free(m->pptr);
  ds__free(m->vtab_mem);
  ds__free(m);
}

int ds_fluid_dim(const dsFluidModel* m) { return m->dim; }
int ds_fluid_ncell(const dsFluidModel* m) { return m->ncell; }
int ds_fluid_nvel(const dsFluidModel* m) { return m->nvel; }
int ds_fluid_nface(const dsFluidModel* m, int axis) { return axis >= 0 && axis < 3 ? m->nf[axis] : 0; }
const unsigned char* ds_fluid_solid(const dsFluidModel* m) { return m->solid; }
const dsFluidDef* ds_fluid_def(const dsFluidModel* m) { return &m->def; }

int ds_fluid_nparam(const dsFluidModel* m) { return m->nparam; }
const char* ds_fluid_param_name(const dsFluidModel* m, int i) {
  return i >= 0 && i < m->nparam ? m->pname[i] : NULL;
}
int ds_fluid_param_index(const dsFluidModel* m, const char* name) {
  if (!name) return DS_ERR_INVALID;
  for (int i = 0; i < m->nparam; i++)
    if (!strcmp(m->pname[i], name)) return i;
  return DS_ERR_NOTFOUND;
}
int ds_fluid_param_get(const dsFluidModel* m, const char* name, double* value) {
  int i = ds_fluid_param_index(m, name);
  if (i < 0) return i;
  if (value) *value = *m->pptr[i];
  return 0;
}
int ds_fluid_param_set(dsFluidModel* m, const char* name, double value) {
  int i = ds_fluid_param_index(m, name);
  if (i < 0) return i;
  if (!isfinite(value)) return DS_ERR_RANGE;
  *m->pptr[i] = value;
  return 0;
}

/* ---- data ------------------------------------------------------------------ */

int ds_fluid_data_create(const dsFluidModel* m, int steps, int checkpoint_every, dsFluidData** out) {
  if (!out) return DS_ERR_INVALID;
  *out = NULL;
  if (!m || steps < 0) return DS_ERR_INVALID;
  dsFluidData* d = ds__calloc(1, sizeof(dsFluidData));
  if (!d) return DS_ERR_NOMEM;
  d->steps = steps;
  d->every = checkpoint_every > 1 ? checkpoint_every : 1;
  d->nslot = steps / d->every + 1;
  d->ssize = m->nvel + 2 * m->ncell;
  d->nvel = m->nvel;
  d->ncell = m->ncell;
  d->dim = m->dim;
  d->seg_start = -1;
  size_t S = (size_t)d->ssize, nc = (size_t)m->ncell;
  size_t npt = (size_t)(m->ncell > m->nvel ? m->ncell : m->nvel);
  int nok = 1;
#define FL_A(f, n) nok &= (d->f = ds__calloc((size_t)(n), sizeof(double))) != NULL
  FL_A(slots, (size_t)d->nslot * S);
  FL_A(seg, (size_t)(d->every + 1) * S);
  FL_A(cur, S);
  FL_A(nxt, S);
  if (m->def.force_field) FL_A(forces, (size_t)steps * nc * (size_t)m->dim + 1);
  FL_A(hat, npt);
  FL_A(back, npt);
  FL_A(ghat, npt);
  FL_A(gback, npt);
  FL_A(pi, nc);
  FL_A(r, nc);
  FL_A(z, nc);
  FL_A(s, nc);
  FL_A(as, nc);
  FL_A(blk, nc / FL_BLK + 1);
  FL_A(g0, S);
  FL_A(g1, S);
  FL_A(gf, nc * (size_t)m->dim);
  FL_A(gpar, m->nparam + 1);
  if (m->def.nsoft) FL_A(spen, S);
#undef FL_A
  nok &= (d->setmark = ds__calloc((size_t)steps + 1, 1)) != NULL;
  nok &= (d->setat = ds__calloc((size_t)steps + 1, 1)) != NULL;
  if (!nok) {
    ds_fluid_data_free(d);
    return DS_ERR_NOMEM;
  }
  *out = d;
  return ds_fluid_reset(m, d, NULL, NULL, NULL);
}

void ds_fluid_data_free(dsFluidData* d) {
  if (!d) return;
  double* arr[] = {d->slots, d->seg, d->cur, d->nxt, d->forces, d->hat, d->back, d->ghat, d->gback, d->pi, d->r,
                   d->z, d->s, d->as, d->blk, d->g0, d->g1, d->gf, d->gpar, d->spen};
  for (size_t i = 0; i < sizeof arr / sizeof arr[0]; i++) ds__free(arr[i]);
  ds__free(d->setmark);
  ds__free(d->setat);
  ds__free(d);
}

/* The arrays of ds_fluid_data_create, counted the same way. */
size_t ds_fluid_data_bytes(const dsFluidModel* m, int steps, int checkpoint_every) {
  if (!m || steps < 0) return 0;
  const size_t every = checkpoint_every > 1 ? (size_t)checkpoint_every : 1, nslot = (size_t)steps / every + 1;
  const size_t S = (size_t)m->nvel + 2 * (size_t)m->ncell, nc = (size_t)m->ncell, dim = (size_t)m->dim;
  const size_t npt = (size_t)(m->ncell > m->nvel ? m->ncell : m->nvel);
  size_t n = nslot * S + (every + 1) * S + 4 * S + 4 * npt + 5 * nc + nc / FL_BLK + 1 +
             nc * dim + (size_t)m->nparam + 1;
  if (m->def.force_field) n += (size_t)steps * nc * dim + 1;
  return n * sizeof(double) + 2 * ((size_t)steps + 1) + sizeof(dsFluidData);
}

const char* ds_fluid_last_error(const dsFluidData* d) { return d ? ds__errmsg(&d->err) : ""; }

/* d's message behind a prefix: "what: message" (copied first: the
 * message is the format's own buffer) */
static int prefix_err(dsFluidData* d, int rc, const char* what) {
  char msg[sizeof d->err.msg];
  snprintf(msg, sizeof msg, "%s", ds__errmsg(&d->err));
  return ds__seterr(&d->err, rc, "%s: %s", what, msg);
}

/* NaN or Inf in v[0..n): DS_ERR_INVALID naming field[i] */
static int check_field(dsFluidData* d, const double* v, int n, const char* field) {
  for (int i = 0; i < n; i++)
    if (!isfinite(v[i]))
      return ds__seterr(&d->err, DS_ERR_INVALID, "%s[%d] is %g (expected a finite value)", field, i, v[i]);
  return 0;
}

/* the fields into d->cur as a reset takes them (NULL: zero velocity and
 * density, ambient temperature; closed and solid faces and solid cells
 * zeroed), after checking them; 0 or DS_ERR_INVALID naming the element */
static int load_state(const dsFluidModel* m, dsFluidData* d, const double* velocity, const double* density,
                      const double* temperature) {
  int rc = 0;
  if (velocity) rc = check_field(d, velocity, m->nvel, "velocity");
  if (!rc && density) rc = check_field(d, density, m->ncell, "density");
  if (!rc && temperature) rc = check_field(d, temperature, m->ncell, "temperature");
  if (rc) return rc;
  double *u = d->cur, *rho = u + m->nvel, *T = rho + m->ncell;
  for (int f = 0; f < m->nvel; f++) u[f] = velocity && m->active[f] ? velocity[f] : 0;
  for (int c = 0; c < m->ncell; c++) {
    rho[c] = density && !m->solid[c] ? density[c] : 0;
    T[c] = m->solid[c] ? 0 : temperature ? temperature[c] : m->def.ambient_temperature;
  }
  return 0;
}

int ds_fluid_reset(const dsFluidModel* m, dsFluidData* d, const double* velocity, const double* density,
                   const double* temperature) {
  if (!m || !d) return DS_ERR_INVALID;
  ds__clearerr(&d->err);
  int rc = load_state(m, d, velocity, density, temperature);
  if (rc) return prefix_err(d, rc, "reset");
  memcpy(d->slots, d->cur, sizeof(double) * (size_t)d->ssize);
  memset(d->setmark, 0, (size_t)d->steps + 1);
  memset(d->setat, 0, (size_t)d->steps + 1);
  d->t = 0;
  d->seg_start = -1;
  d->iters = 0;
  d->resid = 0;
  return 0;
}

/* The tape keeps the states 0, K, 2K, ... and the forces; a backward
 * recomputes the states between from the checkpoint before them. A state
 * set at step t therefore becomes the tape's state there when t is a
 * checkpoint; otherwise a recomputation would start from the checkpoint
 * before t and miss it, so t is marked and a backward that would
 * recompute through it is refused. A state equal (bitwise) to the
 * current one at the current step is no change and leaves no new mark
 * (a mark already there stays: setting a set state again does not make
 * it recomputable). */
int ds_fluid_set_state(const dsFluidModel* m, dsFluidData* d, int t, const double* velocity, const double* density,
                       const double* temperature) {
  if (!m || !d) return DS_ERR_INVALID;
  ds__clearerr(&d->err);
  if (t < 0 || t > d->t)
    return ds__seterr(&d->err, DS_ERR_RANGE, "set_state: step %d (expected a step in [0, %d], the steps taken)", t,
                      d->t);
  const size_t S = (size_t)d->ssize;
  const int here = t == d->t;
  if (here) memcpy(d->nxt, d->cur, sizeof(double) * S); /* what was there, to compare */
  int rc = load_state(m, d, velocity, density, temperature);
  if (rc) { /* the state stays as it was */
    if (here) memcpy(d->cur, d->nxt, sizeof(double) * S);
    return prefix_err(d, rc, "set_state");
  }
  const int same = here && !memcmp(d->nxt, d->cur, sizeof(double) * S);
  const unsigned char was = d->setmark[t];
  memset(d->setmark + t, 0, (size_t)(d->steps - t) + 1);
  memset(d->setat + t, 0, (size_t)(d->steps - t) + 1);
  d->setat[t] = t > 0;
  if (t % d->every == 0)
    memcpy(d->slots + (size_t)(t / d->every) * S, d->cur, sizeof(double) * S);
  else
    d->setmark[t] = (unsigned char)(was || !same);
  d->t = t;
  d->seg_start = -1;
  return 0;
}

/* ---- step ------------------------------------------------------------------ */

/* steps 2-4 on (u, rho, T) in place (u advected, scalars advected), with
 * the parameter values of v (engine/fluid_body.h) */
static void sources_forces(const dsFluidModel* m, const dsFluidView* v, const double* force, double* u, double* rho,
                           double* T) {
  for (int c = 0; c < m->ncell; c++) fl_source_cell(v, c, rho, T);
  for (int a = 0; a < m->dim; a++) {
    double* ua = u + m->foff[a];
    FL_PFOR(m->nf[a] > FL_PAR_MIN, f, m->nf[a], { fl_force_face(v, a, f, force, ua, rho, T); });
  }
}

/* s1 = step(s0): 0 or DS_ERR_DIVERGED (message on d naming the step) */
static int fwd_step(const dsFluidModel* m, dsFluidData* d, const double* s0, const double* force, double* s1,
                    int t, const char* what) {
  double par[FL_P_MAX];
  dsFluidView v;
  ds__fluid_view(m, par, &v);
  if (m->def.nsoft) { /* stage 0 */
    fl_soft_fwd(&v, s0, d->spen);
    s0 = d->spen;
  }
  const double* u0 = s0;
  double *u1 = s1, *rho1 = s1 + m->nvel, *T1 = rho1 + m->ncell;
  for (int a = 0; a < m->dim; a++)
    advect_fwd(m, d, &m->faceg[a], u0 + m->foff[a], u0, u1 + m->foff[a]);
  advect_fwd(m, d, &m->cellg, s0 + m->nvel, u0, rho1);
  advect_fwd(m, d, &m->cellg, s0 + m->nvel + m->ncell, u0, T1);
  sources_forces(m, &v, force, u1, rho1, T1);
  if (fl_project(m, d, u1))
    return ds__seterr(&d->err, DS_ERR_DIVERGED,
                      "%s %d: pressure solve did not converge in %d iterations (max|residual| / max|rhs| = %.3g, "
                      "tolerance %.3g)",
                      what, t, d->iters, d->resid, m->def.tolerance);
  for (int i = 0; i < d->ssize; i++)
    if (!isfinite(s1[i])) return ds__seterr(&d->err, DS_ERR_DIVERGED, "%s %d: state[%d] is %g", what, t, i, s1[i]);
  return 0;
}

int ds_fluid_step(const dsFluidModel* m, dsFluidData* d, const double* force) {
  if (!m || !d) return DS_ERR_INVALID;
  ds__clearerr(&d->err);
  if (d->t >= d->steps)
    return ds__seterr(&d->err, DS_ERR_STATE, "step %d: the tape holds %d steps (ds_fluid_data_create)", d->t,
                      d->steps);
  if (force && !m->def.force_field)
    return ds__seterr(&d->err, DS_ERR_INVALID, "step %d: a force field needs force_field = 1 in the model", d->t);
  double umax = fl_maxabs(d->cur, m->nvel), cfl = m->def.dt * umax / m->def.dx;
  if (cfl > m->def.cfl_max)
    return ds__seterr(&d->err, DS_ERR_RANGE,
                      "step %d: CFL number dt max|u| / dx = %g * %g / %g = %g exceeds cfl_max = %g (lower dt or "
                      "raise cfl_max)",
                      d->t, m->def.dt, umax, m->def.dx, cfl, m->def.cfl_max);
  if (force) {
    int rc = check_field(d, force, m->ncell * m->dim, "force");
    if (rc) {
      char what[48];
      snprintf(what, sizeof what, "step %d: force field", d->t);
      return prefix_err(d, rc, what);
    }
  }
  int rc = fwd_step(m, d, d->cur, force, d->nxt, d->t, "step");
  if (rc) return rc;
  if (d->forces) {
    double* fr = d->forces + (size_t)d->t * m->ncell * m->dim;
    for (int i = 0; i < m->ncell * m->dim; i++) fr[i] = force ? force[i] : 0;
  }
  double* tmp = d->cur;
  d->cur = d->nxt;
  d->nxt = tmp;
  d->t++;
  d->seg_start = -1;
  if (d->t % d->every == 0) memcpy(d->slots + (size_t)(d->t / d->every) * d->ssize, d->cur, sizeof(double) * d->ssize);
  return 0;
}

int ds_fluid_steps(const dsFluidData* d) { return d->t; }
const double* ds_fluid_velocity(const dsFluidData* d) { return d->cur; }
const double* ds_fluid_density(const dsFluidData* d) { return d->cur + d->nvel; }
const double* ds_fluid_temperature(const dsFluidData* d) { return d->cur + d->nvel + d->ncell; }
void ds_fluid_solver_stats(const dsFluidData* d, int* iterations, double* residual) {
  if (iterations) *iterations = d->iters;
  if (residual) *residual = d->resid;
}

int ds_fluid_divergence(const dsFluidModel* m, const double* velocity, double* div) {
  if (!m || !velocity || !div) return DS_ERR_INVALID;
  for (int c = 0; c < m->ncell; c++) {
    double v = 0;
    for (int a = 0; a < m->dim; a++) {
      int flo, fhi;
      cell_faces(&m->view, a, c, &flo, &fhi);
      v += velocity[m->foff[a] + fhi] - velocity[m->foff[a] + flo];
    }
    div[c] = m->solid[c] ? 0 : v / m->def.dx;
  }
  return 0;
}

/* ---- backward -------------------------------------------------------------- */

/* states t and t + 1 for the backward pass: the tape's, or (checkpoints)
 * the segment from the checkpoint at or before t, recomputed when needed.
 * Where set_state put a state at t + 1, the tape there is not step t's
 * output, which step t's adjoint reads (the set state acts as that output
 * plus a constant): then step t is recomputed from state t (a segment of
 * one), as a checkpointed tape recomputes it, so both give the same bits. */
static int seg_states(const dsFluidModel* m, dsFluidData* d, int t, double** s0, double** s1) {
  size_t S = (size_t)d->ssize;
  if (d->every == 1 && !d->setat[t + 1]) {
    *s0 = d->slots + (size_t)t * S;
    *s1 = d->slots + (size_t)(t + 1) * S;
    return 0;
  }
  int K = d->every, start = (t / K) * K;
  if (d->seg_start != start) {
    memcpy(d->seg, d->slots + (size_t)(start / K) * S, sizeof(double) * S);
    int n = d->t - start < K ? d->t - start : K;
    for (int j = 0; j < n; j++) {
      const double* f = d->forces ? d->forces + (size_t)(start + j) * d->ncell * d->dim : NULL;
      int rc = fwd_step(m, d, d->seg + (size_t)j * S, f, d->seg + (size_t)(j + 1) * S, start + j, "recomputed step");
      if (rc) return rc;
    }
    d->seg_start = start;
  }
  *s0 = d->seg + (size_t)(t - start) * S;
  *s1 = *s0 + S;
  return 0;
}

/* adjoint of step t: g1 (the adjoint of s1, consumed) -> d->g0 (of s0),
 * d->gf (of the force field), added to d->gpar */
static int bwd_step(const dsFluidModel* m, dsFluidData* d, const double* s0, const double* s1, double* g1, int t) {
  const dsFluidDef* def = &m->def;
  double *gpar = d->gpar, *gf = d->gf;
  if (fl_project(m, d, g1))
    return ds__seterr(&d->err, DS_ERR_DIVERGED,
                      "backward step %d: adjoint pressure solve did not converge in %d iterations (max|residual| / "
                      "max|rhs| = %.3g, tolerance %.3g)",
                      t, d->iters, d->resid, def->tolerance);
  double par[FL_P_MAX];
  dsFluidView v;
  ds__fluid_view(m, par, &v);
  fl_bwd_sources(&v, s1, g1, gf, gpar);
  double* g0 = d->g0;
  memset(g0, 0, sizeof(double) * (size_t)d->ssize);
  if (m->def.nsoft) { /* the advection read stage 0's state */
    fl_soft_fwd(&v, s0, d->spen);
    s0 = d->spen;
  }
  for (int k = 0; k < m->dim + 2; k++) advect_bwd(m, d, k, s0, g1, g0);
  if (m->def.nsoft) fl_soft_bwd_all(&v, s0, g0, gpar);
  return 0;
}

int ds_fluid_backward(const dsFluidModel* m, dsFluidData* d, const double* dl_dvel, const double* dl_ddens,
                      const double* dl_dtemp, const dsFluidGrad* g) {
  return ds_fluid_backward_terms(m, d, dl_dvel, dl_ddens, dl_dtemp, 0, NULL, NULL, g);
}

/* The backward is linear in its seed, so a loss sum_k L_k(rho(at_k)) on
 * several states adds each dL_k/drho(at_k) to the running adjoint of the
 * state after step at_k when the sweep reaches it: one sweep for all terms. */
static void add_terms(const dsFluidModel* m, double* g1, int t, int nterm, const int* at,
                      const double* const* dl_ddens_at) {
  for (int k = 0; k < nterm; k++)
    if (at[k] == t)
      for (int c = 0; c < m->ncell; c++) g1[m->nvel + c] += dl_ddens_at[k][c];
}

/* The sweep from the adjoint of state t1 (in d->g1) down to state t0:
 * rows t0 .. t1 - 1 of g->force, the window's sums into g->force_total and
 * g->param, the adjoint of state t0 (masked as a reset or set_state
 * masks) into g's state arrays. */
static int sweep(const dsFluidModel* m, dsFluidData* d, int t0, int t1, int nterm, const int* at,
                 const double* const* dl_ddens_at, const dsFluidGrad* g) {
  const int nv = m->nvel, nc = m->ncell, nfc = nc * m->dim;
  double* g1 = d->g1;
  memset(d->gpar, 0, sizeof(double) * (size_t)m->nparam);
  if (g->force_total) memset(g->force_total, 0, sizeof(double) * (size_t)nfc);
  for (int t = t1 - 1; t >= t0; t--) {
    double *s0, *s1;
    add_terms(m, g1, t + 1, nterm, at, dl_ddens_at);
    int rc = seg_states(m, d, t, &s0, &s1);
    if (!rc) rc = bwd_step(m, d, s0, s1, g1, t);
    if (rc) return rc;
    if (g->force) memcpy(g->force + (size_t)t * nfc, d->gf, sizeof(double) * (size_t)nfc);
    if (g->force_total)
      for (int i = 0; i < nfc; i++) g->force_total[i] += d->gf[i];
    double* tmp = d->g0;
    d->g0 = g1;
    d->g1 = g1 = tmp;
  }
  add_terms(m, g1, t0, nterm, at, dl_ddens_at);
  /* the reset (and set_state) zero closed and solid faces and solid cells */
  if (g->velocity0)
    for (int f = 0; f < nv; f++) g->velocity0[f] = m->active[f] ? g1[f] : 0;
  for (int c = 0; c < nc; c++) {
    if (g->density0) g->density0[c] = m->solid[c] ? 0 : g1[nv + c];
    if (g->temperature0) g->temperature0[c] = m->solid[c] ? 0 : g1[nv + nc + c];
  }
  if (g->param) memcpy(g->param, d->gpar, sizeof(double) * (size_t)m->nparam);
  return 0;
}

/* the seed: dL/d(state t1) into d->g1 */
static void seed(const dsFluidModel* m, dsFluidData* d, const double* dl_dvel, const double* dl_ddens,
                 const double* dl_dtemp) {
  const int nv = m->nvel, nc = m->ncell;
  double* g1 = d->g1;
  for (int i = 0; i < nv; i++) g1[i] = dl_dvel ? dl_dvel[i] : 0;
  for (int i = 0; i < nc; i++) {
    g1[nv + i] = dl_ddens ? dl_ddens[i] : 0;
    g1[nv + nc + i] = dl_dtemp ? dl_dtemp[i] : 0;
  }
}

/* a set state off a checkpoint in the segments a sweep over [t0, t1) recomputes */
static int check_marks(dsFluidData* d, int t0, int t1) {
  for (int t = (t0 / d->every) * d->every; t < t1; t++)
    if (d->setmark[t])
      return ds__seterr(&d->err, DS_ERR_RANGE,
                        "backward: a state was set at step %d, not a checkpoint (checkpoint_every %d): the backward "
                        "would recompute its segment from the checkpoint before it",
                        t, d->every);
  return 0;
}

static int check_terms(dsFluidData* d, int t0, int t1, int nterm, const int* at, const double* const* dl_ddens_at) {
  for (int k = 0; k < nterm; k++)
    if (at[k] < t0 || at[k] > t1 || !dl_ddens_at[k])
      return ds__seterr(&d->err, DS_ERR_INVALID, "backward: term %d: at %d (expected a step in [%d, %d] and an array)",
                        k, at[k], t0, t1);
  return 0;
}

int ds_fluid_backward_terms(const dsFluidModel* m, dsFluidData* d, const double* dl_dvel, const double* dl_ddens,
                            const double* dl_dtemp, int nterm, const int* at, const double* const* dl_ddens_at,
                            const dsFluidGrad* g) {
  if (!m || !d || !g || nterm < 0 || (nterm && (!at || !dl_ddens_at))) return DS_ERR_INVALID;
  ds__clearerr(&d->err);
  int rc = check_marks(d, 0, d->t);
  if (!rc) rc = check_terms(d, 0, d->t, nterm, at, dl_ddens_at);
  if (rc) return rc;
  seed(m, d, dl_dvel, dl_ddens, dl_dtemp);
  if (g->force) memset(g->force, 0, sizeof(double) * (size_t)d->steps * m->ncell * m->dim);
  return sweep(m, d, 0, d->t, nterm, at, dl_ddens_at, g);
}

/* A window's backward is the whole one's sweep started at state t1 and
 * stopped at state t0: the adjoint recursion g_t = B_t^T g_{t+1} (+ the
 * terms at t) needs nothing from outside [t0, t1] but the states, which
 * the tape (or a recomputed segment) gives. */
int ds_fluid_backward_window(const dsFluidModel* m, dsFluidData* d, int t0, int t1, const double* dl_dvel,
                             const double* dl_ddens, const double* dl_dtemp, int nterm, const int* at,
                             const double* const* dl_ddens_at, const dsFluidGrad* g) {
  if (!m || !d || !g || nterm < 0 || (nterm && (!at || !dl_ddens_at))) return DS_ERR_INVALID;
  ds__clearerr(&d->err);
  if (t0 < 0 || t0 > t1 || t1 > d->t)
    return ds__seterr(&d->err, DS_ERR_RANGE, "backward window: steps [%d, %d) (expected 0 <= t0 <= t1 <= %d, the "
                      "steps taken)", t0, t1, d->t);
  int rc = check_marks(d, t0, t1);
  if (!rc) rc = check_terms(d, t0, t1, nterm, at, dl_ddens_at);
  if (rc) return rc;
  seed(m, d, dl_dvel, dl_ddens, dl_dtemp);
  return sweep(m, d, t0, t1, nterm, at, dl_ddens_at, g);
}

/* ---- 2-D density image -----------------------------------------------------
 *
 * Forward: t = 1 - exp(-scale rho); the colour map's segment k (the last
 * stop with t[k] <= t, at most n - 2), u = (t - t[k]) / (t[k+1] - t[k]),
 * colour = rgb[k] + (rgb[k+1] - rgb[k]) u. With the two-stop SMOKE map u = t
 * exactly, so the image is bit for bit the original bg + (smoke - bg) t.
 * Backward: dcolour/drho = (rgb[k+1] - rgb[k]) / (t[k+1] - t[k]) scale
 * exp(-scale rho), in the segment the forward used (the map has a kink at
 * every inner stop: the derivative from the right is taken there). */

static const double render_bg[3] = DS_FLUID_RENDER_BG, render_smoke[3] = DS_FLUID_RENDER_SMOKE,
                    render_solid[3] = DS_FLUID_RENDER_SOLID;

/* Stock tables (t, r, g, b): viridis and inferno are every 16th entry (and
 * the last) of the published 256-entry maps of van der Walt and Smith. */
#define CMAP_STOCK_STOPS 17
static const double cmap_viridis[CMAP_STOCK_STOPS][3] = {
    {0.267004, 0.004874, 0.329415}, {0.282327, 0.094955, 0.417331}, {0.278826, 0.175490, 0.483397},
    {0.258965, 0.251537, 0.524736}, {0.229739, 0.322361, 0.545706}, {0.199430, 0.387607, 0.554642},
    {0.172719, 0.448791, 0.557885}, {0.149039, 0.508051, 0.557250}, {0.127568, 0.566949, 0.550556},
    {0.120638, 0.625828, 0.533488}, {0.157851, 0.683765, 0.501686}, {0.246070, 0.738910, 0.452024},
    {0.369214, 0.788888, 0.382914}, {0.515992, 0.831158, 0.294279}, {0.678489, 0.863742, 0.189503},
    {0.845561, 0.887322, 0.099702}, {0.993248, 0.906157, 0.143936}};
static const double cmap_inferno[CMAP_STOCK_STOPS][3] = {
    {0.001462, 0.000466, 0.013866}, {0.042253, 0.028139, 0.141141}, {0.129285, 0.047293, 0.290788},
    {0.238273, 0.036621, 0.396353}, {0.341500, 0.062325, 0.429425}, {0.441207, 0.099338, 0.431594},
    {0.540920, 0.134729, 0.415123}, {0.640135, 0.171438, 0.381065}, {0.735683, 0.215906, 0.330245},
    {0.822386, 0.275197, 0.266085}, {0.894305, 0.353399, 0.193584}, {0.946965, 0.449191, 0.115272},
    {0.978422, 0.557937, 0.034931}, {0.987874, 0.675267, 0.065257}, {0.974638, 0.797692, 0.206332},
    {0.947594, 0.917399, 0.410665}, {0.988362, 0.998364, 0.644924}};

static void cmap_two(dsFluidColormap* map, const double* c0, const double* c1) {
  map->n = 2;
  map->t[0] = 0, map->t[1] = 1;
  memcpy(map->rgb[0], c0, sizeof(double) * 3);
  memcpy(map->rgb[1], c1, sizeof(double) * 3);
}

int ds_fluid_colormap(dsFluidColormapName name, dsFluidColormap* map) {
  static const double black[3] = {0, 0, 0}, white[3] = {1, 1, 1};
  if (!map) return DS_ERR_INVALID;
  memset(map, 0, sizeof *map);
  if (name == DS_FLUID_COLORMAP_SMOKE) cmap_two(map, render_bg, render_smoke);
  else if (name == DS_FLUID_COLORMAP_GREY) cmap_two(map, black, white);
  else if (name == DS_FLUID_COLORMAP_VIRIDIS || name == DS_FLUID_COLORMAP_INFERNO) {
    map->n = CMAP_STOCK_STOPS;
    for (int k = 0; k < CMAP_STOCK_STOPS; k++) {
      map->t[k] = k / (double)(CMAP_STOCK_STOPS - 1);
      memcpy(map->rgb[k], name == DS_FLUID_COLORMAP_VIRIDIS ? cmap_viridis[k] : cmap_inferno[k], sizeof(double) * 3);
    }
  } else
    return DS_ERR_INVALID;
  return 0;
}

int ds_fluid_colormap_check(const dsFluidColormap* map, char* err, size_t errlen) {
  char tmp[8];
  if (!err || !errlen) err = tmp, errlen = sizeof tmp;
  if (!map) return snprintf(err, errlen, "colour map: NULL"), DS_ERR_INVALID;
  if (map->n < 2 || map->n > DS_FLUID_COLORMAP_MAX)
    return snprintf(err, errlen, "colour map: %d stops (expected 2 to %d)", map->n, DS_FLUID_COLORMAP_MAX),
           DS_ERR_INVALID;
  if (map->t[0] != 0 || map->t[map->n - 1] != 1)
    return snprintf(err, errlen, "colour map: stops at t = %g ... %g (expected the first at 0, the last at 1)",
                    map->t[0], map->t[map->n - 1]),
           DS_ERR_INVALID;
  for (int k = 0; k < map->n; k++) {
    if (k && !(map->t[k] > map->t[k - 1]))
      return snprintf(err, errlen, "colour map: stop %d at t = %g after %g (expected t increasing)", k, map->t[k],
                      map->t[k - 1]),
             DS_ERR_INVALID;
    for (int ch = 0; ch < 3; ch++)
      if (!(map->rgb[k][ch] >= 0 && map->rgb[k][ch] <= 1))
        return snprintf(err, errlen, "colour map: stop %d, channel %d = %g (expected a colour in [0, 1])", k, ch,
                        map->rgb[k][ch]),
               DS_ERR_INVALID;
  }
  return 0;
}

/* the image pixel (row, col) of cell c: y up, row 0 at the top */
static inline int render_pixel(const dsFluidModel* m, int c) {
  int nx = m->def.n[0], ny = m->def.n[1];
  return (ny - 1 - c / nx) * nx + c % nx;
}

/* the segment of t: the last stop k <= n - 2 with t[k] <= t (0 below t[0]) */
static inline int cmap_segment(const dsFluidColormap* map, double t) {
  int k = 0;
  while (k < map->n - 2 && map->t[k + 1] <= t) k++;
  return k;
}

static int render_args(const dsFluidModel* m, const double* density, double scale, const dsFluidColormap* map,
                       const void* out) {
  if (!m || !density || !out || !(scale > 0) || ds_fluid_colormap_check(map, NULL, 0)) return DS_ERR_INVALID;
  return m->dim != 2 ? DS_ERR_UNSUPPORTED : 0;
}

int ds_fluid_render_density_map(const dsFluidModel* m, const double* density, double scale,
                                const dsFluidColormap* map, dsReal* rgba) {
  dsFluidColormap smoke;
  if (!map) ds_fluid_colormap(DS_FLUID_COLORMAP_SMOKE, &smoke), map = &smoke;
  int rc = render_args(m, density, scale, map, rgba);
  if (rc) return rc;
  for (int c = 0; c < m->ncell; c++) {
    double t = 1 - exp(-scale * density[c]);
    int k = cmap_segment(map, t);
    double u = (t - map->t[k]) / (map->t[k + 1] - map->t[k]);
    const double *c0 = map->rgb[k], *c1 = map->rgb[k + 1];
    dsReal* px = rgba + 4 * (size_t)render_pixel(m, c);
    for (int ch = 0; ch < 3; ch++) px[ch] = (dsReal)(m->solid[c] ? render_solid[ch] : c0[ch] + (c1[ch] - c0[ch]) * u);
    px[3] = 1;
  }
  return 0;
}

int ds_fluid_render_density_map_bwd(const dsFluidModel* m, const double* density, double scale,
                                    const dsFluidColormap* map, const dsReal* g_rgba, double* g_density) {
  dsFluidColormap smoke;
  if (!map) ds_fluid_colormap(DS_FLUID_COLORMAP_SMOKE, &smoke), map = &smoke;
  int rc = render_args(m, density, scale, map, g_rgba);
  if (rc || !g_density) return rc ? rc : DS_ERR_INVALID;
  for (int c = 0; c < m->ncell; c++) {
    if (m->solid[c]) continue; /* drawn in a constant colour */
    const dsReal* g = g_rgba + 4 * (size_t)render_pixel(m, c);
    double e = exp(-scale * density[c]);
    int k = cmap_segment(map, 1 - e);
    double du = scale * e / (map->t[k + 1] - map->t[k]), s = 0;
    for (int ch = 0; ch < 3; ch++) s += (double)g[ch] * (map->rgb[k + 1][ch] - map->rgb[k][ch]);
    g_density[c] += s * du;
  }
  return 0;
}

int ds_fluid_render_density(const dsFluidModel* m, const double* density, double scale, dsReal* rgba) {
  return ds_fluid_render_density_map(m, density, scale, NULL, rgba);
}

int ds_fluid_render_density_bwd(const dsFluidModel* m, const double* density, double scale, const dsReal* g_rgba,
                                double* g_density) {
  return ds_fluid_render_density_map_bwd(m, density, scale, NULL, g_rgba, g_density);
}
