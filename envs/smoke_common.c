/* Shared parts of the fluid envs (envs/smoke_common.h). */
#include "envs/smoke_common.h"

#include "dsim/config_dirs.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- the engine: serial data or a batch of one ------------------------------------- */

int ds__smoke_batched(const dsEnvDef* def) { return def->batch_engine || def->device.kind == DS_DEVICE_CUDA; }

/* the model of c->fdef and c->obs with solver `solver` */
static int make_model(dsEnv* e, dsSmokeCore* c, int solver, dsFluidModel** out) {
  dsFluidDef fd = c->fdef;
  fd.solver = solver;
  char err[512] = "";
  int rc = ds__smoke_fluid_create(fd, &c->obs, out, err, sizeof err);
  return rc ? ds_env_set_errorf(e, rc, "%s%s", strncmp(err, "obstacle", 8) ? "fluid: " : "", err) : 0;
}

/* the solver the engine takes: the batch solves with PCG only */
static int engine_solver(const dsSmokeCore* c, int batched) {
  return batched ? DS_FLUID_SOLVER_PCG : c->fdef.solver;
}

int ds__smoke_core_model(dsEnv* e, dsSmokeCore* c, const dsFluidDef* fd, const dsSmokeObstacle* o) {
  c->fdef = *fd;
  c->obs = *o;
  return make_model(e, c, engine_solver(c, ds__smoke_batched(ds_env_def(e))), &c->fm);
}

/* A model with the other solver, the parameter values carried over (the
 * same definition: the same names in the same order). */
static int remake_model(dsEnv* e, dsSmokeCore* c, int solver) {
  dsFluidModel* m = NULL;
  int rc = make_model(e, c, solver, &m);
  for (int i = 0; i < c->nparam && !rc; i++) {
    double v = 0;
    const char* name = ds_fluid_param_name(c->fm, i);
    ds_fluid_param_get(c->fm, name, &v);
    rc = ds_fluid_param_set(m, name, v);
  }
  if (rc) {
    const int made = m != NULL; /* else make_model has set the message */
    ds_fluid_model_free(m);
    return made ? ds_env_set_errorf(e, rc, "fluid: carrying the parameters over (%s)", ds_strerror(rc)) : rc;
  }
  ds_fluid_model_free(c->fm);
  c->fm = m;
  return 0;
}

static void engine_free(dsSmokeCore* c) {
  ds_fluid_data_free(c->fd);
  ds_fluid_batch_free(c->fb);
  c->fd = NULL;
  c->fb = NULL;
}

int ds__smoke_engine(dsEnv* e, dsSmokeCore* c, int every, int* fresh) {
  const dsEnvDef* def = ds_env_def(e);
  const int batched = ds__smoke_batched(def);
  *fresh = 0;
  if (batched ? c->fb && c->fb_dev.kind == def->device.kind && c->fb_dev.index == def->device.index : c->fd != NULL)
    return 0; /* a rebuild keeps the physics */
  engine_free(c);
  const int solver = engine_solver(c, batched);
  int rc = ds_fluid_def(c->fm)->solver != solver ? remake_model(e, c, solver) : 0;
  if (rc) return rc;
  if (!batched) {
    rc = ds_fluid_data_create(c->fm, c->T, every, &c->fd);
    if (rc) return ds_env_set_errorf(e, rc, "the fluid's tape (%s)", ds_strerror(rc));
  } else {
    char err[512] = "", dn[32];
    rc = ds_fluid_batch_create(c->fm, 1, c->T, every, def->device, &c->fb, err, sizeof err);
    if (rc)
      return ds_env_set_errorf(e, rc, "the fluid on the batched engine (%s): %s",
                               ds_device_name(def->device, dn, sizeof dn), err);
    c->fb_dev = def->device;
    if (!c->cur_dens && !(c->cur_dens = (double*)ds_calloc((size_t)c->ncell + 1, sizeof(double))))
      return ds_env_set_errorf(e, DS_ERR_NOMEM, "out of memory");
  }
  *fresh = 1;
  return 0;
}

size_t ds__smoke_engine_bytes(const dsSmokeCore* c, int substeps, int every) {
  /* the batch keeps what the serial data keeps, on its device, plus the
     solve's vectors: the serial figure is the host's share either way */
  return ds_fluid_data_bytes(c->fm, substeps, every) + (size_t)c->ncell * sizeof(double);
}

/* the batch's current density into cur_dens (its read-back errors are the step's) */
static int read_density(dsSmokeCore* c) { return c->fb ? ds_fluid_batch_state(c->fb, 0, NULL, c->cur_dens, NULL) : 0; }

int ds__smoke_reset(dsEnv* e, dsSmokeCore* c, const double* dens, const char* what) {
  int rc = c->fb ? ds_fluid_batch_reset(c->fb, NULL, dens, NULL, 0) : ds_fluid_reset(c->fm, c->fd, NULL, dens, NULL);
  if (!rc) rc = read_density(c);
  return rc ? ds__smoke_fail(e, c, rc, what) : 0;
}

int ds__smoke_advance(dsEnv* e, dsSmokeCore* c, const double* force, const char* what) {
  int rc = c->fb ? ds_fluid_batch_step(c->fb, force) : ds_fluid_step(c->fm, c->fd, force);
  if (!rc) rc = read_density(c);
  return rc ? ds__smoke_fail(e, c, rc, what) : 0;
}

const double* ds__smoke_density(const dsSmokeCore* c) { return c->fb ? c->cur_dens : ds_fluid_density(c->fd); }

int ds__smoke_steps(const dsSmokeCore* c) { return c->fb ? ds_fluid_batch_steps(c->fb) : ds_fluid_steps(c->fd); }

/* ---- parameters and arrays --------------------------------------------------------- */

int ds__smoke_core_alloc(dsSmokeCore* c) {
  const size_t nc = (size_t)c->ncell;
  c->nparam = ds_fluid_nparam(c->fm);
  const size_t np = (size_t)c->nparam + 1;
  c->dens0 = (double*)ds_calloc(nc, sizeof(double));
  c->gdens0 = (double*)ds_calloc(nc, sizeof(double));
  c->pgrad = (double*)ds_calloc(np, sizeof(double));
  c->r_dens0 = (dsReal*)ds_calloc(nc, sizeof(dsReal));
  c->r_gdens0 = (dsReal*)ds_calloc(nc, sizeof(dsReal));
  c->r_param = (dsReal*)ds_calloc(np, sizeof(dsReal));
  c->r_pgrad = (dsReal*)ds_calloc(np, sizeof(dsReal));
  if (!c->dens0 || !c->gdens0 || !c->pgrad || !c->r_dens0 || !c->r_gdens0 || !c->r_param || !c->r_pgrad)
    return DS_ERR_NOMEM;
  c->nvel = ds_fluid_nvel(c->fm);
  c->ssize = c->nvel + 2 * c->ncell;
  c->nstep = c->C > 0 ? (c->T + c->C - 1) / c->C : 0;
  const size_t ns = c->grads ? (size_t)c->nstep : 0, S = (size_t)c->ssize + 1;
  c->stepd = (double*)ds_calloc(ns * nc + 1, sizeof(double));
  c->gstep = (double*)ds_calloc(ns * nc + 1, sizeof(double));
  c->has = (int*)ds_calloc(ns + 1, sizeof(int));
  c->at = (int*)ds_calloc(ns + 1, sizeof(int));
  c->terms = (const double**)ds_calloc(ns + 1, sizeof(double*));
  c->sbuf = (double*)ds_calloc(S, sizeof(double));
  c->gstate = (double*)ds_calloc(S, sizeof(double));
  if (ds_fluid_def(c->fm)->force_field && c->grads)
    c->gforce = (double*)ds_calloc((size_t)c->T * nc * (size_t)ds_fluid_dim(c->fm) + 1, sizeof(double));
  if (!c->stepd || !c->gstep || !c->has || !c->at || !c->terms || !c->sbuf || !c->gstate ||
      (ds_fluid_def(c->fm)->force_field && c->grads && !c->gforce))
    return DS_ERR_NOMEM;
  for (int i = 0; i < c->nparam; i++) {
    double v = 0;
    ds_fluid_param_get(c->fm, ds_fluid_param_name(c->fm, i), &v);
    c->r_param[i] = (dsReal)v;
  }
  return 0;
}

void ds__smoke_core_free(dsSmokeCore* c) {
  engine_free(c);
  ds_fluid_model_free(c->fm);
  ds_free(c->cur_dens);
  void* bufs[] = {c->dens0, c->gdens0, c->pgrad,  c->r_dens0, c->r_gdens0, c->r_param,       c->r_pgrad,
                  c->stepd, c->gstep,  c->has,    c->at,      (void*)c->terms, c->sbuf,
                  c->gstate, c->gforce};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ds_free(bufs[i]);
  memset(c, 0, sizeof *c);
}

const char* ds__smoke_param_name(const dsSmokeCore* c, int i) {
  return i < c->nparam ? ds_fluid_param_name(c->fm, i) : i == c->nparam ? "initial_density" : NULL;
}

int ds__smoke_param(const dsSmokeCore* c, const char* name, const dsReal** values, const dsReal** grad, int* count) {
  if (!strcmp(name, "initial_density")) {
    if (values) *values = c->r_dens0;
    if (grad) *grad = c->r_gdens0;
    if (count) *count = c->ncell;
    return 0;
  }
  const int i = ds_fluid_param_index(c->fm, name);
  if (i < 0) return DS_ERR_NOTFOUND;
  if (values) *values = c->r_param + i;
  if (grad) *grad = c->r_pgrad + i;
  if (count) *count = 1;
  return 0;
}

int ds__smoke_set_param(dsEnv* e, dsSmokeCore* c, const char* name, const dsReal* v, int count) {
  const int dens = !strcmp(name, "initial_density"), i = dens ? -1 : ds_fluid_param_index(c->fm, name);
  if (!dens && i < 0) return ds_env_set_errorf(e, DS_ERR_NOTFOUND, "set_param: %s: no such parameter", name);
  const int want = dens ? c->ncell : 1;
  if (count != want)
    return ds_env_set_errorf(e, DS_ERR_RANGE, "set_param %s: %d values (expected %d)", name, count, want);
  for (int k = 0; k < count; k++)
    if (!isfinite((double)v[k]) || (dens && v[k] < 0))
      return ds_env_set_errorf(e, DS_ERR_RANGE, "set_param %s[%d]: %g (expected a finite value%s)", name, k,
                               (double)v[k], dens ? " >= 0" : "");
  if (dens) {
    for (int k = 0; k < count; k++) c->dens0[k] = c->r_dens0[k] = v[k];
    return 0;
  }
  int rc = ds_fluid_param_set(c->fm, name, (double)v[0]);
  if (!rc && c->fb) rc = ds_fluid_batch_set_param(c->fb, -1, name, (double)v[0]);
  if (rc) return ds_env_set_errorf(e, rc, "set_param %s: %s", name, ds_strerror(rc));
  c->r_param[i] = v[0];
  return 0;
}

void ds__smoke_core_grads(dsSmokeCore* c) {
  for (int k = 0; k < c->ncell; k++) c->r_gdens0[k] = (dsReal)c->gdens0[k];
  for (int i = 0; i < c->nparam; i++) c->r_pgrad[i] = (dsReal)c->pgrad[i];
}

size_t ds__smoke_core_bytes(const dsSmokeCore* c, int force_field) {
  const size_t nc = (size_t)c->ncell, ns = c->grads ? (size_t)((c->T + c->C - 1) / c->C) : 0;
  const size_t S = (size_t)ds_fluid_nvel(c->fm) + 2 * nc;
  size_t n = 2 * ns * nc * sizeof(double) + ns * (2 * sizeof(int) + sizeof(double*)) + 2 * S * sizeof(double);
  if (force_field && c->grads) n += (size_t)c->T * nc * (size_t)ds_fluid_dim(c->fm) * sizeof(double);
  return n;
}

/* ---- states and windows ------------------------------------------------------------ */

int ds__smoke_state_size(const dsSmokeCore* c) { return ds_fluid_nvel(c->fm) + 2 * c->ncell; }

int ds__smoke_get_state(dsSmokeCore* c, dsReal* state) {
  const int nv = ds_fluid_nvel(c->fm);
  const double *u, *rho, *T;
  if (c->fb) { /* read back into the scratch state */
    int rc = ds_fluid_batch_state(c->fb, 0, c->sbuf, c->sbuf + nv, c->sbuf + nv + c->ncell);
    if (rc) return rc;
    u = c->sbuf, rho = u + nv, T = rho + c->ncell;
  } else {
    u = ds_fluid_velocity(c->fd), rho = ds_fluid_density(c->fd), T = ds_fluid_temperature(c->fd);
  }
  for (int i = 0; i < nv; i++) state[i] = (dsReal)u[i];
  for (int i = 0; i < c->ncell; i++) state[nv + i] = (dsReal)rho[i], state[nv + c->ncell + i] = (dsReal)T[i];
  return 0;
}

int ds__smoke_set_state(dsEnv* e, dsSmokeCore* c, int s, const dsReal* state) {
  const int n = c->ssize, nv = c->nvel;
  for (int i = 0; i < n; i++) c->sbuf[i] = (double)state[i];
  int rc = c->fb ? ds_fluid_batch_set_state(c->fb, s, c->sbuf, c->sbuf + nv, c->sbuf + nv + c->ncell, 0)
                 : ds_fluid_set_state(c->fm, c->fd, s, c->sbuf, c->sbuf + nv, c->sbuf + nv + c->ncell);
  if (!rc) rc = read_density(c);
  if (rc) return ds__smoke_fail(e, c, rc, "set_state");
  if (s > 0) ds__smoke_keep_step(c, (s - 1) / c->C, s - 1);
  return 0;
}

void ds__smoke_keep_step(dsSmokeCore* c, int k, int s) {
  if (c->grads && k >= 0 && k < c->nstep && (s + 1 == c->T || (s + 1) % c->C == 0))
    memcpy(c->stepd + (size_t)k * c->ncell, ds__smoke_density(c), sizeof(double) * (size_t)c->ncell);
}

double* ds__smoke_step_term(dsSmokeCore* c, int k) {
  if (!c->grads || k < 0 || k >= c->nstep) return NULL;
  double* g = c->gstep + (size_t)k * c->ncell;
  if (!c->has[k]) memset(g, 0, sizeof(double) * (size_t)c->ncell);
  c->has[k] = 1;
  return g;
}

/* the kept terms of steps ending in (s0, s1], all consumed */
static int window_terms(dsSmokeCore* c, int s0, int s1) {
  int nterm = 0;
  for (int k = 0; k < c->nstep && c->grads; k++)
    if (c->has[k]) {
      const int tk = (k + 1) * c->C < c->T ? (k + 1) * c->C : c->T;
      c->has[k] = 0; /* consumed: the next backward starts afresh */
      if (tk <= s0 || tk > s1) continue; /* outside the window (or a step not taken) */
      c->at[nterm] = tk;
      c->terms[nterm++] = c->gstep + (size_t)k * c->ncell;
    }
  return nterm;
}

int ds__smoke_window(dsEnv* e, dsSmokeCore* c, int s0, int s1, const dsReal* adj_final, const double* gdens_final,
                     dsReal* grad_state0) {
  const int n = c->ssize, nv = c->nvel, nc = c->ncell;
  for (int i = 0; i < n; i++) c->sbuf[i] = adj_final ? (double)adj_final[i] : 0;
  for (int i = 0; i < nc && gdens_final; i++) c->sbuf[nv + i] += gdens_final[i];
  const int nterm = window_terms(c, s0, s1);
  const dsFluidGrad g = {c->gstate, c->gstate + nv, c->gstate + nv + nc, c->gforce, NULL, c->pgrad};
  int rc = c->fb ? ds_fluid_batch_backward_window(c->fb, s0, s1, c->sbuf, c->sbuf + nv, c->sbuf + nv + nc, nterm,
                                                  c->at, c->terms, &g)
                 : ds_fluid_backward_window(c->fm, c->fd, s0, s1, c->sbuf, c->sbuf + nv, c->sbuf + nv + nc, nterm,
                                            c->at, c->terms, &g);
  if (rc) return ds__smoke_fail(e, c, rc, "backward window");
  for (int i = 0; i < n && grad_state0; i++) grad_state0[i] = (dsReal)c->gstate[i];
  for (int i = 0; i < nc; i++) c->gdens0[i] = s0 == 0 ? c->gstate[nv + i] : 0;
  ds__smoke_core_grads(c);
  return 0;
}

int ds__smoke_fail(dsEnv* e, const dsSmokeCore* c, int rc, const char* what) {
  return ds_env_set_errorf(e, rc, "%s: %s", what, c->fb ? ds_fluid_batch_last_error(c->fb) : ds_fluid_last_error(c->fd));
}

int ds__smoke_check_cfl(const dsEnvDef* def, double dx, double max_speed, double cfl_max, char* err, size_t errlen) {
  const double cfl = (double)def->dt * max_speed / dx;
  if (cfl <= cfl_max) return 0;
  snprintf(err, errlen,
           "physics.dt: %g s gives a CFL number dt max_speed / dx = %g * %g / %g = %g above fluid.cfl_max %g "
           "(expected dt <= %g s)",
           (double)def->dt, (double)def->dt, max_speed, dx, cfl, cfl_max, cfl_max * dx / max_speed);
  return DS_ERR_CONFIG;
}

int ds__smoke_check_source(const dsReal lo[3], const dsReal hi[3], int axes, double size, char* err, size_t errlen) {
  for (int k = 0; k < axes; k++)
    if (!(lo[k] >= 0 && lo[k] < hi[k] && hi[k] <= size)) {
      snprintf(err, errlen, "source.lo, source.hi: [%g, %g] in %c (expected 0 <= lo < hi <= grid.size %g)",
               (double)lo[k], (double)hi[k], "xyz"[k], size);
      return DS_ERR_CONFIG;
    }
  return 0;
}

int ds__smoke_check_kinds(const dsEnvDef* def, const char* cls, char* err, size_t errlen) {
  if (def->obs_state == DS_OBS_STATE_NONE && def->loss_kind == DS_ENV_LOSS_IMAGE_LAST &&
      def->reward_kind == DS_ENV_REWARD_SPARSE && !def->cam2)
    return 0;
  snprintf(err, errlen,
           "observation.state, loss.kind, loss.reward, camera2.enabled: %s has a state of its own and "
           "differentiates its last frame (expected none, image_last, sparse, false)",
           cls);
  return DS_ERR_CONFIG;
}

double ds__smoke_image_error(const dsReal* img, const dsReal* goal, const dsReal* bg_img, const double bg3[3],
                             size_t npix) {
  double num = 0, den = 0;
  for (size_t p = 0; p < npix; p++)
    for (int ch = 0; ch < 3; ch++) {
      const double b = bg_img ? (double)bg_img[4 * p + ch] : bg3[ch];
      const double d = (double)img[4 * p + ch] - goal[4 * p + ch], r = (double)goal[4 * p + ch] - b;
      num += d * d;
      den += r * r;
    }
  return den > 0 ? num / den : num;
}

/* ---- obstacles ---------------------------------------------------------------- */

void ds__smoke_obstacle_defaults(dsSmokeObstacle* o) {
  memset(o, 0, sizeof *o);
  o->scale = 1;
  o->soft_width = (dsReal)0.05;
}

static int has_box(const dsSmokeObstacle* o) {
  return o->lo[0] != o->hi[0] || o->lo[1] != o->hi[1] || o->lo[2] != o->hi[2];
}

int ds__smoke_check_obstacle(const dsSmokeObstacle* o, int axes, double size, char* err, size_t errlen) {
  for (int k = 0; k < axes && o->soft_damping > 0; k++)
    if (!(o->soft_half[k] > 0)) {
      snprintf(err, errlen, "soft_obstacle.half: %g in %c (expected > 0 on the grid's axes when soft_obstacle.damping > 0)",
               (double)o->soft_half[k], "xyz"[k]);
      return DS_ERR_CONFIG;
    }
  if (!has_box(o)) return 0;
  for (int k = 0; k < axes; k++)
    if (!(o->lo[k] >= 0 && o->lo[k] < o->hi[k] && o->hi[k] <= size)) {
      snprintf(err, errlen, "obstacle.box_lo, obstacle.box_hi: [%g, %g] in %c (expected 0 <= lo < hi <= grid.size %g, or lo = hi: none)",
               (double)o->lo[k], (double)o->hi[k], "xyz"[k], size);
      return DS_ERR_CONFIG;
    }
  return 0;
}

static int is_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f) fclose(f);
  return f != NULL;
}

/* obstacle.mesh as a path, else models/NAME of the bundled configs folders */
static int find_mesh(const char* name, char* path, size_t n) {
  if (is_file(name) || strchr(name, '/')) {
    snprintf(path, n, "%s", name);
    return 0;
  }
  char dir[4096];
  for (int i = 0; ds_run_config_dir(i, dir, sizeof dir) != DS_ERR_NOTFOUND; i++) {
    if (!dir[0]) continue;
    const int k = snprintf(path, n, "%s/models/%s", dir, name);
    if (k > 0 && (size_t)k < n && is_file(path)) return 0;
  }
  snprintf(path, n, "%s", name);
  return 0;
}

int ds__smoke_obstacle_mesh(const dsSmokeObstacle* o, dsMesh* out, char* err, size_t errlen) {
  memset(out, 0, sizeof *out);
  dsMesh file = {0};
  if (o->mesh[0]) {
    char path[4096 + 64], why[512] = "";
    find_mesh(o->mesh, path, sizeof path);
    const int rc = ds_mesh_read_obj(path, &file, why, sizeof why);
    if (rc) {
      snprintf(err, errlen, "obstacle.mesh: %s (expected a closed OBJ surface; a path or a file of configs/models/)", why);
      return DS_ERR_CONFIG;
    }
  }
  const int box = has_box(o), nv = (box ? 8 : 0) + file.nvert, nt = (box ? 12 : 0) + file.ntri;
  if (ds_mesh_alloc(out, nv, nt, 0)) {
    ds_mesh_free(&file);
    snprintf(err, errlen, "obstacle: out of memory");
    return DS_ERR_NOMEM;
  }
  int v = 0, t = 0;
  if (box) { /* outward triangles of [lo, hi] */
    static const int f[12][3] = {{0, 2, 1}, {1, 2, 3}, {4, 5, 6}, {5, 7, 6}, {0, 1, 4}, {1, 5, 4},
                                 {2, 6, 3}, {3, 6, 7}, {0, 4, 2}, {2, 4, 6}, {1, 3, 5}, {3, 7, 5}};
    for (; v < 8; v++)
      for (int a = 0; a < 3; a++) out->x[3 * v + a] = (v >> a) & 1 ? o->hi[a] : o->lo[a];
    for (; t < 12; t++)
      for (int k = 0; k < 3; k++) out->tri[3 * t + k] = f[t][k];
  }
  for (int i = 0; i < file.nvert; i++)
    for (int a = 0; a < 3; a++) out->x[3 * (v + i) + a] = o->scale * file.x[3 * i + a] + o->position[a];
  for (int i = 0; i < 3 * file.ntri; i++) out->tri[3 * t + i] = file.tri[i] + v;
  ds_mesh_free(&file);
  return 0;
}

int ds__smoke_fluid_create(dsFluidDef fd, const dsSmokeObstacle* o, dsFluidModel** out, char* err, size_t errlen) {
  *out = NULL;
  if (has_box(o)) {
    fd.nobstacle = 1;
    fd.obstacle[0] = (dsFluidBox){{o->lo[0], o->lo[1], fd.n[2] > 1 ? o->lo[2] : 0},
                                  {o->hi[0], o->hi[1], fd.n[2] > 1 ? o->hi[2] : 1}};
  }
  if (o->soft_damping > 0) {
    fd.nsoft = 1;
    for (int a = 0; a < 3; a++) {
      fd.soft[0].center[a] = o->soft_center[a];
      fd.soft[0].half[a] = a < 2 || fd.n[2] > 1 ? o->soft_half[a] : 1;
    }
    fd.soft[0].width = o->soft_width;
    fd.soft[0].damping = o->soft_damping;
  }
  if (!o->mesh[0]) return ds_fluid_model_create(&fd, out, err, errlen);
  dsSmokeObstacle only = *o; /* the mesh alone: the box is fd's */
  only.lo[0] = only.lo[1] = only.lo[2] = only.hi[0] = only.hi[1] = only.hi[2] = 0;
  dsMesh m;
  int rc = ds__smoke_obstacle_mesh(&only, &m, err, errlen);
  if (rc) return rc;
  const size_t nc = (size_t)fd.n[0] * fd.n[1] * fd.n[2];
  unsigned char* solid = (unsigned char*)ds_calloc(nc + 1, 1);
  double* x = (double*)ds_calloc(3 * (size_t)m.nvert + 1, sizeof(double));
  if (!solid || !x) rc = DS_ERR_NOMEM;
  for (int i = 0; i < 3 * m.nvert && !rc; i++) x[i] = (double)m.x[i];
  char why[256] = "";
  if (!rc) rc = ds_fluid_voxelize_mesh(&fd, x, m.nvert, m.tri, m.ntri, solid, why, sizeof why);
  size_t n = 0;
  for (size_t c = 0; c < nc && !rc; c++) n += solid[c] != 0;
  if (rc)
    snprintf(err, errlen, "obstacle.mesh: %s", rc == DS_ERR_NOMEM ? "out of memory" : why);
  else if (n == 0) {
    snprintf(err, errlen,
             "obstacle.mesh: '%s' encloses no cell centre of the grid (%s; check obstacle.position and "
             "obstacle.scale: the grid spans [0, grid.size] on each axis)",
             o->mesh, fd.n[2] > 1 ? "3-D" : "2-D: the mesh is cut by the plane z = 0");
    rc = DS_ERR_CONFIG;
  } else {
    fd.solid_cells = solid;
    rc = ds_fluid_model_create(&fd, out, err, errlen);
  }
  ds_free(solid);
  ds_free(x);
  ds_mesh_free(&m);
  return rc;
}
