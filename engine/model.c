/* Model building and named parameters.
 *
 * A dsBuilder collects particles and elements in growable arrays; the
 * finalize step validates everything (indices, masses, degenerate or
 * inverted rest elements, dt, parameters), computes rest shapes (triangle
 * Dm^-1 and area, tet Dm^-1 and volume, bending rest angles) and the
 * particle -> incident element slot lists used by the deterministic gather,
 * and copies the result into a dsModel whose arrays come from the
 * DS_MODEL_ARRAYS list. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dsim/engine.h"
#include "dsim/mesh.h"
#include "engine/engine_priv.h"
#include "engine/forces.h"
#include "engine/sparse.h"
#include "engine/artic_model.h"
#include "engine/artic_priv.h"
#include "engine/rigid.h"

_Static_assert(DS_TET_NREST + 1 == DS_TET_MROWS, "tet.M rows: M, det B, then V0");

/* ---- builder ----------------------------------------------------------------*/
struct dsBuilder {
  dsErrBuf err;
  int np, cap_p;
  dsReal *x, *v, *mass;
  int ns, cap_s;
  int* s_idx;
  dsReal *s_ke, *s_kd, *s_rest;
  int nt, cap_t;
  int* t_idx;
  dsReal *t_mu, *t_lam, *t_damp;
  int nb, cap_b;
  int* b_idx;
  dsReal *b_ke, *b_kd;
  int ntet, cap_tet;
  int* te_idx;
  dsReal *te_mu, *te_lam, *te_damp;
  int nf, cap_f;
  int* f_idx;
  dsReal gravity[3], dt;
  int ground;
  dsGroundDef gd;
  int aero;
  dsReal lift, drag;
  size_t bytes;  /* held by the arrays above */
  int nbody, cap_body;
  struct BodyRec* body;
  int nrv, cap_rv;
  dsReal* rv; /* body-frame vertices of every body, in order */
  int integrator;          /* dsIntegrator */
  dsSolverSettings solver; /* the implicit integrator's */
  dsBuilderArtic art;      /* the articulation and its vertices (engine/artic_model.c) */
  dsReal contact_smooth;   /* ds_builder_set_contact_smooth */
};

/* One rigid body as the builder holds it. */
typedef struct BodyRec {
  dsReal mass, com[3], I[9], x0[3], q0[4], v0[3], w0[3], ke, kd, kf, mu, e;
  int p0, n, r0; /* first particle, vertices, first row of rv */
} BodyRec;

/* Grow every array of a group to hold n+1 elements. The sizes in bytes of
 * one element of each array are given; capacity doubles. On failure the
 * arrays that did grow stay valid (they are only larger). */
static int reserve(dsBuilder* b, int n, int* cap, int narr, void** arrs[], const size_t* elsize) {
  if (n < *cap) return 0;
  if (n >= (1 << 28)) return ds__seterr(&b->err, DS_ERR_RANGE, "too many elements (%d)", n);
  int nc = *cap ? 2 * *cap : 16;
  size_t grow = 0;
  for (int i = 0; i < narr; i++) grow += (size_t)(nc - *cap) * elsize[i];
  /* The finished model holds these arrays and per-element caches several
   * times over, and the tape comes on top: a builder past 1/16 of the
   * memory bound is refused before it takes the machine's memory. */
  if (b->bytes + grow > ds_memory_limit() / 16) {
    char a[32], c[32];
    return ds__seterr(&b->err, DS_ERR_NOMEM,
                      "the mesh is too large: %d elements of one kind take %s, more than 1/16 of the memory "
                      "dsim may use (%s: %s)",
                      n, ds_format_size(b->bytes + grow, a, sizeof a), ds_format_size(ds_memory_limit(), c, sizeof c),
                      ds_memory_limit_source());
  }
  for (int i = 0; i < narr; i++) {
    void* p = ds__realloc(*arrs[i], (size_t)nc * elsize[i]);
    if (!p) return ds__seterr(&b->err, DS_ERR_NOMEM, "out of memory growing the builder to %d elements", nc);
    *arrs[i] = p;
  }
  b->bytes += grow;
  *cap = nc;
  return 0;
}

int ds_builder_create(dsBuilder** out) {
  if (!out) return DS_ERR_INVALID;
  *out = NULL;
  dsBuilder* b = (dsBuilder*)ds__calloc(1, sizeof *b);
  if (!b) return DS_ERR_NOMEM;
  b->gravity[1] = (dsReal)-9.8;
  b->dt = (dsReal)(1.0 / 1920.0);
  b->solver = ds_default_solver_settings();
  ds__clearerr(&b->err);
  *out = b;
  return 0;
}

void ds_builder_free(dsBuilder* b) {
  if (!b) return;
  void* ps[] = {b->x, b->v, b->mass, b->s_idx, b->s_ke, b->s_kd, b->s_rest, b->t_idx, b->t_mu, b->t_lam,
                b->t_damp, b->b_idx, b->b_ke, b->b_kd, b->te_idx, b->te_mu, b->te_lam, b->te_damp, b->f_idx, b->body, b->rv};
  for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) ds__free(ps[i]);
  ds__artic_builder_free(&b->art);
  ds__free(b);
}

const char* ds_builder_last_error(const dsBuilder* b) { return b ? ds__errmsg(&b->err) : ""; }

static int finite3(const dsReal* a) { return isfinite(a[0]) && isfinite(a[1]) && isfinite(a[2]); }

int ds_builder_add_particle(dsBuilder* b, const dsReal x[3], const dsReal v[3], dsReal mass) {
  if (!b || !x) return DS_ERR_INVALID;
  if (!finite3(x) || (v && !finite3(v)))
    return ds__seterr(&b->err, DS_ERR_INVALID, "particle %d: position or velocity not finite", b->np);
  if (!(mass >= 0) || !isfinite(mass))
    return ds__seterr(&b->err, DS_ERR_INVALID, "particle %d: mass %g (must be >= 0, 0 = fixed)", b->np,
                      (double)mass);
  void** arrs[] = {(void**)&b->x, (void**)&b->v, (void**)&b->mass};
  const size_t sz[] = {3 * sizeof(dsReal), 3 * sizeof(dsReal), sizeof(dsReal)};
  int rc = reserve(b, b->np, &b->cap_p, 3, arrs, sz);
  if (rc) return rc;
  int i = b->np++;
  for (int k = 0; k < 3; k++) {
    b->x[3 * i + k] = x[k];
    b->v[3 * i + k] = v ? v[k] : 0;
  }
  b->mass[i] = mass;
  return i;
}

/* Indices in range and pairwise distinct. */
static int check_idx(dsBuilder* b, const char* what, int e, const int* idx, int n) {
  for (int a = 0; a < n; a++) {
    if (idx[a] < 0 || idx[a] >= b->np)
      return ds__seterr(&b->err, DS_ERR_INVALID, "%s %d: particle index %d out of range (0..%d)", what, e,
                        idx[a], b->np - 1);
    for (int c = 0; c < a; c++)
      if (idx[a] == idx[c])
        return ds__seterr(&b->err, DS_ERR_INVALID, "%s %d: particle %d repeated", what, e, idx[a]);
  }
  return 0;
}

static int check_finite(dsBuilder* b, const char* what, int e, const dsReal* p, int n) {
  for (int k = 0; k < n; k++)
    if (!isfinite(p[k])) return ds__seterr(&b->err, DS_ERR_INVALID, "%s %d: parameter not finite", what, e);
  return 0;
}

int ds_builder_add_spring(dsBuilder* b, int i, int j, dsReal ke, dsReal kd, dsReal rest) {
  if (!b) return DS_ERR_INVALID;
  int idx[2] = {i, j};
  dsReal pr[3] = {ke, kd, rest};
  int rc = check_idx(b, "spring", b->ns, idx, 2);
  if (!rc) rc = check_finite(b, "spring", b->ns, pr, 3);
  if (rc) return rc;
  if (rest < 0) {
    dsReal d2 = 0;
    for (int k = 0; k < 3; k++) {
      dsReal dk = b->x[3 * i + k] - b->x[3 * j + k];
      d2 += dk * dk;
    }
    rest = (dsReal)sqrt((double)d2);
  }
  void** arrs[] = {(void**)&b->s_idx, (void**)&b->s_ke, (void**)&b->s_kd, (void**)&b->s_rest};
  const size_t sz[] = {2 * sizeof(int), sizeof(dsReal), sizeof(dsReal), sizeof(dsReal)};
  if ((rc = reserve(b, b->ns, &b->cap_s, 4, arrs, sz))) return rc;
  int e = b->ns++;
  b->s_idx[2 * e] = i;
  b->s_idx[2 * e + 1] = j;
  b->s_ke[e] = ke;
  b->s_kd[e] = kd;
  b->s_rest[e] = rest;
  return e;
}

int ds_builder_add_tri(dsBuilder* b, int i, int j, int k, const dsTriMaterial* mat) {
  if (!b || !mat) return DS_ERR_INVALID;
  int idx[3] = {i, j, k};
  dsReal pr[3] = {mat->k_mu, mat->k_lambda, mat->k_damp};
  int rc = check_idx(b, "tri", b->nt, idx, 3);
  if (!rc) rc = check_finite(b, "tri", b->nt, pr, 3);
  if (rc) return rc;
  void** arrs[] = {(void**)&b->t_idx, (void**)&b->t_mu, (void**)&b->t_lam, (void**)&b->t_damp};
  const size_t sz[] = {3 * sizeof(int), sizeof(dsReal), sizeof(dsReal), sizeof(dsReal)};
  if ((rc = reserve(b, b->nt, &b->cap_t, 4, arrs, sz))) return rc;
  int e = b->nt++;
  memcpy(b->t_idx + 3 * e, idx, sizeof idx);
  b->t_mu[e] = mat->k_mu;
  b->t_lam[e] = mat->k_lambda;
  b->t_damp[e] = mat->k_damp;
  return e;
}

int ds_builder_add_bend(dsBuilder* b, int i1, int i2, int i3, int i4, const dsBendMaterial* mat) {
  if (!b || !mat) return DS_ERR_INVALID;
  int idx[4] = {i1, i2, i3, i4};
  dsReal pr[2] = {mat->ke, mat->kd};
  int rc = check_idx(b, "bend", b->nb, idx, 4);
  if (!rc) rc = check_finite(b, "bend", b->nb, pr, 2);
  if (rc) return rc;
  void** arrs[] = {(void**)&b->b_idx, (void**)&b->b_ke, (void**)&b->b_kd};
  const size_t sz[] = {4 * sizeof(int), sizeof(dsReal), sizeof(dsReal)};
  if ((rc = reserve(b, b->nb, &b->cap_b, 3, arrs, sz))) return rc;
  int e = b->nb++;
  memcpy(b->b_idx + 4 * e, idx, sizeof idx);
  b->b_ke[e] = mat->ke;
  b->b_kd[e] = mat->kd;
  return e;
}

int ds_builder_add_tet(dsBuilder* b, int i, int j, int k, int l, const dsTetMaterial* mat) {
  if (!b || !mat) return DS_ERR_INVALID;
  int idx[4] = {i, j, k, l};
  dsReal pr[3] = {mat->k_mu, mat->k_lambda, mat->k_damp};
  int rc = check_idx(b, "tet", b->ntet, idx, 4);
  if (!rc) rc = check_finite(b, "tet", b->ntet, pr, 3);
  if (rc) return rc;
  void** arrs[] = {(void**)&b->te_idx, (void**)&b->te_mu, (void**)&b->te_lam, (void**)&b->te_damp};
  const size_t sz[] = {4 * sizeof(int), sizeof(dsReal), sizeof(dsReal), sizeof(dsReal)};
  if ((rc = reserve(b, b->ntet, &b->cap_tet, 4, arrs, sz))) return rc;
  int e = b->ntet++;
  memcpy(b->te_idx + 4 * e, idx, sizeof idx);
  b->te_mu[e] = mat->k_mu;
  b->te_lam[e] = mat->k_lambda;
  b->te_damp[e] = mat->k_damp;
  return e;
}

int ds_builder_add_face(dsBuilder* b, int i, int j, int k) {
  if (!b) return DS_ERR_INVALID;
  int idx[3] = {i, j, k};
  int rc = check_idx(b, "face", b->nf, idx, 3);
  if (rc) return rc;
  void** arrs[] = {(void**)&b->f_idx};
  const size_t sz[] = {3 * sizeof(int)};
  if ((rc = reserve(b, b->nf, &b->cap_f, 1, arrs, sz))) return rc;
  int e = b->nf++;
  memcpy(b->f_idx + 3 * e, idx, sizeof idx);
  return e;
}

int ds_builder_add_bending_from_tris(dsBuilder* b, int tri_begin, int tri_end, const dsBendMaterial* mat) {
  if (!b || !mat) return DS_ERR_INVALID;
  if (tri_begin < 0 || tri_end > b->nt || tri_begin > tri_end)
    return ds__seterr(&b->err, DS_ERR_INVALID, "triangle range [%d, %d) outside [0, %d)", tri_begin, tri_end,
                      b->nt);
  /* A view of the builder's triangles as a mesh (nothing is copied). */
  dsMesh view;
  memset(&view, 0, sizeof view);
  view.nvert = b->np;
  view.x = b->x;
  view.ntri = tri_end - tri_begin;
  view.tri = b->t_idx ? b->t_idx + 3 * tri_begin : NULL;
  int nedge = 0, *edges = NULL;
  if (view.ntri == 0) return 0;
  int rc = ds_mesh_bending_edges(&view, &nedge, &edges, b->err.msg, sizeof b->err.msg);
  if (rc) {
    b->err.code = rc;
    return rc;
  }
  int added = 0;
  for (int e = 0; e < nedge && rc >= 0; e++) {
    rc = ds_builder_add_bend(b, edges[4 * e], edges[4 * e + 1], edges[4 * e + 2], edges[4 * e + 3], mat);
    if (rc >= 0) added++;
  }
  ds_mesh_free_ints(edges);
  return rc < 0 ? rc : added;
}

int ds_builder_add_cloth_grid(dsBuilder* b, int nx, int ny, dsReal cell, const dsReal origin[3],
                              dsReal particle_mass, const dsReal v[3], const dsTriMaterial* mat,
                              const dsBendMaterial* bend) {
  if (!b || !mat) return DS_ERR_INVALID;
  dsMesh mesh;
  memset(&mesh, 0, sizeof mesh);
  int rc = ds_mesh_cloth_grid(nx, ny, cell, &mesh);
  if (rc) return ds__seterr(&b->err, rc, "cloth grid %d x %d, cell %g: %s", nx, ny, (double)cell, ds_strerror(rc));
  if (origin) ds_mesh_translate(&mesh, origin);
  int p0 = b->np, t0 = b->nt;
  for (int i = 0; i < mesh.nvert && rc >= 0; i++) rc = ds_builder_add_particle(b, mesh.x + 3 * i, v, particle_mass);
  for (int e = 0; e < mesh.ntri && rc >= 0; e++) {
    const int* t = mesh.tri + 3 * e;
    rc = ds_builder_add_tri(b, p0 + t[0], p0 + t[1], p0 + t[2], mat);
    if (rc >= 0) rc = ds_builder_add_face(b, p0 + t[0], p0 + t[1], p0 + t[2]);
  }
  if (rc >= 0 && bend) rc = ds_builder_add_bending_from_tris(b, t0, b->nt, bend);
  ds_mesh_free(&mesh);
  return rc < 0 ? rc : p0;
}

int ds_builder_add_soft_mesh(dsBuilder* b, const dsMesh* mesh, dsReal density, const dsReal v[3],
                             const dsTetMaterial* mat) {
  if (!b || !mesh || !mat) return DS_ERR_INVALID;
  if (mesh->ntet <= 0 || !mesh->tet || !mesh->x)
    return ds__seterr(&b->err, DS_ERR_MESH, "soft mesh has no tets");
  if (!(density > 0) || !isfinite(density))
    return ds__seterr(&b->err, DS_ERR_INVALID, "soft mesh: density %g (must be > 0)", (double)density);
  int rc = ds_mesh_validate(mesh, b->err.msg, sizeof b->err.msg);
  if (rc) {
    b->err.code = rc;
    return rc;
  }
  /* Boundary faces: the mesh's own triangles when present, else extracted
   * (outward) from the tets into a view that shares x and tet. */
  dsMesh view = *mesh;
  int own_tri = 0;
  if (view.ntri == 0) {
    view.tri = NULL;
    rc = ds_mesh_extract_boundary(&view, b->err.msg, sizeof b->err.msg);
    if (rc) {
      b->err.code = rc;
      return rc;
    }
    own_tri = 1;
  }
  dsReal* mass = (dsReal*)ds__malloc((size_t)mesh->nvert * sizeof(dsReal));
  if (!mass) {
    if (own_tri) ds_mesh_free_ints(view.tri);
    return ds__seterr(&b->err, DS_ERR_NOMEM, "soft mesh: out of memory");
  }
  rc = ds_mesh_lumped_mass(mesh, density, mass);
  if (rc) rc = ds__seterr(&b->err, rc, "soft mesh: lumped mass failed (%s)", ds_strerror(rc));
  int p0 = b->np;
  for (int i = 0; i < mesh->nvert && rc >= 0; i++) rc = ds_builder_add_particle(b, mesh->x + 3 * i, v, mass[i]);
  for (int e = 0; e < mesh->ntet && rc >= 0; e++) {
    const int* t = mesh->tet + 4 * e;
    rc = ds_builder_add_tet(b, p0 + t[0], p0 + t[1], p0 + t[2], p0 + t[3], mat);
  }
  for (int e = 0; e < view.ntri && rc >= 0; e++) {
    const int* t = view.tri + 3 * e;
    rc = ds_builder_add_face(b, p0 + t[0], p0 + t[1], p0 + t[2]);
  }
  ds__free(mass);
  if (own_tri) ds_mesh_free_ints(view.tri);
  return rc < 0 ? rc : p0;
}

int ds_builder_add_tet_grid(dsBuilder* b, int nx, int ny, int nz, dsReal hx, dsReal hy, dsReal hz,
                            const dsReal origin[3], dsReal density, const dsReal v[3], const dsTetMaterial* mat) {
  if (!b || !mat) return DS_ERR_INVALID;
  dsMesh mesh;
  memset(&mesh, 0, sizeof mesh);
  int rc = ds_mesh_tet_grid(nx, ny, nz, hx, hy, hz, &mesh);
  if (rc) return ds__seterr(&b->err, rc, "tet grid %d x %d x %d: %s", nx, ny, nz, ds_strerror(rc));
  if (origin) ds_mesh_translate(&mesh, origin);
  rc = ds_builder_add_soft_mesh(b, &mesh, density, v, mat);
  ds_mesh_free(&mesh);
  return rc;
}

void ds_builder_set_gravity(dsBuilder* b, dsReal gx, dsReal gy, dsReal gz) {
  if (!b) return;
  b->gravity[0] = gx;
  b->gravity[1] = gy;
  b->gravity[2] = gz;
}

void ds_builder_set_dt(dsBuilder* b, dsReal dt) {
  if (b) b->dt = dt;
}

int ds_builder_set_integrator(dsBuilder* b, int integrator) {
  if (!b) return DS_ERR_INVALID;
  if (integrator != DS_INTEGRATOR_SEMI_IMPLICIT && integrator != DS_INTEGRATOR_IMPLICIT)
    return ds__seterr(&b->err, DS_ERR_INVALID, "integrator %d: expected DS_INTEGRATOR_SEMI_IMPLICIT (0) or "
                      "DS_INTEGRATOR_IMPLICIT (1)", integrator);
  b->integrator = integrator;
  return 0;
}

dsSolverSettings ds_default_solver_settings(void) {
  dsSolverSettings s;
  memset(&s, 0, sizeof s);
  s.newton_tol = (dsReal)1e-8;
  s.cg_tol = (dsReal)1e-5;
  s.adjoint_tol = (dsReal)1e-10;
  s.newton_max_iter = 50;
  s.cg_max_iter = 1000;
  return s;
}

int ds_builder_set_solver(dsBuilder* b, const dsSolverSettings* s) {
  if (!b || !s) return DS_ERR_INVALID;
  const dsReal tol[3] = {s->newton_tol, s->cg_tol, s->adjoint_tol};
  static const char* const tname[3] = {"newton_tol", "cg_tol", "adjoint_tol"};
  for (int k = 0; k < 3; k++)
    if (!(tol[k] > 0) || !isfinite(tol[k]))
      return ds__seterr(&b->err, DS_ERR_INVALID, "solver %s %g: expected a finite number > 0", tname[k],
                        (double)tol[k]);
  if (s->newton_max_iter < 1)
    return ds__seterr(&b->err, DS_ERR_INVALID, "solver newton_max_iter %d: expected >= 1", s->newton_max_iter);
  if (s->cg_max_iter < 1)
    return ds__seterr(&b->err, DS_ERR_INVALID, "solver cg_max_iter %d: expected >= 1", s->cg_max_iter);
  if (s->precond != DS_PRECOND_JACOBI && s->precond != DS_PRECOND_CHOLMOD)
    return ds__seterr(&b->err, DS_ERR_INVALID, "solver precond %d: expected DS_PRECOND_JACOBI (0) or DS_PRECOND_CHOLMOD (1)",
                      s->precond);
  if (s->precond == DS_PRECOND_CHOLMOD && !ds__chol_available())
    return ds__seterr(&b->err, DS_ERR_UNSUPPORTED,
                      "solver precond cholmod: this build has no SuiteSparse CHOLMOD (install libsuitesparse-dev and "
                      "reconfigure, or use jacobi)");
  b->solver = *s;
  return 0;
}

int ds_builder_set_contact_smooth(dsBuilder* b, dsReal width) {
  if (!b) return DS_ERR_INVALID;
  if (!(width >= 0) || !isfinite(width))
    return ds__seterr(&b->err, DS_ERR_INVALID, "contact smooth %g: expected a finite width >= 0 (m)", (double)width);
  b->contact_smooth = width;
  return 0;
}

void ds_builder_set_ground(dsBuilder* b, const dsGroundDef* def) {
  if (!b) return;
  b->ground = def != NULL;
  if (def) b->gd = *def;
}

void ds_builder_set_aero(dsBuilder* b, dsReal k_lift, dsReal k_drag) {
  if (!b) return;
  b->aero = 1;
  b->lift = k_lift;
  b->drag = k_drag;
}

/* ---- rigid bodies --------------------------------------------------------------*/
dsRigidDef ds_default_rigid_def(void) {
  dsRigidDef d;
  memset(&d, 0, sizeof d);
  d.orientation[0] = 1;
  d.density = 1000;
  d.mass = 0;
  d.ke = (dsReal)1e4;
  d.kd = 0;
  d.kf = (dsReal)1e2;
  d.mu = (dsReal)0.5;
  d.restitution = 1;
  return d;
}

static int rigid_def_check(dsBuilder* b, const dsRigidDef* d) {
  const dsReal* f[] = {d->position, d->velocity, d->angular_velocity};
  for (int k = 0; k < 3; k++)
    if (!finite3(f[k])) return ds__seterr(&b->err, DS_ERR_INVALID, "body %d: pose or twist not finite", b->nbody);
  double qn = 0;
  for (int k = 0; k < 4; k++) {
    if (!isfinite(d->orientation[k]))
      return ds__seterr(&b->err, DS_ERR_INVALID, "body %d: orientation not finite", b->nbody);
    qn += (double)d->orientation[k] * d->orientation[k];
  }
  if (!(qn > 1e-20)) return ds__seterr(&b->err, DS_ERR_INVALID, "body %d: orientation quaternion is zero", b->nbody);
  const dsReal c[4] = {d->ke, d->kd, d->kf, d->mu};
  for (int k = 0; k < 4; k++)
    if (!(c[k] >= 0) || !isfinite(c[k]))
      return ds__seterr(&b->err, DS_ERR_INVALID, "body %d: contact ke, kd, kf, mu must be finite and >= 0", b->nbody);
  if (!(d->restitution > 0 && d->restitution <= 1))
    return ds__seterr(&b->err, DS_ERR_INVALID, "body %d: restitution %g (must be in (0, 1])", b->nbody,
                      (double)d->restitution);
  if (!isfinite(d->mass) || !isfinite(d->density))
    return ds__seterr(&b->err, DS_ERR_INVALID, "body %d: mass or density not finite", b->nbody);
  return 0;
}

int ds_builder_add_rigid(dsBuilder* b, const dsMesh* mesh, const dsReal* vertex_mass, const dsRigidDef* def) {
  if (!b || !mesh || !def || !mesh->x || mesh->nvert < 1) return DS_ERR_INVALID;
  int rc = rigid_def_check(b, def);
  if (rc) return rc;
  const int nv = mesh->nvert, e = b->nbody;
  for (int i = 0; i < 3 * mesh->ntri; i++)
    if (!mesh->tri || mesh->tri[i] < 0 || mesh->tri[i] >= nv)
      return ds__seterr(&b->err, DS_ERR_MESH, "body %d: triangle vertex index out of range", e);
  for (int i = 0; i < nv; i++)
    if (!finite3(mesh->x + 3 * i)) return ds__seterr(&b->err, DS_ERR_MESH, "body %d: vertex %d not finite", e, i);
  double M = 0, com[3] = {0, 0, 0}, I[9] = {0};
  if (vertex_mass) {
    for (int i = 0; i < nv; i++) {
      if (!(vertex_mass[i] >= 0) || !isfinite(vertex_mass[i]))
        return ds__seterr(&b->err, DS_ERR_INVALID, "body %d: vertex mass %d is %g", e, i, (double)vertex_mass[i]);
      M += vertex_mass[i];
      for (int k = 0; k < 3; k++) com[k] += vertex_mass[i] * (double)mesh->x[3 * i + k];
    }
    if (!(M > 0)) return ds__seterr(&b->err, DS_ERR_INVALID, "body %d: total vertex mass is 0", e);
    for (int k = 0; k < 3; k++) com[k] /= M;
    for (int i = 0; i < nv; i++) {
      double a[3], a2 = 0;
      for (int k = 0; k < 3; k++) {
        a[k] = (double)mesh->x[3 * i + k] - com[k];
        a2 += a[k] * a[k];
      }
      for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) I[3 * r + c] += vertex_mass[i] * ((r == c ? a2 : 0) - a[r] * a[c]);
    }
  } else {
    double V;
    if (ds_mesh_mass_properties(nv, mesh->x, mesh->ntri, mesh->tri, &V, com, I))
      return ds__seterr(&b->err, DS_ERR_MESH,
                        "body %d: mesh volume is not > 0 (closed, outward-oriented triangles needed)", e);
    if (!(def->mass > 0) && !(def->density > 0))
      return ds__seterr(&b->err, DS_ERR_INVALID, "body %d: density %g (must be > 0 when mass is not given)", e,
                        (double)def->density);
    const double rho = def->mass > 0 ? 1 : (double)def->density;
    M = rho * V;
    for (int k = 0; k < 9; k++) I[k] *= rho;
  }
  if (def->mass > 0) {
    const double sc = (double)def->mass / M;
    M = def->mass;
    for (int k = 0; k < 9; k++) I[k] *= sc;
  }
  const double det = I[0] * (I[4] * I[8] - I[5] * I[7]) - I[1] * (I[3] * I[8] - I[5] * I[6]) +
                     I[2] * (I[3] * I[7] - I[4] * I[6]);
  if (!(det > 0) || !isfinite(det))
    return ds__seterr(&b->err, DS_ERR_MESH, "body %d: singular inertia (det %g): points on a line?", e, det);
  /* reserve */
  void** arrs[] = {(void**)&b->body};
  const size_t sz[] = {sizeof(BodyRec)};
  if ((rc = reserve(b, b->nbody, &b->cap_body, 1, arrs, sz))) return rc;
  while (b->nrv + nv > b->cap_rv) {
    int nc = b->cap_rv ? 2 * b->cap_rv : 64;
    dsReal* p = (dsReal*)ds__realloc(b->rv, (size_t)nc * 3 * sizeof(dsReal));
    if (!p) return ds__seterr(&b->err, DS_ERR_NOMEM, "out of memory");
    b->rv = p;
    b->cap_rv = nc;
  }
  BodyRec r;
  memset(&r, 0, sizeof r);
  r.mass = (dsReal)M;
  for (int k = 0; k < 3; k++) {
    r.com[k] = (dsReal)com[k];
    r.x0[k] = def->position[k];
    r.v0[k] = def->velocity[k];
    r.w0[k] = def->angular_velocity[k];
  }
  for (int k = 0; k < 9; k++) r.I[k] = (dsReal)I[k];
  for (int k = 0; k < 4; k++) r.q0[k] = def->orientation[k];
  r.ke = def->ke;
  r.kd = def->kd;
  r.kf = def->kf;
  r.mu = def->mu;
  r.e = def->restitution;
  r.p0 = b->np;
  r.n = nv;
  r.r0 = b->nrv;
  /* vertices as particles (mass 0) at their posed positions */
  dsReal st[13];
  memcpy(st, r.x0, sizeof r.x0);
  dsu_qnormalize(st + 3, r.q0);
  memcpy(st + 7, r.v0, sizeof r.v0);
  memcpy(st + 10, r.w0, sizeof r.w0);
  for (int i = 0; i < nv && rc >= 0; i++) {
    dsReal xi[3], vi[3];
    ds__rigid_pose_fwd(st, mesh->x + 3 * i, r.com, xi, vi);
    rc = ds_builder_add_particle(b, xi, vi, r.mass / nv); /* a weight for centre-of-mass observations only */
  }
  for (int t = 0; t < mesh->ntri && rc >= 0; t++)
    rc = ds_builder_add_face(b, r.p0 + mesh->tri[3 * t], r.p0 + mesh->tri[3 * t + 1], r.p0 + mesh->tri[3 * t + 2]);
  if (rc < 0) return rc; /* the particles stay: a failed builder is not finalized */
  memcpy(b->rv + 3 * (size_t)b->nrv, mesh->x, 3 * (size_t)nv * sizeof(dsReal));
  b->nrv += nv;
  b->body[b->nbody] = r;
  return b->nbody++;
}

/* Outward orientation of a convex primitive centred at the origin: each
 * triangle's normal must point away from the origin. */
static void orient_outward(dsMesh* m) {
  for (int t = 0; t < m->ntri; t++) {
    int* f = m->tri + 3 * t;
    const dsReal *a = m->x + 3 * f[0], *bq = m->x + 3 * f[1], *c = m->x + 3 * f[2];
    double e1[3], e2[3], n[3], s = 0;
    for (int k = 0; k < 3; k++) {
      e1[k] = (double)bq[k] - a[k];
      e2[k] = (double)c[k] - a[k];
    }
    n[0] = e1[1] * e2[2] - e1[2] * e2[1];
    n[1] = e1[2] * e2[0] - e1[0] * e2[2];
    n[2] = e1[0] * e2[1] - e1[1] * e2[0];
    for (int k = 0; k < 3; k++) s += n[k] * ((double)a[k] + bq[k] + c[k]);
    if (s < 0) {
      int tmp = f[1];
      f[1] = f[2];
      f[2] = tmp;
    }
  }
}

static int add_primitive(dsBuilder* b, dsMesh* mesh, const dsRigidDef* def) {
  orient_outward(mesh);
  int rc = ds_builder_add_rigid(b, mesh, NULL, def);
  ds_mesh_free(mesh);
  return rc;
}

int ds_builder_add_rigid_box(dsBuilder* b, const dsReal h[3], const dsRigidDef* def) {
  if (!b || !h || !def) return DS_ERR_INVALID;
  if (!(h[0] > 0 && h[1] > 0 && h[2] > 0) || !finite3(h))
    return ds__seterr(&b->err, DS_ERR_INVALID, "box: half extents must be > 0");
  dsMesh m;
  if (ds_mesh_alloc(&m, 8, 12, 0)) return ds__seterr(&b->err, DS_ERR_NOMEM, "out of memory");
  for (int i = 0; i < 8; i++)
    for (int k = 0; k < 3; k++) m.x[3 * i + k] = ((i >> k) & 1) ? h[k] : -h[k];
  /* two triangles per face (orient_outward orients them) */
  static const int T[36] = {0, 2, 1, 1, 2, 3, 4, 5, 6, 5, 7, 6, 0, 1, 4, 1, 5, 4,
                            2, 6, 3, 3, 6, 7, 0, 4, 2, 2, 4, 6, 1, 3, 5, 3, 7, 5};
  memcpy(m.tri, T, sizeof T);
  return add_primitive(b, &m, def);
}

int ds_builder_add_rigid_sphere(dsBuilder* b, dsReal radius, int nseg, const dsRigidDef* def) {
  if (!b || !def) return DS_ERR_INVALID;
  if (!(radius > 0) || !isfinite(radius) || nseg < 4 || nseg > 4096)
    return ds__seterr(&b->err, DS_ERR_INVALID, "sphere: radius must be > 0 and nseg in 4..4096");
  const int nb = nseg / 2, nring = nb - 1, nv = 2 + nring * nseg, nt = 2 * nseg * (nb - 1);
  dsMesh m;
  if (ds_mesh_alloc(&m, nv, nt, 0)) return ds__seterr(&b->err, DS_ERR_NOMEM, "out of memory");
  const double PI = 3.14159265358979323846;
  /* 0: bottom pole (-y), then rings from bottom to top, last: top pole */
  m.x[0] = 0;
  m.x[1] = -radius;
  m.x[2] = 0;
  for (int k = 1; k <= nring; k++) {
    const double th = PI * k / nb, y = -cos(th), rr = sin(th);
    for (int j = 0; j < nseg; j++) {
      const double ph = 2 * PI * j / nseg;
      dsReal* x = m.x + 3 * (1 + (k - 1) * nseg + j);
      x[0] = (dsReal)(radius * rr * cos(ph));
      x[1] = (dsReal)(radius * y);
      x[2] = (dsReal)(radius * rr * sin(ph));
    }
  }
  const int top = nv - 1;
  m.x[3 * top] = 0;
  m.x[3 * top + 1] = radius;
  m.x[3 * top + 2] = 0;
  int t = 0;
  for (int j = 0; j < nseg; j++) {
    const int j1 = (j + 1) % nseg;
    int* f = m.tri + 3 * t++;
    f[0] = 0, f[1] = 1 + j, f[2] = 1 + j1;
    for (int k = 1; k < nring; k++) {
      const int a = 1 + (k - 1) * nseg + j, bb = 1 + (k - 1) * nseg + j1, c = a + nseg, d = bb + nseg;
      f = m.tri + 3 * t++;
      f[0] = a, f[1] = c, f[2] = bb;
      f = m.tri + 3 * t++;
      f[0] = bb, f[1] = c, f[2] = d;
    }
    f = m.tri + 3 * t++;
    f[0] = top, f[1] = 1 + (nring - 1) * nseg + j1, f[2] = 1 + (nring - 1) * nseg + j;
  }
  m.ntri = t;
  return add_primitive(b, &m, def);
}

int ds_builder_add_rigid_cylinder(dsBuilder* b, dsReal radius, dsReal hh, int nseg, const dsRigidDef* def) {
  if (!b || !def) return DS_ERR_INVALID;
  if (!(radius > 0) || !(hh > 0) || !isfinite(radius) || !isfinite(hh) || nseg < 3 || nseg > 4096)
    return ds__seterr(&b->err, DS_ERR_INVALID, "cylinder: radius, half height must be > 0 and nseg in 3..4096");
  const int nv = 2 * nseg + 2, nt = 4 * nseg;
  dsMesh m;
  if (ds_mesh_alloc(&m, nv, nt, 0)) return ds__seterr(&b->err, DS_ERR_NOMEM, "out of memory");
  const double PI = 3.14159265358979323846;
  for (int j = 0; j < nseg; j++) {
    const double ph = 2 * PI * j / nseg;
    for (int s = 0; s < 2; s++) {
      dsReal* x = m.x + 3 * (s * nseg + j);
      x[0] = (dsReal)(radius * cos(ph));
      x[1] = s ? hh : -hh;
      x[2] = (dsReal)(radius * sin(ph));
    }
  }
  const int cb = 2 * nseg, ct = cb + 1;
  m.x[3 * cb] = 0, m.x[3 * cb + 1] = -hh, m.x[3 * cb + 2] = 0;
  m.x[3 * ct] = 0, m.x[3 * ct + 1] = hh, m.x[3 * ct + 2] = 0;
  for (int j = 0; j < nseg; j++) {
    const int j1 = (j + 1) % nseg;
    int* f = m.tri + 12 * j;
    f[0] = j, f[1] = nseg + j, f[2] = j1;
    f[3] = j1, f[4] = nseg + j, f[5] = nseg + j1;
    f[6] = cb, f[7] = j, f[8] = j1;
    f[9] = ct, f[10] = nseg + j1, f[11] = nseg + j;
  }
  return add_primitive(b, &m, def);
}

/* ---- articulation (engine/artic_model.c) --------------------------------------*/
int ds_builder_set_artic(dsBuilder* b, const struct dsArticModel* am, const double* q0, const double* qd0) {
  if (!b || !am) return DS_ERR_INVALID;
  return ds__artic_builder_set(&b->art, &b->err, am, q0, qd0);
}

int ds_builder_add_artic_mesh(dsBuilder* b, int link, const dsMesh* mesh, const dsReal* anchor_weight, dsReal mass) {
  if (!b || !mesh || mesh->nvert <= 0 || !mesh->x || (mesh->ntri && !mesh->tri)) return DS_ERR_INVALID;
  int rc = ds__artic_builder_check_link(&b->art, &b->err, link, mass);
  if (rc) return rc;
  const int first = b->np;
  const dsReal zero[3] = {0, 0, 0};
  for (int k = 0; k < mesh->nvert && !rc; k++) {
    rc = ds_builder_add_particle(b, zero, NULL, mass / mesh->nvert); /* posed at finalize */
    if (rc >= 0) rc = ds__artic_builder_vertex(&b->art, &b->err, link, mesh->x + 3 * (size_t)k,
                                               anchor_weight ? anchor_weight[k] : 0);
  }
  for (int t = 0; t < mesh->ntri && rc >= 0; t++)
    rc = ds_builder_add_face(b, first + mesh->tri[3 * t], first + mesh->tri[3 * t + 1], first + mesh->tri[3 * t + 2]);
  return rc < 0 ? rc : first;
}

/* ---- model ------------------------------------------------------------------*/
static size_t model_count(const dsModel* m_, int which) {
  int i = 0;
#define DS__COUNT(field, type, count, diff, name) \
  if (i++ == which) return (size_t)(count);
  DS_MODEL_ARRAYS(DS__COUNT)
#undef DS__COUNT
  return 0;
}

void ds_model_free(dsModel* m) {
  if (!m) return;
#define DS__FREE(field, type, count, diff, name) ds__free(m->field);
  DS_MODEL_ARRAYS(DS__FREE)
#undef DS__FREE
  ds_artic_model_free(m->artic);
  ds__free(m->err_);
  ds__free(m);
}

/* Allocates every array of m for its counts (zeroed; NULL for count 0). */
static int model_alloc(dsModel* m) {
  int which = 0;
#define DS__ALLOC(field, type, count, diff, name)                          \
  {                                                                        \
    size_t n_ = model_count(m, which++);                                   \
    if (n_) {                                                              \
      m->field = (type*)ds__calloc(n_, sizeof(type));                      \
      if (!m->field) return DS_ERR_NOMEM;                                  \
    }                                                                      \
  }
  DS_MODEL_ARRAYS(DS__ALLOC)
#undef DS__ALLOC
  m->err_ = ds__calloc(1, sizeof(dsErrBuf));
  return m->err_ ? 0 : DS_ERR_NOMEM;
}

int ds_model_copy(const dsModel* src, dsModel** out) {
  if (!src || !out) return DS_ERR_INVALID;
  *out = NULL;
  dsModel* m = (dsModel*)ds__malloc(sizeof *m);
  if (!m) return DS_ERR_NOMEM;
  *m = *src;
#define DS__NULL(field, type, count, diff, name) m->field = NULL;
  DS_MODEL_ARRAYS(DS__NULL)
#undef DS__NULL
  m->err_ = NULL;
  m->artic = NULL;
  if (model_alloc(m) || (src->artic && ds__artic_model_copy(src->artic, &m->artic))) {
    ds_model_free(m);
    return DS_ERR_NOMEM;
  }
  const dsModel* m_ = src;
#define DS__COPY(field, type, count, diff, name) \
  if ((count) > 0) memcpy(m->field, src->field, (size_t)(count) * sizeof(type));
  DS_MODEL_ARRAYS(DS__COPY)
#undef DS__COPY
  *out = m;
  return 0;
}

static int finalize_check(dsBuilder* b) {
  if (!(b->dt > 0) || !isfinite(b->dt))
    return ds__seterr(&b->err, DS_ERR_INVALID, "dt %g (must be > 0)", (double)b->dt);
  if (!finite3(b->gravity)) return ds__seterr(&b->err, DS_ERR_INVALID, "gravity not finite");
  if (b->ground) {
    const dsGroundDef* g = &b->gd;
    dsReal p[5] = {g->ke, g->kd, g->kf, g->mu, g->skin};
    for (int k = 0; k < 5; k++)
      if (!isfinite(p[k])) return ds__seterr(&b->err, DS_ERR_INVALID, "ground contact parameter not finite");
    if (g->ke < 0 || g->kd < 0 || g->kf < 0 || g->mu < 0)
      return ds__seterr(&b->err, DS_ERR_INVALID, "ground contact ke, kd, kf, mu must be >= 0");
  }
  if (b->aero && (!isfinite(b->lift) || !isfinite(b->drag)))
    return ds__seterr(&b->err, DS_ERR_INVALID, "lift/drag coefficient not finite");
  if (b->np == 0) return ds__seterr(&b->err, DS_ERR_INVALID, "model has no particles");
  /* the implicit step's Newton matrix needs every force's Jacobian: rigid
   * bodies have their own solver */
  if (b->integrator == DS_INTEGRATOR_IMPLICIT && b->nbody)
    return ds__seterr(&b->err, DS_ERR_UNSUPPORTED,
                      "integrator implicit: rigid bodies (%d) are not supported; use semi_implicit", b->nbody);
  if (b->art.am) {
    const int other = b->np - b->art.nv; /* particles that are not articulation vertices */
    return ds__artic_builder_check(&b->art, &b->err, b->dt, other, b->ns + b->nt + b->nb + b->ntet, b->nbody,
                                   b->integrator != DS_INTEGRATOR_SEMI_IMPLICIT);
  }
  return 0;
}

/* The model's counts and its force-slot layout (L); the slots must fit an
 * int, as the incidence stores them as ints. */
static int finalize_layout(dsBuilder* b, dsModel* counts, dsForceLayout* L) {
  memset(counts, 0, sizeof *counts);
  counts->nparticle = b->np;
  counts->nspring = b->ns;
  counts->ntri = b->nt;
  counts->nbend = b->nb;
  counts->ntet = b->ntet;
  counts->nface = b->nf;
  counts->dt = b->dt;
  counts->ground = b->ground;
  counts->aero = b->aero;
  counts->nbody = b->nbody;
  ds__artic_counts(&b->art, counts);
  ds__force_layout(counts, L);
  if (L->nslot > (1 << 30)) return ds__seterr(&b->err, DS_ERR_RANGE, "model too large (%lld slots)", L->nslot);
  counts->nslot = (int)L->nslot;
  counts->nact = L->nact;
  return 0;
}

/* The initial state, inv_mass = 1/mass (0 for a pinned particle of mass 0)
 * and the springs, as added. */
static void finalize_particles(const dsBuilder* b, dsModel* m) {
  const int np = b->np;
  memcpy(m->x0, b->x, 3 * (size_t)np * sizeof(dsReal));
  memcpy(m->v0, b->v, 3 * (size_t)np * sizeof(dsReal));
  for (int i = 0; i < np; i++) {
    m->mass[i] = b->mass[i];
    m->inv_mass[i] = b->mass[i] > 0 ? 1 / b->mass[i] : 0;
  }
  if (b->ns) {
    memcpy(m->spring_idx, b->s_idx, 2 * (size_t)b->ns * sizeof(int));
    memcpy(m->spring_ke, b->s_ke, (size_t)b->ns * sizeof(dsReal));
    memcpy(m->spring_kd, b->s_kd, (size_t)b->ns * sizeof(dsReal));
    memcpy(m->spring_rest, b->s_rest, (size_t)b->ns * sizeof(dsReal));
  }
}

/* Each triangle's rest shape from the initial positions: Dm (the inverse
 * 2x2 rest matrix) and area A0; a degenerate one is an error naming it. */
static int finalize_tris(dsBuilder* b, dsModel* m) {
  for (int e = 0; e < b->nt; e++) {
    dsReal x[9];
    dsTriRest r;
    for (int a = 0; a < 3; a++) memcpy(x + 3 * a, b->x + 3 * b->t_idx[3 * e + a], 3 * sizeof(dsReal));
    if (ds__tri_rest(x, &r))
      return ds__seterr(&b->err, DS_ERR_MESH, "tri %d (particles %d, %d, %d): degenerate rest triangle", e,
                        b->t_idx[3 * e], b->t_idx[3 * e + 1], b->t_idx[3 * e + 2]);
    memcpy(m->tri_Dm + 4 * e, r.Dm, 4 * sizeof(dsReal));
    m->tri_area[e] = r.area;
    memcpy(m->tri_idx + 3 * e, b->t_idx + 3 * e, 3 * sizeof(int));
    m->tri_k_mu[e] = b->t_mu[e];
    m->tri_k_lambda[e] = b->t_lam[e];
    m->tri_k_damp[e] = b->t_damp[e];
  }
  return 0;
}

/* Each hinge's rest angle from the initial positions; a hinge without one
 * (a wing of zero area or an edge of zero length: no normals to measure
 * between) is an error naming it. */
static int finalize_bends(dsBuilder* b, dsModel* m) {
  for (int e = 0; e < b->nb; e++) {
    dsReal x[12];
    for (int a = 0; a < 4; a++) memcpy(x + 3 * a, b->x + 3 * b->b_idx[4 * e + a], 3 * sizeof(dsReal));
    dsBend__Geo geo;
    dsReal th = ds__bend_angle(x);
    if (!ds__bend_geo(x, &geo) || !isfinite(th))
      return ds__seterr(&b->err, DS_ERR_MESH, "bend %d (particles %d, %d, %d, %d): degenerate hinge (no rest angle)",
                        e, b->b_idx[4 * e], b->b_idx[4 * e + 1], b->b_idx[4 * e + 2], b->b_idx[4 * e + 3]);
    memcpy(m->bend_idx + 4 * e, b->b_idx + 4 * e, 4 * sizeof(int));
    m->bend_ke[e] = b->b_ke[e];
    m->bend_kd[e] = b->b_kd[e];
    m->bend_rest[e] = th;
  }
  return 0;
}

/* The signed volume of the tet x (4 x 3), det[x1-x0, x2-x0, x3-x0] / 6, in
 * double: only for the message of a rejected tet. */
static double tet_signed_volume(const dsReal* x) {
  dsReal c[3][3];
  for (int a = 0; a < 3; a++)
    for (int k = 0; k < 3; k++) c[a][k] = x[3 * (a + 1) + k] - x[k];
  return ((double)c[0][0] * (c[1][1] * c[2][2] - c[1][2] * c[2][1]) -
          (double)c[0][1] * (c[1][0] * c[2][2] - c[1][2] * c[2][0]) +
          (double)c[0][2] * (c[1][0] * c[2][1] - c[1][1] * c[2][0])) / 6.0;
}

/* Each tet's rest shape from the initial positions: B = Dm^-1, the rest
 * terms M (B B^T, det B) followed by the rest volume V0, and V0 itself; an
 * inverted or flat tet is an error giving its signed volume. */
static int finalize_tets(dsBuilder* b, dsModel* m) {
  for (int e = 0; e < b->ntet; e++) {
    dsReal x[12];
    dsTetRest r;
    for (int a = 0; a < 4; a++) memcpy(x + 3 * a, b->x + 3 * b->te_idx[4 * e + a], 3 * sizeof(dsReal));
    if (ds__tet_rest(x, &r)) {
      double vol = tet_signed_volume(x);
      return ds__seterr(&b->err, DS_ERR_MESH, "tet %d (particles %d, %d, %d, %d): %s rest tet (signed volume %g)",
                        e, b->te_idx[4 * e], b->te_idx[4 * e + 1], b->te_idx[4 * e + 2], b->te_idx[4 * e + 3],
                        vol < 0 ? "inverted" : "flat", vol);
    }
    memcpy(m->tet_B + 9 * e, r.B, 9 * sizeof(dsReal));
    for (int k = 0; k < DS_TET_NREST; k++) m->tet_M[DS_TET_M_AT(e, k)] = r.M[k];
    m->tet_M[DS_TET_M_AT(e, DS_TET_NREST)] = r.vol;
    m->tet_vol[e] = r.vol;
    memcpy(m->tet_idx + 4 * e, b->te_idx + 4 * e, 4 * sizeof(int));
    m->tet_k_mu[e] = b->te_mu[e];
    m->tet_k_lambda[e] = b->te_lam[e];
    m->tet_k_damp[e] = b->te_damp[e];
  }
  return 0;
}

/* The render faces and the model-wide parameters: gravity, the ground
 * contact and the aerodynamic coefficients (one value each). */
static void finalize_globals(const dsBuilder* b, dsModel* m) {
  if (b->nf) memcpy(m->face_idx, b->f_idx, 3 * (size_t)b->nf * sizeof(int));
  memcpy(m->gravity, b->gravity, 3 * sizeof(dsReal));
  m->integrator = b->integrator;
  m->solver = b->solver;
  m->contact_smooth = b->contact_smooth;
  if (b->ground) {
    m->contact_ke[0] = b->gd.ke;
    m->contact_kd[0] = b->gd.kd;
    m->contact_kf[0] = b->gd.kf;
    m->contact_mu[0] = b->gd.mu;
    m->contact_skin[0] = b->gd.skin;
  }
  if (b->aero) {
    m->aero_lift[0] = b->lift;
    m->aero_drag[0] = b->drag;
  }
}

/* The rigid bodies: each body's mass properties, initial state, contact
 * parameters (zeta from the restitution when e < 1) and vertex range; then
 * each particle's body (-1: none) and body-frame offset r, a body's vertices
 * getting inv_mass 0 as the body, not the particle integrator, moves them. */
static void finalize_bodies(const dsBuilder* b, dsModel* m) {
  for (int e = 0; e < b->nbody; e++) {
    const BodyRec* r = &b->body[e];
    m->body_mass[e] = r->mass;
    memcpy(m->body_com + 3 * e, r->com, sizeof r->com);
    memcpy(m->body_inertia + 9 * e, r->I, sizeof r->I);
    memcpy(m->body_x0 + 3 * e, r->x0, sizeof r->x0);
    memcpy(m->body_q0 + 4 * e, r->q0, sizeof r->q0);
    memcpy(m->body_v0 + 3 * e, r->v0, sizeof r->v0);
    memcpy(m->body_w0 + 3 * e, r->w0, sizeof r->w0);
    m->body_ke[e] = r->ke;
    m->body_kd[e] = r->kd;
    m->body_kf[e] = r->kf;
    m->body_mu[e] = r->mu;
    m->body_restitution[e] = r->e;
    if (r->e < 1) {
      dsReal dz;
      m->body_zeta[e] = ds__rigid_zeta(r->e, &dz);
    }
    m->body_vrange[2 * e] = r->p0;
    m->body_vrange[2 * e + 1] = r->p0 + r->n;
  }
  if (b->nbody) {
    for (int i = 0; i < b->np; i++) m->particle_body[i] = -1;
    for (int e = 0; e < b->nbody; e++)
      for (int k = 0; k < b->body[e].n; k++) m->inv_mass[b->body[e].p0 + k] = 0; /* the body moves them */
    for (int e = 0; e < b->nbody; e++) {
      const BodyRec* r = &b->body[e];
      for (int k = 0; k < r->n; k++) {
        m->particle_body[r->p0 + k] = e;
        memcpy(m->body_r + 3 * (size_t)(r->p0 + k), b->rv + 3 * (size_t)(r->r0 + k), 3 * sizeof(dsReal));
      }
    }
  }
}

/* Incidence (CSR). The slots are numbered in the order of the force
 * table's element models (spring_idx | tri_idx | bend_idx | tet_idx), so
 * slot s belongs to the s-th entry of that concatenation. Filling in
 * ascending s gives every particle its slots in ascending order: the
 * fixed gather order. */
static int finalize_incidence(dsBuilder* b, dsModel* m, const dsForceLayout* L) {
  const int np = b->np;
  int* cnt = m->inc_start;
  for (int k = 0; k < DS__NFORCE; k++) {
    const dsForceModel* F = &ds__forces[k];
    if (F->nvert == 0) continue;
    const int* idx = F->idx(m);
    const size_t len = (size_t)F->nvert * L->count[k];
    for (size_t s = 0; s < len; s++) cnt[idx[s] + 1]++;
  }
  for (int i = 0; i < np; i++) cnt[i + 1] += cnt[i];
  int* fill = (int*)ds__malloc(((size_t)np + 1) * sizeof(int));
  if (!fill) return ds__seterr(&b->err, DS_ERR_NOMEM, "out of memory");
  memcpy(fill, cnt, (size_t)np * sizeof(int));
  for (int k = 0; k < DS__NFORCE; k++) {
    const dsForceModel* F = &ds__forces[k];
    if (F->nvert == 0) continue;
    const int* idx = F->idx(m);
    const size_t len = (size_t)F->nvert * L->count[k];
    for (size_t s = 0; s < len; s++) m->inc_slot[fill[idx[s]]++] = L->slot[k] + (int)s;
  }
  ds__free(fill);
  return 0;
}

/* A rigid body's vertices carry no elements: the body's motion would
 * override whatever force an element put on them. */
static int finalize_rigid_check(dsBuilder* b, const dsModel* m) {
  for (int i = 0; i < b->np && b->nbody; i++)
    if (m->particle_body[i] >= 0 && m->inc_start[i + 1] > m->inc_start[i])
      return ds__seterr(&b->err, DS_ERR_INVALID,
                        "particle %d (a vertex of body %d) belongs to an element: rigid vertices carry no elements", i,
                        m->particle_body[i]);
  return 0;
}

int ds_builder_finalize(dsBuilder* b, dsModel** out) {
  if (!b || !out) return DS_ERR_INVALID;
  *out = NULL;
  int rc = finalize_check(b);
  if (rc) return rc;
  dsModel counts;
  dsForceLayout L;
  if ((rc = finalize_layout(b, &counts, &L))) return rc;
  dsModel* m = (dsModel*)ds__calloc(1, sizeof *m);
  if (!m) return ds__seterr(&b->err, DS_ERR_NOMEM, "out of memory");
  *m = counts;
  if ((rc = model_alloc(m))) {
    ds_model_free(m);
    return ds__seterr(&b->err, DS_ERR_NOMEM, "out of memory allocating the model");
  }
  finalize_particles(b, m);
  rc = finalize_tris(b, m);
  if (!rc) rc = finalize_bends(b, m);
  if (!rc) rc = finalize_tets(b, m);
  if (!rc) {
    finalize_globals(b, m);
    finalize_bodies(b, m);
    rc = finalize_incidence(b, m, &L);
  }
  if (!rc) rc = finalize_rigid_check(b, m);
  if (!rc && b->art.am) rc = ds__artic_finalize(&b->art, &b->err, m);
  if (rc) { /* b->err names the element at fault */
    ds_model_free(m);
    return rc;
  }
  *out = m;
  ds__clearerr(&b->err);
  return 0;
}

/* ---- named parameters --------------------------------------------------------*/
#define DS__NAMEOF_1(name) name,
#define DS__NAMEOF_0(name)
#define DS__NAME_IF_DIFF(field, type, count, diff, name) DS__NAMEOF_##diff(name)
static const char* const g_param_names[] = {DS_MODEL_ARRAYS(DS__NAME_IF_DIFF)};
#undef DS__NAME_IF_DIFF

int ds_param_count(void) { return (int)(sizeof g_param_names / sizeof g_param_names[0]); }

const char* ds_param_name(int i) { return (i >= 0 && i < ds_param_count()) ? g_param_names[i] : NULL; }

int ds_model_param(const dsModel* m, const char* name, const dsReal** ptr, int* count) {
  if (!m || !name) return DS_ERR_INVALID;
  const dsModel* m_ = m;
  /* an articulation's parameters by their own names first, as ds_model_set_param, ds_grad_param
     and the batched engine look them up: its "contact.ke" is the one its contact uses */
  const int k = m->artic ? ds_artic_param_index(m->artic, name) : DS_ERR_NOTFOUND;
  if (k >= 0) {
    if (ptr) *ptr = m->artic_param + k;
    if (count) *count = 1;
    return 0;
  }
#define DS__LOOK(field, type, cnt, diff, nm)                                              \
  if (strcmp(name, nm) == 0) {                                                            \
    if (!_Generic(m->field, dsReal*: 1, default: 0)) return DS_ERR_INVALID;               \
    if (ptr) *ptr = (const dsReal*)(const void*)m->field;                                 \
    if (count) *count = (int)(cnt);                                                       \
    return 0;                                                                             \
  }
  DS_MODEL_ARRAYS(DS__LOOK)
#undef DS__LOOK
  return DS_ERR_NOTFOUND;
}

const char* ds_model_last_error(const dsModel* m) { return m ? ds__errmsg((const dsErrBuf*)m->err_) : ""; }

int ds_model_set_param(dsModel* m, const char* name, const dsReal* values, int count) {
  if (!m || !name || (!values && count)) return DS_ERR_INVALID;
  dsErrBuf* eb = (dsErrBuf*)m->err_;
  int is_diff = 0;
  for (int i = 0; i < ds_param_count(); i++)
    if (strcmp(g_param_names[i], name) == 0) is_diff = 1;
  if (m->artic && (!strcmp(name, "artic.param") || ds_artic_param_index(m->artic, name) >= 0))
    return ds__artic_set_param(m, eb, name, values, count);
  if (!is_diff) return ds__seterr(eb, DS_ERR_NOTFOUND, "\"%s\" is not a differentiable parameter", name);
  const dsReal* cur;
  int n;
  ds_model_param(m, name, &cur, &n);
  if (count != n) return ds__seterr(eb, DS_ERR_INVALID, "\"%s\": %d values given, %d expected", name, count, n);
  /* parameters that are physical only when >= 0 (stiffness, damping,
   * * friction, mass, rest lengths); Lame lambda, gravity, rest angles, the contact skin, the
   * initial state and the aerodynamic coefficients may take any sign */
  static const char* const nonneg[] = {"particle.mass", "spring.ke",  "spring.kd",  "spring.rest", "tri.k_mu",
                                       "tri.k_damp",    "bend.ke",    "bend.kd",    "tet.k_mu",    "tet.k_damp",
                                       "contact.ke",    "contact.kd", "contact.kf", "contact.mu",
                                       "body.contact_ke", "body.contact_kd", "body.contact_kf", "body.contact_mu"};
  int must_be_nonneg = 0;
  for (size_t k = 0; k < sizeof nonneg / sizeof nonneg[0]; k++) must_be_nonneg |= !strcmp(name, nonneg[k]);
  for (int i = 0; i < n; i++) {
    if (!isfinite(values[i]))
      return ds__seterr(eb, DS_ERR_INVALID, "\"%s\"[%d]: expected a finite number, got %g", name, i, (double)values[i]);
    if (must_be_nonneg && values[i] < 0)
      return ds__seterr(eb, DS_ERR_RANGE, "\"%s\"[%d]: expected a number >= 0, got %g", name, i, (double)values[i]);
    if (strcmp(name, "body.mass") == 0 && !(values[i] > 0))
      return ds__seterr(eb, DS_ERR_RANGE, "\"%s\"[%d]: expected a number > 0, got %g", name, i, (double)values[i]);
    if (strcmp(name, "body.restitution") == 0 && !(values[i] > 0 && values[i] <= 1))
      return ds__seterr(eb, DS_ERR_RANGE, "\"%s\"[%d]: expected a number in (0, 1], got %g", name, i, (double)values[i]);
  }
  if (strcmp(name, "body.inertia") == 0)
    for (int b = 0; b < n / 9; b++) { /* the symmetric part positive definite (leading minors) */
      const dsReal* I = values + 9 * b;
      double s01 = 0.5 * ((double)I[1] + I[3]), s02 = 0.5 * ((double)I[2] + I[6]), s12 = 0.5 * ((double)I[5] + I[7]);
      double m1 = I[0], m2 = (double)I[0] * I[4] - s01 * s01;
      double m3 = I[0] * ((double)I[4] * I[8] - s12 * s12) - s01 * (s01 * I[8] - s12 * s02) + s02 * (s01 * s12 - I[4] * s02);
      if (!(m1 > 0 && m2 > 0 && m3 > 0))
        return ds__seterr(eb, DS_ERR_INVALID, "\"%s\": body %d: inertia not positive definite", name, b);
    }
  if (n) memcpy((void*)cur, values, (size_t)n * sizeof(dsReal));
  if (strcmp(name, "body.restitution") == 0)
    for (int b = 0; b < m->nbody; b++) {
      dsReal dz;
      m->body_zeta[b] = m->body_restitution[b] < 1 ? ds__rigid_zeta(m->body_restitution[b], &dz) : 0;
    }
  if (strcmp(name, "particle.mass") == 0)
    for (int i = 0; i < m->nparticle; i++)
      m->inv_mass[i] = m->mass[i] > 0 && !(m->nbody && m->particle_body[i] >= 0) ? 1 / m->mass[i] : 0;
  ds__clearerr(eb);
  return 0;
}
