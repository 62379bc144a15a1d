/* An articulation's substep as the particle engine and the batched engine
 * run it, for either backend (DS_HD: C for the CPU engine, CUDA C++ for
 * cuda/): the scratch of one instance, the vertices posed by the links and
 * their adjoint (the math is engine/artic_model.c's comment on top), and
 * the four operations of engine/artic_model.h on explicit arrays (substep,
 * its pop, the initial state's gradient, the posing of a state) over
 * engine/artic_step.h's kernels. Everything is reached through the model
 * view (dsModel, its articulation m->artic) and the scratch, so a device
 * copy of both runs this code unchanged. Include once, after config.h. */
#ifndef DSIM_ENGINE_ARTIC_MODEL_BODY_H
#define DSIM_ENGINE_ARTIC_MODEL_BODY_H

#include <string.h>

#include "base/hd.h"
#include "dsim/engine.h"
#include "engine/artic_model.h"
#include "engine/artic_step.h"

/* Per-instance scratch: the step's dsArticData (no tape) and the arrays
 * below, one block (buf). */
struct dsArticScratch {
  dsArticData* ad;
  double *s, *u, *so;          /* state (q, qd), actions, next state */
  double *R, *x, *V;           /* link poses */
  double *aR, *ax, *aV;        /* their adjoints */
  double *aout, *ain, *gu, *gth;
  double* buf;
};

/* ---- posing the vertices ------------------------------------------------------------------ */

/* ---- posing the vertices ------------------------------------------------------------------ */

DS_HD static void load_state(const dsModel* m, dsArticScratch* sc, const dsReal* s) {
  for (int k = 0; k < m->artic_nq + m->artic_nv; k++) sc->s[k] = s[k];
}

/* r'_k = r_k + s_k ac of vertex i (link frame) */
DS_HD static void vertex_local(const dsModel* m, int i, double rl[3]) {
  const int l = m->artic_link[i];
  const double* ac = m->artic->param + m->artic->bp[l].anchor_c;
  for (int c = 0; c < 3; c++) rl[c] = m->artic_r[3 * (size_t)i + c] + m->artic_s[i] * ac[c];
}

/* the vertices at state sc->s into x, v (world, y up) */
DS_HD static void pose_vertices(const dsModel* m, dsArticScratch* sc, dsReal* x, dsReal* v) {
  artic_pose(m->artic, sc->ad, sc->s, sc->s + m->artic_nq, sc->R, sc->x, sc->V);
  for (int i = 0; i < m->nparticle; i++) {
    const int l = m->artic_link[i];
    const double *R = sc->R + 9 * l, *c = sc->x + 3 * l, *V = sc->V + 6 * l;
    double rl[3], p[3], u[3];
    vertex_local(m, i, rl);
    for (int r = 0; r < 3; r++) p[r] = c[r] + R[3 * r] * rl[0] + R[3 * r + 1] * rl[1] + R[3 * r + 2] * rl[2];
    u[0] = V[3] + V[1] * p[2] - V[2] * p[1];
    u[1] = V[4] + V[2] * p[0] - V[0] * p[2];
    u[2] = V[5] + V[0] * p[1] - V[1] * p[0];
    dsReal* X = x + 3 * (size_t)i;
    dsReal* U = v + 3 * (size_t)i;
    X[0] = p[0], X[1] = p[2], X[2] = -p[1];
    U[0] = u[0], U[1] = u[2], U[2] = -u[1];
  }
}

/* adj_x, adj_v (vertices at state sc->s) into adj_artic and the
 * parameters' gradient (sc->gth), then cleared */
DS_HD static void pose_vertices_bwd(const dsModel* m, dsArticScratch* sc, dsReal* adj_x, dsReal* adj_v,
                                    dsReal* adj_artic) {
  const dsArticModel* am = m->artic;
  const int nb = am->nbody;
  artic_pose(am, sc->ad, sc->s, sc->s + m->artic_nq, sc->R, sc->x, sc->V);
  memset(sc->aR, 0, 18 * (size_t)nb * sizeof(double)); /* aR, ax, aV */
  int any = 0;
  for (int i = 0; i < m->nparticle; i++) {
    dsReal* AX = adj_x + 3 * (size_t)i;
    dsReal* AU = adj_v + 3 * (size_t)i;
    const double A[3] = {AX[0], -AX[2], AX[1]}, B[3] = {AU[0], -AU[2], AU[1]};
    AX[0] = AX[1] = AX[2] = AU[0] = AU[1] = AU[2] = 0;
    if (A[0] == 0 && A[1] == 0 && A[2] == 0 && B[0] == 0 && B[1] == 0 && B[2] == 0) continue;
    any = 1;
    const int l = m->artic_link[i];
    const double *R = sc->R + 9 * l, *c = sc->x + 3 * l, *V = sc->V + 6 * l;
    double rl[3], p[3], dp[3];
    vertex_local(m, i, rl);
    for (int r = 0; r < 3; r++) p[r] = c[r] + R[3 * r] * rl[0] + R[3 * r + 1] * rl[1] + R[3 * r + 2] * rl[2];
    double* aV = sc->aV + 6 * l;
    aV[0] += p[1] * B[2] - p[2] * B[1];
    aV[1] += p[2] * B[0] - p[0] * B[2];
    aV[2] += p[0] * B[1] - p[1] * B[0];
    for (int k = 0; k < 3; k++) aV[3 + k] += B[k];
    dp[0] = A[0] + B[1] * V[2] - B[2] * V[1];
    dp[1] = A[1] + B[2] * V[0] - B[0] * V[2];
    dp[2] = A[2] + B[0] * V[1] - B[1] * V[0];
    double* aR = sc->aR + 9 * l;
    for (int r = 0; r < 3; r++) {
      sc->ax[3 * l + r] += dp[r];
      for (int k = 0; k < 3; k++) aR[3 * r + k] += dp[r] * rl[k];
    }
    const double w = m->artic_s[i];
    if (w != 0)
      for (int k = 0; k < 3; k++)
        sc->gth[am->bp[l].anchor_c + k] += w * (R[k] * dp[0] + R[3 + k] * dp[1] + R[6 + k] * dp[2]);
  }
  if (!any) return;
  double* gq = sc->ain; /* scratch: the poses' adjoint of (q, qd) */
  memset(gq, 0, (size_t)(m->artic_nq + m->artic_nv) * sizeof(double));
  artic_pose_vjp(am, sc->ad, sc->s, sc->s + m->artic_nq, sc->aR, sc->ax, sc->aV, gq, gq + m->artic_nq, sc->gth);
  for (int k = 0; k < m->artic_nq + m->artic_nv; k++) adj_artic[k] += gq[k];
}

/* ---- step and adjoint ------------------------------------------------------------------------ */

DS_HD static int artic_substep_model(const dsModel* m, dsArticScratch* sc, const dsReal* s, const dsReal* u,
                                     dsReal* so, dsReal* x, dsReal* v) {
  const int nq = m->artic_nq, ns = nq + m->artic_nv;
  load_state(m, sc, s);
  for (int a = 0; a < m->artic_nu; a++) sc->u[a] = u ? u[a] : 0;
  int rc = artic_substep(m->artic, sc->ad, sc->s, sc->s + nq, sc->u, sc->so, sc->so + nq);
  if (rc) return rc;
  for (int k = 0; k < ns; k++) so[k] = (dsReal)sc->so[k];
  if (x) {
    memcpy(sc->s, sc->so, (size_t)ns * sizeof(double));
    pose_vertices(m, sc, x, v);
  }
  return 0;
}

DS_HD static int artic_bwd_at(const dsModel* m, dsArticScratch* sc, dsReal* adj_x, dsReal* adj_v, dsReal* adj_artic,
                              dsReal* adj_act, dsReal* gparam, const dsReal* s, const dsReal* s1, const dsReal* u) {
  const dsArticModel* am = m->artic;
  const int nq = m->artic_nq, ns = nq + m->artic_nv;
  memset(sc->gth, 0, (size_t)am->nparam * sizeof(double));
  load_state(m, sc, s1);
  pose_vertices_bwd(m, sc, adj_x, adj_v, adj_artic);
  load_state(m, sc, s);
  for (int a = 0; a < m->artic_nu; a++) sc->u[a] = u ? u[a] : 0;
  for (int k = 0; k < ns; k++) sc->aout[k] = adj_artic[k];
  int rc = artic_substep_vjp(am, sc->ad, sc->s, sc->s + nq, sc->u, sc->aout, sc->ain, sc->gu, sc->gth);
  if (rc) return rc;
  for (int k = 0; k < ns; k++) adj_artic[k] = (dsReal)sc->ain[k];
  for (int a = 0; a < m->artic_nu; a++) adj_act[a] = (dsReal)sc->gu[a];
  for (int p = 0; p < am->nparam; p++) gparam[p] += (dsReal)sc->gth[p];
  return 0;
}

DS_HD static void artic_finish_at(const dsModel* m, dsArticScratch* sc, dsReal* adj_x, dsReal* adj_v,
                                  dsReal* adj_artic, dsGrad* g, const dsReal* s0) {
  memset(sc->gth, 0, (size_t)m->artic_nparam * sizeof(double));
  load_state(m, sc, s0);
  pose_vertices_bwd(m, sc, adj_x, adj_v, adj_artic);
  for (int p = 0; p < m->artic_nparam; p++) g->artic_param[p] += (dsReal)sc->gth[p];
  for (int k = 0; k < m->artic_nq; k++) g->artic_q0[k] += adj_artic[k];
  for (int k = 0; k < m->artic_nv; k++) g->artic_qd0[k] += adj_artic[m->artic_nq + k];
  memset(adj_artic, 0, (size_t)(m->artic_nq + m->artic_nv) * sizeof(dsReal));
}

DS_HD static void artic_pose_state(const dsModel* m, dsArticScratch* sc, const dsReal* s, dsReal* x, dsReal* v) {
  load_state(m, sc, s);
  pose_vertices(m, sc, x, v);
}

#endif
