/* An articulation inside the particle engine: a model's links are stepped
 * by the reduced-coordinate engine of engine/artic.c, and each link's mesh
 * is a set of particles posed by the link, so that everything that reads
 * particles (rasterizer, image losses, goal images, logs, frames) sees them.
 *
 * Frames: the articulation is z up, the particle world y up. A point p of
 * the articulation is the particle X = P p = (p_x, p_z, -p_y); P is a proper
 * rotation (det 1, -90 degrees about x), so P^T maps world adjoints back:
 * P^T a = (a_x, -a_z, a_y).
 *
 * Vertex k of link l (rotation R, centre of mass c, spatial velocity
 * V = (w, v0), v0 the velocity of the point at the origin):
 *   r'_k = r_k + s_k ac_l          (ac_l: the joint's anchor_child parameter)
 *   p_k  = c + R r'_k,   u_k = v0 + w x p_k,   X_k = P p_k,   U_k = P u_k
 * Adjoint, from A = P^T dL/dX_k and B = P^T dL/dU_k:
 *   dv0 += B,  dw += p_k x B,  dp_k = A + B x w,
 *   dc += dp_k,  dR += dp_k r'_k^T,  d ac_l += s_k R^T dp_k,
 * then through the links' kinematics (ds__artic_pose_vjp) to (q, qd) and
 * the parameters. The step's own adjoint is ds__artic_substep_vjp. Nothing
 * here allocates after ds_data_create. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "engine/artic_model.h"
#include "engine/artic_model_body.h"
#include "engine/artic_priv.h"
#include "engine/engine_priv.h"

/* ---- builder -------------------------------------------------------------------------- */

void ds__artic_builder_free(dsBuilderArtic* a) {
  ds_artic_model_free(a->am);
  ds__free(a->q0);
  ds__free(a->qd0);
  ds__free(a->link);
  ds__free(a->r);
  ds__free(a->s);
  memset(a, 0, sizeof *a);
}

int ds__artic_builder_set(dsBuilderArtic* a, dsErrBuf* err, const dsArticModel* am, const double* q0,
                          const double* qd0) {
  if (a->am) return ds__seterr(err, DS_ERR_STATE, "articulation: the model has one already (one per model)");
  dsArticModel* c;
  if (ds__artic_model_copy(am, &c)) return ds__seterr(err, DS_ERR_NOMEM, "articulation: out of memory");
  a->q0 = ds__calloc((size_t)am->nq + 1, sizeof(double));
  a->qd0 = ds__calloc((size_t)am->nv + 1, sizeof(double));
  if (!a->q0 || !a->qd0) {
    ds_artic_model_free(c);
    ds__free(a->q0);
    ds__free(a->qd0);
    a->q0 = a->qd0 = NULL;
    return ds__seterr(err, DS_ERR_NOMEM, "articulation: out of memory");
  }
  /* the q = 0 pose unless given: identity quaternions (dsim/artic.h) */
  for (int i = 0; i < am->nbody; i++) {
    const int t = am->jtype[i];
    if (t == DS_JOINT_BALL) a->q0[am->qadr[i]] = 1;
    if (t == DS_JOINT_FREE) a->q0[am->qadr[i] + 3] = 1;
  }
  for (int k = 0; k < am->nq && q0; k++) {
    if (!isfinite(q0[k])) {
      ds_artic_model_free(c);
      return ds__seterr(err, DS_ERR_INVALID, "articulation: q0[%d] is %g (expected a finite number)", k, q0[k]);
    }
    a->q0[k] = q0[k];
  }
  for (int k = 0; k < am->nv && qd0; k++) {
    if (!isfinite(qd0[k])) {
      ds_artic_model_free(c);
      return ds__seterr(err, DS_ERR_INVALID, "articulation: qd0[%d] is %g (expected a finite number)", k, qd0[k]);
    }
    a->qd0[k] = qd0[k];
  }
  a->am = c;
  return 0;
}

int ds__artic_builder_check_link(const dsBuilderArtic* a, dsErrBuf* err, int link, dsReal mass) {
  if (!a->am) return ds__seterr(err, DS_ERR_STATE, "articulation mesh: set the articulation first (ds_builder_set_artic)");
  if (link < 0 || link >= a->am->nbody)
    return ds__seterr(err, DS_ERR_INVALID, "articulation mesh: link %d (expected 0 .. %d)", link, a->am->nbody - 1);
  if (!(mass > 0) || !isfinite(mass))
    return ds__seterr(err, DS_ERR_INVALID, "articulation mesh of link %s: mass %g (expected > 0)",
                      a->am->body_name[link], (double)mass);
  return 0;
}

int ds__artic_builder_vertex(dsBuilderArtic* a, dsErrBuf* err, int link, const dsReal r[3], dsReal s) {
  if (!isfinite(r[0]) || !isfinite(r[1]) || !isfinite(r[2]) || !isfinite(s))
    return ds__seterr(err, DS_ERR_INVALID, "articulation mesh of link %s: vertex %d not finite", a->am->body_name[link],
                      a->nv);
  if (a->nv == a->cap) {
    const int nc = a->cap ? 2 * a->cap : 64;
    int* l = ds__realloc(a->link, (size_t)nc * sizeof(int));
    if (l) a->link = l;
    dsReal* rr = l ? ds__realloc(a->r, 3 * (size_t)nc * sizeof(dsReal)) : NULL;
    if (rr) a->r = rr;
    dsReal* ss = rr ? ds__realloc(a->s, (size_t)nc * sizeof(dsReal)) : NULL;
    if (!ss) return ds__seterr(err, DS_ERR_NOMEM, "articulation mesh: out of memory");
    a->s = ss;
    a->cap = nc;
  }
  a->link[a->nv] = link;
  for (int k = 0; k < 3; k++) a->r[3 * (size_t)a->nv + k] = r[k];
  a->s[a->nv++] = s;
  return 0;
}

int ds__artic_builder_check(const dsBuilderArtic* a, dsErrBuf* err, dsReal dt, int other, int nelem, int nbody,
                            int implicit) {
  if (sizeof(dsReal) != sizeof(double))
    return ds__seterr(err, DS_ERR_UNSUPPORTED, "articulation: not supported in a single-precision build");
  if (other || nelem || nbody)
    return ds__seterr(err, DS_ERR_UNSUPPORTED,
                      "articulation: mixed models are not supported (%d other particles, %d elements, %d rigid "
                      "bodies; expected only the articulation's meshes)",
                      other, nelem, nbody);
  if (implicit)
    return ds__seterr(err, DS_ERR_UNSUPPORTED, "integrator implicit: articulations are not supported; use semi_implicit");
  if (a->nv == 0)
    return ds__seterr(err, DS_ERR_INVALID, "articulation: no link mesh (ds_builder_add_artic_mesh)");
  if ((double)dt != a->am->dt)
    return ds__seterr(err, DS_ERR_INVALID, "articulation: its dt %g differs from the model's %g (expected equal)",
                      a->am->dt, (double)dt);
  return 0;
}

void ds__artic_counts(const dsBuilderArtic* a, dsModel* counts) {
  if (!a->am) return;
  counts->artic_nbody = a->am->nbody;
  counts->artic_nq = a->am->nq;
  counts->artic_nv = a->am->nv;
  counts->artic_nu = a->am->nu;
  counts->artic_nparam = a->am->nparam;
}

/* ---- scratch ---------------------------------------------------------------------------- */

void ds__artic_scratch_free(dsArticScratch* s) {
  if (!s) return;
  ds_artic_data_free(s->ad);
  ds__free(s->buf);
  ds__free(s);
}

int ds__artic_scratch_create(const dsModel* m, dsArticScratch** out) {
  *out = NULL;
  dsArticScratch* s = ds__calloc(1, sizeof *s);
  if (!s) return DS_ERR_NOMEM;
  const size_t ns = (size_t)(m->artic_nq + m->artic_nv), nb = (size_t)m->artic_nbody, nu = (size_t)m->artic_nu;
  s->buf = ds__calloc(4 * ns + 2 * nu + 36 * nb + (size_t)m->artic_nparam + 1, sizeof(double));
  if (!s->buf || ds_artic_data_create(m->artic, 0, &s->ad)) {
    ds__artic_scratch_free(s);
    return DS_ERR_NOMEM;
  }
  double* p = s->buf;
  s->s = p, p += ns;
  s->so = p, p += ns;
  s->aout = p, p += ns;
  s->ain = p, p += ns;
  s->u = p, p += nu;
  s->gu = p, p += nu;
  s->R = p, p += 9 * nb;
  s->x = p, p += 3 * nb;
  s->V = p, p += 6 * nb;
  s->aR = p, p += 9 * nb;
  s->ax = p, p += 3 * nb;
  s->aV = p, p += 6 * nb;
  s->gth = p;
  *out = s;
  return 0;
}

/* Takes n elements of size sz from the block: their address at base (in
 * backend memory) and their offset; 16-byte aligned. */
static void* take(void* base, size_t* o, size_t n, size_t sz, size_t* at) {
  *at = *o;
  *o += (n * sz + 15) & ~(size_t)15;
  return (unsigned char*)base + *at;
}

/* One scratch (the one ds__artic_scratch_create makes, without the complex
 * workspace of the tangent sweeps, which the substep never uses) as one
 * block at base, in backend memory: the structs, with pointers into the
 * block, are written to the image img (NULL: none; the arrays stay zero)
 * for the caller to upload; returns the block's bytes. The batched engine
 * makes its instances' scratch this way on either backend. */
size_t ds__artic_scratch_layout(const dsModel* m, void* base, unsigned char* img) {
  const dsArticModel* am = m->artic;
  const size_t nq = (size_t)am->nq, nv = (size_t)am->nv, nu = (size_t)am->nu, np = (size_t)am->nparam,
               nb = (size_t)am->nbody, ns = nq + nv, n = nq + nv + nu + np;
  size_t o = 0, at_s, at_d, at_w, at;
  dsArticScratch S;
  dsArticData D;
  ws_r W;
  memset(&S, 0, sizeof S);
  memset(&D, 0, sizeof D);
  memset(&W, 0, sizeof W);
  take(base, &o, 1, sizeof S, &at_s);
  S.ad = (dsArticData*)take(base, &o, 1, sizeof D, &at_d);
  D.wr = take(base, &o, 1, sizeof W, &at_w);
  W.b = (body_r*)take(base, &o, nb, sizeof(body_r), &at);
  double* p = (double*)take(base, &o, n + 4 * nv + 6 * nb + nq + 8, sizeof(double), &at); /* as ws_alloc_r */
  W.q = p, p += nq;
  W.qd = p, p += nv;
  W.u = p, p += nu;
  W.th = p, p += np;
  W.tau = p, p += nv;
  W.id = p, p += nv;
  W.qdd = p, p += nv;
  W.qdn = p, p += nv;
  W.fext = p, p += 6 * nb;
  W.qn = p;
  W.cpt = (double*)take(base, &o, 6 * (size_t)am->nsphere + 1, sizeof(double), &at);
  D.nq = am->nq, D.nv = am->nv, D.nu = am->nu, D.nparam = am->nparam;
  D.q = (double*)take(base, &o, nq + 1, sizeof(double), &at);
  D.qd = (double*)take(base, &o, nv + 1, sizeof(double), &at);
  D.act = (double*)take(base, &o, 1, sizeof(double), &at);
  D.M = (double*)take(base, &o, nv * nv + 1, sizeof(double), &at);
  D.vec = (double*)take(base, &o, 6 * n + 2 * nv + nq + 1, sizeof(double), &at);
  D.qdd = D.vec + 6 * n;
  D.adj = D.qdd + nv;
  D.rev = (double*)take(base, &o, 1, sizeof(double) * (nu + np + nv) + sizeof(dsArticAdjBody) * nb, &at);
  p = (double*)take(base, &o, 4 * ns + 2 * nu + 36 * nb + np + 1, sizeof(double), &at); /* as scratch_create */
  S.buf = p;
  S.s = p, p += ns;
  S.so = p, p += ns;
  S.aout = p, p += ns;
  S.ain = p, p += ns;
  S.u = p, p += nu;
  S.gu = p, p += nu;
  S.R = p, p += 9 * nb;
  S.x = p, p += 3 * nb;
  S.V = p, p += 6 * nb;
  S.aR = p, p += 9 * nb;
  S.ax = p, p += 3 * nb;
  S.aV = p, p += 6 * nb;
  S.gth = p;
  if (img) {
    memcpy(img + at_s, &S, sizeof S);
    memcpy(img + at_d, &D, sizeof D);
    memcpy(img + at_w, &W, sizeof W);
  }
  return o;
}

static dsArticScratch* scratch_of(dsData* d) { return ((dsDataPriv*)d->err_)->art; }

/* ---- finalize, parameters ------------------------------------------------------------------ */

int ds__artic_finalize(const dsBuilderArtic* a, dsErrBuf* err, dsModel* m) {
  if (ds__artic_model_copy(a->am, &m->artic)) return ds__seterr(err, DS_ERR_NOMEM, "articulation: out of memory");
  for (int k = 0; k < m->artic_nq; k++) m->artic_q0[k] = a->q0[k];
  for (int k = 0; k < m->artic_nv; k++) m->artic_qd0[k] = a->qd0[k];
  for (int k = 0; k < m->artic_nparam; k++) m->artic_param[k] = a->am->param[k];
  memcpy(m->artic_link, a->link, (size_t)a->nv * sizeof(int));
  memcpy(m->artic_r, a->r, 3 * (size_t)a->nv * sizeof(dsReal));
  memcpy(m->artic_s, a->s, (size_t)a->nv * sizeof(dsReal));
  dsArticScratch* sc;
  if (ds__artic_scratch_create(m, &sc)) return ds__seterr(err, DS_ERR_NOMEM, "articulation: out of memory");
  for (int k = 0; k < m->artic_nq; k++) sc->s[k] = a->q0[k];
  for (int k = 0; k < m->artic_nv; k++) sc->s[m->artic_nq + k] = a->qd0[k];
  pose_vertices(m, sc, m->x0, m->v0);
  ds__artic_scratch_free(sc);
  return 0;
}

int ds__artic_set_param(dsModel* m, dsErrBuf* eb, const char* name, const dsReal* values, int count) {
  dsArticModel* am = m->artic;
  double* p = ds__artic_params(am);
  const int all = strcmp(name, "artic.param") == 0, n = all ? am->nparam : 1;
  if (count != n) return ds__seterr(eb, DS_ERR_INVALID, "\"%s\": %d values given, %d expected", name, count, n);
  const int first = all ? 0 : ds_artic_param_index(am, name);
  for (int i = 0; i < n; i++) {
    const char* pn = ds_artic_param_name(am, first + i);
    const int rc = ds_artic_param_set(am, pn, (double)values[i]);
    if (rc) { /* back to the values the model had: all or nothing */
      for (int k = 0; k < am->nparam; k++) p[k] = (double)m->artic_param[k];
      return ds__seterr(eb, rc, "\"%s\": %g refused (%s; the articulation's ranges: mass, inertia > 0, damping, "
                        "armature, stiffness >= 0, limit_lower <= limit_upper, finite)",
                        pn, (double)values[i], ds_err_name(rc));
    }
  }
  for (int k = 0; k < am->nparam; k++) m->artic_param[k] = (dsReal)p[k];
  ds__clearerr(eb);
  return 0;
}

/* ---- step and adjoint ------------------------------------------------------------------------ */

void ds__artic_reset(const dsModel* m, dsData* d) {
  dsArticScratch* sc = scratch_of(d);
  for (int k = 0; k < m->artic_nq; k++) d->artic_state[k] = sc->s[k] = m->artic_q0[k];
  for (int k = 0; k < m->artic_nv; k++) d->artic_state[m->artic_nq + k] = sc->s[m->artic_nq + k] = m->artic_qd0[k];
  memset(d->artic_act, 0, (size_t)m->artic_nu * sizeof(dsReal));
  memset(d->adj_artic, 0, (size_t)(m->artic_nq + m->artic_nv) * sizeof(dsReal));
  memset(d->adj_artic_act, 0, (size_t)m->artic_nu * sizeof(dsReal));
  pose_vertices(m, sc, d->x, d->v);
}

int ds__artic_substep_model(const dsModel* m, dsArticScratch* sc, const dsReal* s, const dsReal* u, dsReal* so,
                            dsReal* x, dsReal* v) {
  return artic_substep_model(m, sc, s, u, so, x, v);
}

int ds__artic_bwd(const dsModel* m, dsData* d, dsGrad* g, const dsReal* s, const dsReal* s1, const dsReal* u) {
  return ds__artic_bwd_at(m, scratch_of(d), d->adj_x, d->adj_v, d->adj_artic, d->adj_artic_act, g->artic_param, s, s1,
                          u);
}

int ds__artic_bwd_at(const dsModel* m, dsArticScratch* sc, dsReal* adj_x, dsReal* adj_v, dsReal* adj_artic,
                     dsReal* adj_act, dsReal* gparam, const dsReal* s, const dsReal* s1, const dsReal* u) {
  return artic_bwd_at(m, sc, adj_x, adj_v, adj_artic, adj_act, gparam, s, s1, u);
}

void ds__artic_finish(const dsModel* m, dsData* d, dsGrad* g, const dsReal* s0) {
  ds__artic_finish_at(m, scratch_of(d), d->adj_x, d->adj_v, d->adj_artic, g, s0);
}

void ds__artic_finish_at(const dsModel* m, dsArticScratch* sc, dsReal* adj_x, dsReal* adj_v, dsReal* adj_artic,
                         dsGrad* g, const dsReal* s0) {
  artic_finish_at(m, sc, adj_x, adj_v, adj_artic, g, s0);
}

void ds__artic_pose_state(const dsModel* m, dsArticScratch* sc, const dsReal* s, dsReal* x, dsReal* v) {
  artic_pose_state(m, sc, s, x, v);
}

size_t ds__artic_scratch_bytes(const dsModel* m) {
  const size_t ns = (size_t)(m->artic_nq + m->artic_nv), nb = (size_t)m->artic_nbody, nu = (size_t)m->artic_nu;
  return sizeof(dsArticScratch) + (4 * ns + 2 * nu + 36 * nb + (size_t)m->artic_nparam + 1) * sizeof(double) +
         ds__artic_data_bytes(m->artic);
}
