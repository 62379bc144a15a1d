/* Rigid bodies: the step's body stage (forward and backward loops around the
 * kernels of engine/rigid.h, whose header comment has the math), exact mass
 * properties of closed triangle meshes and the primitive meshes. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "dsim/engine.h"
#include "dsim/mesh.h"
#include "engine/engine_priv.h"
#include "engine/rigid.h"

static void inertia_of(const dsModel* m, int b, dsRigidInertia* I) {
  I->m = m->body_mass[b];
  memcpy(I->I, m->body_inertia + 9 * (size_t)b, 9 * sizeof(dsReal));
}

void ds__rigid_initial(const dsModel* m, int b, dsReal s[13]) {
  memcpy(s, m->body_x0 + 3 * (size_t)b, 3 * sizeof(dsReal));
  dsu_qnormalize(s + 3, m->body_q0 + 4 * (size_t)b);
  memcpy(s + 7, m->body_v0 + 3 * (size_t)b, 3 * sizeof(dsReal));
  memcpy(s + 10, m->body_w0 + 3 * (size_t)b, 3 * sizeof(dsReal));
}

/* F and tau of body b: vertex forces f (fr rows) with arms x_i - p, then the wrench. */
static void wrench(const dsModel* m, int b, const dsReal* x, const dsReal* fr, const dsReal* s, const dsReal* bfext,
                   dsReal F[3], dsReal T[3]) {
  dsu_zero3(F);
  dsu_zero3(T);
  for (int i = m->body_vrange[2 * b]; i < m->body_vrange[2 * b + 1]; i++) {
    const dsReal* fi = fr + 3 * (size_t)i;
    dsReal r[3], t[3];
    dsu_sub3(r, x + 3 * (size_t)i, s);
    dsu_cross3(t, r, fi);
    dsu_addto3(F, fi);
    dsu_addto3(T, t);
  }
  if (bfext) {
    dsu_addto3(F, bfext + 6 * (size_t)b);
    dsu_addto3(T, bfext + 6 * (size_t)b + 3);
  }
}

static void pose_body(const dsModel* m, int b, const dsReal* s, dsReal* x, dsReal* v) {
  const dsReal* c = m->body_com + 3 * (size_t)b;
  for (int i = m->body_vrange[2 * b]; i < m->body_vrange[2 * b + 1]; i++)
    ds__rigid_pose_fwd(s, m->body_r + 3 * (size_t)i, c, x + 3 * (size_t)i, v + 3 * (size_t)i);
}

void ds__rigid_pose_all(const dsModel* m, const dsReal* bs, dsReal* x, dsReal* v) {
  for (int b = 0; b < m->nbody; b++) pose_body(m, b, bs + 13 * (size_t)b, x, v);
}

void ds__rigid_fwd(const dsModel* m, int b, const dsReal* x, const dsReal* fr, const dsReal* bs,
                   const dsReal* bfext, dsReal* bo, dsReal* xo, dsReal* vo, int integrate) {
  if (!integrate) return;
  const dsReal* s = bs + 13 * (size_t)b;
  dsReal F[3], T[3], s1[13];
  wrench(m, b, x, fr, s, bfext, F, T);
  dsRigidInertia I;
  inertia_of(m, b, &I);
  ds__rigid_integrate_fwd(s, F, T, &I, m->gravity, m->dt, s1);
  memcpy(bo + 13 * (size_t)b, s1, sizeof s1);
  pose_body(m, b, s1, xo, vo);
}

void ds__rigid_bwd(const dsModel* m, int b, const dsReal* x, const dsReal* v, const dsReal* fext, const dsReal* bs,
                   const dsReal* bs1, const dsReal* bfext, dsReal* adj_x, dsReal* adj_v, dsReal* adj_body,
                   dsReal* af, dsReal* av, dsReal* adj_bfext, dsGrad* g, dsReal ag[3]) {
  const dsReal* s = bs + 13 * (size_t)b;
  const dsReal* s1 = bs1 + 13 * (size_t)b;
  const dsReal* c = m->body_com + 3 * (size_t)b;
  dsReal* A = adj_body + 13 * (size_t)b;
  const int i0 = m->body_vrange[2 * b], i1 = m->body_vrange[2 * b + 1];
  /* 1: the vertices' adjoints at the later state into the body's */
  for (int i = i0; i < i1; i++) {
    const size_t o = 3 * (size_t)i;
    ds__rigid_pose_bwd(s1, m->body_r + o, c, adj_x + o, adj_v + o, A, g->body_com + 3 * (size_t)b);
    dsu_zero3(adj_x + o);
    dsu_zero3(adj_v + o);
  }
  /* 2: recompute the vertex forces (external + contact) as the forward did */
  const int contact = m->ground != 0;
  const dsRigidContact cp = contact ? ds__rcontact_param(m, b) : (dsRigidContact){0, 0, 0, 0, 0, 0, 0, 0, 0};
  dsReal F[3] = {0, 0, 0}, T[3] = {0, 0, 0};
  for (int i = i0; i < i1; i++) {
    const size_t o = 3 * (size_t)i;
    dsReal fi[3] = {0, 0, 0}, r[3], t[3];
    if (fext) dsu_copy3(fi, fext + o);
    if (contact) {
      dsReal fc[3];
      ds__rigid_contact_fwd(x + o, v + o, &cp, fc);
      dsu_addto3(fi, fc);
    }
    dsu_sub3(r, x + o, s);
    dsu_cross3(t, r, fi);
    dsu_addto3(F, fi);
    dsu_addto3(T, t);
  }
  if (bfext) {
    dsu_addto3(F, bfext + 6 * (size_t)b);
    dsu_addto3(T, bfext + 6 * (size_t)b + 3);
  }
  /* 3: through the integrator */
  dsRigidInertia I, AI;
  inertia_of(m, b, &I);
  memset(&AI, 0, sizeof AI);
  dsReal As[13], AF[3] = {0, 0, 0}, AT[3] = {0, 0, 0};
  memset(As, 0, sizeof As);
  ds__rigid_integrate_bwd(s, F, T, &I, m->gravity, m->dt, A, As, AF, AT, &AI, ag);
  g->body_mass[b] += AI.m;
  for (int k = 0; k < 9; k++) g->body_inertia[9 * (size_t)b + k] += AI.I[k];
  for (int k = 0; k < 3; k++) {
    adj_bfext[6 * (size_t)b + k] = AF[k];
    adj_bfext[6 * (size_t)b + 3 + k] = AT[k];
  }
  /* 4: the vertex forces and their arms */
  for (int i = i0; i < i1; i++) {
    const size_t o = 3 * (size_t)i;
    dsReal fi[3] = {0, 0, 0}, r[3], t[3], ar[3];
    if (fext) dsu_copy3(fi, fext + o);
    if (contact) {
      dsReal fc[3];
      ds__rigid_contact_fwd(x + o, v + o, &cp, fc);
      dsu_addto3(fi, fc);
    }
    dsu_sub3(r, x + o, s);
    dsu_cross3(t, AT, r);
    dsu_add3(af + o, AF, t);
    dsu_cross3(ar, fi, AT);
    dsu_addto3(adj_x + o, ar);
    dsu_subfrom3(As, ar);
    dsu_zero3(av + o);
  }
  memcpy(A, As, sizeof As);
}

void ds__rigid_finish(const dsModel* m, const dsReal* bs, dsReal* adj_x, dsReal* adj_v, dsReal* adj_body,
                      dsGrad* g) {
  for (int b = 0; b < m->nbody; b++) {
    const dsReal* s = bs + 13 * (size_t)b;
    const dsReal* c = m->body_com + 3 * (size_t)b;
    dsReal* A = adj_body + 13 * (size_t)b;
    for (int i = m->body_vrange[2 * b]; i < m->body_vrange[2 * b + 1]; i++) {
      const size_t o = 3 * (size_t)i;
      ds__rigid_pose_bwd(s, m->body_r + o, c, adj_x + o, adj_v + o, A, g->body_com + 3 * (size_t)b);
      dsu_zero3(adj_x + o);
      dsu_zero3(adj_v + o);
    }
    dsReal qn[4];
    const dsReal* q0 = m->body_q0 + 4 * (size_t)b;
    dsReal n = dsu_qnormalize(qn, q0);
    dsu_qnormalize_bwd(qn, n, A + 3, g->body_q0 + 4 * (size_t)b);
    for (int k = 0; k < 3; k++) {
      g->body_x0[3 * (size_t)b + k] += A[k];
      g->body_v0[3 * (size_t)b + k] += A[7 + k];
      g->body_w0[3 * (size_t)b + k] += A[10 + k];
    }
    memset(A, 0, 13 * sizeof(dsReal));
  }
}

/* ---- mass properties ------------------------------------------------------------
 * For a closed mesh, each triangle (a, b, c) and a reference point o span a
 * signed tetrahedron of volume V = (a-o).((b-o)x(c-o))/6 whose second moment
 * about o is C = V/20 (sum_k d_k d_k^T + s s^T) with d_k the vertices minus o
 * (o itself contributes 0) and s = d_a + d_b + d_c (the covariance of the
 * canonical tetrahedron mapped affinely). Summing over triangles gives the
 * exact volume, first moment (sum V s/4) and C of the polyhedron; then
 * C_com = C - V c c^T and I = tr(C_com) Id - C_com. o is the first vertex
 * (all arithmetic in double). */
int ds_mesh_mass_properties(int nvert, const dsReal* x, int ntri, const int* tri, double* volume, double com[3],
                            double inertia[9]) {
  if (nvert < 4 || ntri < 4 || !x || !tri) return DS_ERR_MESH;
  const double o[3] = {(double)x[0], (double)x[1], (double)x[2]};
  double V = 0, S[3] = {0, 0, 0}, C[9] = {0};
  for (int t = 0; t < ntri; t++) {
    double d[3][3];
    for (int k = 0; k < 3; k++) {
      const int v = tri[3 * t + k];
      if (v < 0 || v >= nvert) return DS_ERR_MESH;
      for (int j = 0; j < 3; j++) d[k][j] = (double)x[3 * v + j] - o[j];
    }
    const double vt = (d[0][0] * (d[1][1] * d[2][2] - d[1][2] * d[2][1]) -
                       d[0][1] * (d[1][0] * d[2][2] - d[1][2] * d[2][0]) +
                       d[0][2] * (d[1][0] * d[2][1] - d[1][1] * d[2][0])) / 6.0;
    double s[3];
    for (int j = 0; j < 3; j++) s[j] = d[0][j] + d[1][j] + d[2][j];
    V += vt;
    for (int j = 0; j < 3; j++) S[j] += vt * s[j] / 4.0;
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++)
        C[3 * i + j] += vt / 20.0 * (d[0][i] * d[0][j] + d[1][i] * d[1][j] + d[2][i] * d[2][j] + s[i] * s[j]);
  }
  if (!(V > 0) || !isfinite(V)) return DS_ERR_MESH;
  double c[3];
  for (int j = 0; j < 3; j++) c[j] = S[j] / V;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) C[3 * i + j] -= V * c[i] * c[j];
  const double tr = C[0] + C[4] + C[8];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) inertia[3 * i + j] = (i == j ? tr : 0) - C[3 * i + j];
  if (volume) *volume = V;
  for (int j = 0; j < 3; j++) com[j] = c[j] + o[j];
  return 0;
}
