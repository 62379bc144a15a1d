/* The batched fluid's stages (engine/fluid_batch.c drives them): one DS_HD
 * function per stage, called for (index e, instance b) over plain arrays
 * of B instances. The host backend loops them over the pairs with OpenMP
 * (ds__host_fluid_run), the CUDA backend launches one thread per pair
 * (cuda/batch.cu): both through the device layer's table (base/backend.h,
 * run_fluid). Every pair writes only its own cells; the stages over (1, b)
 * run the per-instance serial parts (MIC(0)'s substitutions, the sums of
 * the blocks in order), so each instance gets the serial engine's bits.
 *
 * A step (count: the pairs per instance; S = nvel + 2 ncell):
 *   UMAX_BLK (nbv), UMAX (1)    max|u| of the current state (the CFL check)
 *   SOFT (S)                    stage 0: spen = soft_in / D (soft_in = cur)
 *   SL (S)                      out = SL(q, h) of every field (advection, or
 *                               MacCormack's hat and back)
 *   MC (S)                      MacCormack's clamp
 *   SRC (ncell), FORCE (nvel)   steps 2-4
 *   MASK (nvel), RHS (ncell)    the projection's masked u and b' (pi = 0)
 *   MAX_B (nb), INIT (1)        max|b'|, the solve's scalars
 *   MIC_L (1), MIC_U (1)        z = (L L^T)^-1 r (serial per instance)
 *   COPY_S (ncell), DOT_ZR (nb), SIGMA (1)
 *   iteration: MATVEC (ncell), DOT_SAS (nb), ALPHA (1), UPD_XR (ncell),
 *              MAX_R (nb), CHECK (1), MIC_L, MIC_U, DOT_ZR (nb), BETA (1),
 *              UPD_S (ncell)   (an instance that converged or failed skips)
 *   GRAD (nvel)                 u' = u - G pi
 *   BAD_BLK (nbs), BAD (1)      the first non-finite entry of the new state
 * The backward of a step (ds_fluid_batch_backward), from g1 = the adjoint
 * of the state after it: the projection's stages on g1 (P is
 * self-adjoint), then per instance, serially as the serial engine's
 * scatters run: BWD_SRC (1) steps 4-2's adjoint and the parameters'
 * sums; SOFT and SL (MacCormack's hat and back) recompute the forward's
 * intermediates in parallel; BWD_ADV (1) the advection's and stage 0's
 * adjoints into g0. A loss term on an earlier state's density
 * (ds_fluid_batch_backward_terms, _window): ADD_TERM (ncell) adds `term`
 * to the densities of pu (= g1), once per term, in the serial add_terms'
 * order.
 * Blocks are the serial engine's FL_BLK blocks: a dot product is the
 * blocks' partial sums added in order, as fl_dot does. */
#ifndef DSIM_ENGINE_FLUID_BATCH_BODY_H
#define DSIM_ENGINE_FLUID_BATCH_BODY_H

#include <stddef.h>

#include "engine/fluid_body.h"

#define DSF_BS_STAGES(X)                                                                                      \
  X(DSF_UMAX_BLK) X(DSF_UMAX) X(DSF_SOFT) X(DSF_SL) X(DSF_MC) X(DSF_SRC) X(DSF_FORCE) X(DSF_MASK) X(DSF_RHS) \
  X(DSF_MAX_B) X(DSF_MAX_R) X(DSF_INIT) X(DSF_MIC_L) X(DSF_MIC_U) X(DSF_COPY_S) X(DSF_DOT_ZR) X(DSF_SIGMA) X(DSF_MATVEC)  \
  X(DSF_DOT_SAS) X(DSF_ALPHA) X(DSF_UPD_XR) X(DSF_CHECK) X(DSF_BETA) X(DSF_UPD_S) X(DSF_GRAD)              \
  X(DSF_BAD_BLK) X(DSF_BAD) X(DSF_BWD_SRC) X(DSF_BWD_ADV) X(DSF_ADD_TERM)
/* The stage dispatch is inlined into each stage's loop (the host backend's
 * and the CUDA kernels'), where the constant stage folds its switch away. */
#if defined(__CUDACC__)
#define DSF_INLINE static __forceinline__
#elif defined(__GNUC__)
#define DSF_INLINE static inline __attribute__((always_inline))
#else
#define DSF_INLINE static inline
#endif

#define DSF_BS_ENUM(S) S,
enum { DSF_BS_STAGES(DSF_BS_ENUM) DSF_BS_COUNT };
#undef DSF_BS_ENUM

/* per-instance scalars (sc + b DSF_NSC) */
enum {
  DSF_SIGMA_V, DSF_ALPHA_V, DSF_BETA_V, DSF_BMAX, DSF_TOL, DSF_RESID, DSF_ITERS, DSF_STATE, DSF_UMAX_V, DSF_BADI, DSF_NSC
};
/* DSF_STATE: the solve runs, met the tolerance, or failed (NaN) */
enum { DSF_RUN = 0, DSF_DONE = 1, DSF_NAN = 2 };

/* The arrays of a batch, all in backend memory: per-instance ones at
 * b times their stride (S, ncell, nbk, DSF_NSC, nparam). */
typedef struct dsFluidBatchArgs {
  dsFluidView v;          /* shared arrays; v.par unused (par below) */
  int B, S, nb, nbs, nbv; /* blocks of ncell, of S, of nvel */
  int nbk;                /* max(nb, nbs, nbv): blk's stride */
  const double* par;      /* B x nparam */
  const double* force;    /* B x ncell x dim, or NULL */
  double *cur, *nxt;      /* B x S */
  double *spen, *hat, *back; /* B x S */
  double *pi, *r, *z, *s, *as; /* B x ncell */
  double* blk;            /* B x nbk */
  double* sc;             /* B x DSF_NSC */
  double* pu;             /* B x S: what MASK, RHS and GRAD project (nxt, or the adjoint g1) */
  /* the backward: g0 (B x S) the adjoint of the state before the step,
   * ghat, gback (B x S) scratch, gf (B x ncell x dim) the force field's,
   * gpar (B x nparam) the parameters' (summed over the steps); bs0 the
   * state the advection read (after stage 0), bs1 the state after the
   * step (both B x S) */
  double *g0, *ghat, *gback, *gf, *gpar;
  const double *bs0, *bs1;
  const double* soft_in; /* B x S: what SOFT damps into spen (cur, or a taped state) */
  const double* term;    /* B x ncell: what ADD_TERM adds to pu's densities */
  /* SL: out = SL(q, h) with the velocities of u (all B x S) */
  const double *sl_q, *sl_u;
  double* sl_out;
  double sl_h;
  int it; /* CHECK: the iteration */
} dsFluidBatchArgs;

/* the pairs per instance of a stage */
DS_HD DS_INLINE int dsf_bstage_count(const dsFluidBatchArgs* a, int stage) {
  const dsFluidView* v = &a->v;
  switch (stage) {
    case DSF_UMAX_BLK: return a->nbv;
    case DSF_SOFT: case DSF_SL: case DSF_MC: return a->S;
    case DSF_SRC: case DSF_RHS: case DSF_COPY_S: case DSF_MATVEC: case DSF_UPD_XR: case DSF_UPD_S:
    case DSF_ADD_TERM: return v->ncell;
    case DSF_FORCE: case DSF_MASK: case DSF_GRAD: return v->nvel;
    case DSF_MAX_B: case DSF_MAX_R: case DSF_DOT_ZR: case DSF_DOT_SAS: return a->nb;
    case DSF_BAD_BLK: return a->nbs;
    default: return 1;
  }
}

/* state entry i: its grid (face grid a or the cells, 3), its index p there
 * and the offset of its field in the state */
DS_HD DS_INLINE int dsf_field(const dsFluidView* v, int i, int* p, int* base) {
  if (i < v->nvel) {
    const int a = fl_face_axis(v, i);
    *base = v->foff[a], *p = i - v->foff[a];
    return a;
  }
  const int k = (i - v->nvel) / v->ncell;
  *base = v->nvel + k * v->ncell, *p = i - *base;
  return 3;
}

DS_HD DS_INLINE void dsf_sl(const dsFluidBatchArgs* a, int i, int b) {
  const size_t o = (size_t)b * a->S;
  int p, base, ijk[3];
  const int gi = dsf_field(&a->v, i, &p, &base);
  fl_ijk(fl_grid(&a->v, gi), p, ijk);
  a->sl_out[o + i] = fl_sl_point(&a->v, gi, a->sl_q + o + base, a->sl_u + o, a->sl_h, ijk);
}

/* MacCormack: nxt = clamp(hat + (q - back) / 2), q = sl_q, u = sl_u */
DS_HD DS_INLINE void dsf_mc(const dsFluidBatchArgs* a, int i, int b) {
  const size_t o = (size_t)b * a->S;
  int p, base, br;
  const int gi = dsf_field(&a->v, i, &p, &base);
  a->nxt[o + i] = fl_mc_value(&a->v, gi, a->sl_q + o + base, a->sl_u + o, a->hat + o + base, a->back + o + base, p,
                              &br);
}

DS_HD DS_INLINE void dsf_force(const dsFluidBatchArgs* a, int i, int b) {
  dsFluidView v = a->v;
  v.par = a->par + (size_t)b * v.nparam;
  double* u = a->nxt + (size_t)b * a->S;
  const int ax = fl_face_axis(&v, i);
  const double* F = a->force ? a->force + (size_t)b * v.ncell * v.dim : NULL;
  fl_force_face(&v, ax, i - v.foff[ax], F, u + v.foff[ax], u + v.nvel, u + v.nvel + v.ncell);
}

/* the largest of instance b's blocks (blocks of max-abs values) */
DS_HD DS_INLINE double dsf_blocks_max(const dsFluidBatchArgs* a, int b) {
  const double* blk = a->blk + (size_t)b * a->nbk;
  double mx = 0;
  for (int k = 0; k < a->nb; k++)
    if (blk[k] > mx) mx = blk[k];
  return mx;
}

/* the solve's scalars after b' is in r: max|b'| over the blocks */
DS_HD DS_INLINE void dsf_init(const dsFluidBatchArgs* a, int b) {
  double* sc = a->sc + (size_t)b * DSF_NSC;
  const double bmax = dsf_blocks_max(a, b);
  sc[DSF_BMAX] = bmax, sc[DSF_TOL] = a->v.tolerance * bmax;
  sc[DSF_ITERS] = 0, sc[DSF_RESID] = 0;
  sc[DSF_STATE] = bmax == 0 ? DSF_DONE : DSF_RUN;
}

/* the sum of instance b's blocks in order */
DS_HD DS_INLINE double dsf_blocks(const dsFluidBatchArgs* a, int b) {
  const double* blk = a->blk + (size_t)b * a->nbk;
  double s = 0;
  for (int k = 0; k < a->nb; k++) s += blk[k];
  return s;
}

/* fl_pcg's test after an update: rmax over the blocks of MAX_R */
DS_HD DS_INLINE void dsf_check(const dsFluidBatchArgs* a, int b) {
  double* sc = a->sc + (size_t)b * DSF_NSC;
  const double rmax = dsf_blocks_max(a, b);
  sc[DSF_ITERS] = a->it;
  sc[DSF_RESID] = rmax / sc[DSF_BMAX];
  if (rmax <= sc[DSF_TOL])
    sc[DSF_STATE] = DSF_DONE;
  else if (!(rmax == rmax))
    sc[DSF_STATE] = DSF_NAN;
}

DS_HD DS_INLINE void dsf_mic(const dsFluidBatchArgs* a, int b, int upper) {
  const size_t o = (size_t)b * a->v.ncell;
  if (upper)
    for (int c = a->v.ncell - 1; c >= 0; c--) fl_mic_upper(&a->v, c, a->as + o, a->z + o);
  else
    for (int c = 0; c < a->v.ncell; c++) fl_mic_lower(&a->v, c, a->r + o, a->as + o);
}

/* the first non-finite entry of block k of instance b's new state, or -1 */
DS_HD DS_INLINE double dsf_bad_blk(const dsFluidBatchArgs* a, int k, int b) {
  const double* x = a->nxt + (size_t)b * a->S;
  const int e = (k + 1) * FL_BLK < a->S ? (k + 1) * FL_BLK : a->S;
  for (int i = k * FL_BLK; i < e; i++)
    if (!isfinite(x[i])) return i;
  return -1;
}

/* instance b's advection and stage 0 adjoints: g0 from g1 (pu) */
DS_HD DS_INLINE void dsf_bwd_adv(const dsFluidBatchArgs* a, int b) {
  dsFluidView w = a->v;
  w.par = a->par + (size_t)b * w.nparam;
  const size_t oS = (size_t)b * a->S;
  double* g0 = a->g0 + oS;
  const double* s = a->bs0 + oS;
  for (int i = 0; i < a->S; i++) g0[i] = 0;
  for (int k = 0; k < w.dim + 2; k++) {
    const size_t base = (size_t)(k < w.dim ? w.foff[k] : w.nvel + (k - w.dim) * w.ncell);
    fl_advect_bwd_field(&w, k, s, a->pu + oS, g0, a->hat + oS + base, a->back + oS + base, a->ghat + oS,
                        a->gback + oS);
  }
  if (w.nsoft) fl_soft_bwd_all(&w, s, g0, a->gpar + (size_t)b * w.nparam);
}

DS_HD DSF_INLINE void dsf_bstage_run(int stage, const dsFluidBatchArgs* a, int e, int b) {
  const dsFluidView* v = &a->v;
  const int nc = v->ncell;
  const size_t oS = (size_t)b * a->S, oc = (size_t)b * nc;
  double* sc = a->sc + (size_t)b * DSF_NSC;
  double* blk = a->blk + (size_t)b * a->nbk;
  const int running = sc[DSF_STATE] == DSF_RUN;
  switch (stage) {
    case DSF_UMAX_BLK: {
      const int e1 = (e + 1) * FL_BLK < v->nvel ? (e + 1) * FL_BLK : v->nvel;
      blk[e] = fl_maxabs_range(a->cur + oS, e * FL_BLK, e1);
    } break;
    case DSF_UMAX: {
      double m = 0;
      for (int k = 0; k < a->nbv; k++) m = blk[k] > m ? blk[k] : m;
      sc[DSF_UMAX_V] = m;
    } break;
    case DSF_SOFT: {
      dsFluidView w = *v;
      w.par = a->par + (size_t)b * v->nparam;
      a->spen[oS + e] = fl_soft_point(&w, a->soft_in + oS, e);
    } break;
    case DSF_SL: dsf_sl(a, e, b); break;
    case DSF_MC: dsf_mc(a, e, b); break;
    case DSF_SRC: {
      dsFluidView w = *v;
      w.par = a->par + (size_t)b * v->nparam;
      fl_source_cell(&w, e, a->nxt + oS + v->nvel, a->nxt + oS + v->nvel + nc);
    } break;
    case DSF_FORCE: dsf_force(a, e, b); break;
    case DSF_MASK:
      if (!v->active[e]) a->pu[oS + e] = 0;
      break;
    case DSF_RHS:
      a->r[oc + e] = fl_rhs_cell(v, e, a->pu + oS);
      a->pi[oc + e] = 0;
      break;
    case DSF_MAX_B: {
      const int e1 = (e + 1) * FL_BLK < nc ? (e + 1) * FL_BLK : nc;
      blk[e] = fl_maxabs_range(a->r + oc, e * FL_BLK, e1);
    } break;
    case DSF_MAX_R: {
      const int e1 = (e + 1) * FL_BLK < nc ? (e + 1) * FL_BLK : nc;
      if (running) blk[e] = fl_maxabs_range(a->r + oc, e * FL_BLK, e1);
    } break;
    case DSF_INIT: dsf_init(a, b); break;
    case DSF_MIC_L:
    case DSF_MIC_U:
      if (running) dsf_mic(a, b, stage == DSF_MIC_U);
      break;
    case DSF_COPY_S:
      if (running) a->s[oc + e] = a->z[oc + e];
      break;
    case DSF_DOT_ZR:
      if (running) blk[e] = fl_dot_block(a->z + oc, a->r + oc, nc, e);
      break;
    case DSF_SIGMA:
      if (running) sc[DSF_SIGMA_V] = dsf_blocks(a, b);
      break;
    case DSF_MATVEC:
      if (running) a->as[oc + e] = fl_matvec_cell(v, e, a->s + oc);
      break;
    case DSF_DOT_SAS:
      if (running) blk[e] = fl_dot_block(a->s + oc, a->as + oc, nc, e);
      break;
    case DSF_ALPHA:
      if (running) {
        const double sas = dsf_blocks(a, b);
        sc[DSF_ALPHA_V] = sas != 0 ? sc[DSF_SIGMA_V] / sas : 0;
      }
      break;
    case DSF_UPD_XR:
      if (running) fl_pcg_xr(e, sc[DSF_ALPHA_V], a->s + oc, a->as + oc, a->pi + oc, a->r + oc);
      break;
    case DSF_CHECK:
      if (running) dsf_check(a, b);
      break;
    case DSF_BETA:
      if (running) {
        const double sn = dsf_blocks(a, b), sigma = sc[DSF_SIGMA_V];
        sc[DSF_BETA_V] = sigma != 0 ? sn / sigma : 0;
        sc[DSF_SIGMA_V] = sn;
      }
      break;
    case DSF_UPD_S:
      if (running) fl_pcg_s(e, sc[DSF_BETA_V], a->z + oc, a->s + oc);
      break;
    case DSF_GRAD: {
      const int ax = fl_face_axis(v, e);
      fl_grad_face(v, ax, e - v->foff[ax], a->pi + oc, a->pu + oS + v->foff[ax]);
    } break;
    case DSF_BAD_BLK: blk[e] = dsf_bad_blk(a, e, b); break;
    case DSF_BAD: {
      double first = -1;
      for (int k = 0; k < a->nbs && first < 0; k++) first = blk[k];
      sc[DSF_BADI] = first;
    } break;
    case DSF_BWD_SRC: {
      dsFluidView w = *v;
      w.par = a->par + (size_t)b * v->nparam;
      fl_bwd_sources(&w, a->bs1 + oS, a->pu + oS, a->gf + (size_t)b * nc * v->dim, a->gpar + (size_t)b * v->nparam);
    } break;
    case DSF_BWD_ADV: dsf_bwd_adv(a, b); break;
    case DSF_ADD_TERM: a->pu[oS + v->nvel + e] += a->term[oc + e]; break;
    default: break;
  }
}

#endif
