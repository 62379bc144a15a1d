/* The soft rasterizer and the single-scale image losses for a batch of B
 * instances of one mesh topology, as single-source stages: one DS_HD
 * function per stage, called for (index e, instance b) with plain arrays.
 * The host backend runs them in OpenMP loops over (b, e)
 * (ds__host_raster_run, render/raster_batch.c), the CUDA backend launches
 * them from kernels, one thread per pair (cuda/batch.cu): both through the
 * device layer's table (base/backend.h, run_raster). The driver,
 * render/raster_batch.c, orders them. This header is what a backend needs
 * of the renderer.
 *
 * The math is render/raster_kernel.h's and render/loss_kernel.h's, the
 * bodies ds_raster_render / ds_raster_backward / ds_image_loss_eval call, in
 * the same order per pixel, face and vertex, so an instance gives the bits
 * of the single renderer on its own positions (tests/test_batch_render.c):
 *   PROJECT   (vertex)  NDC position and depth
 *   FACES     (face)    face setup, light, bounding box, tile range
 *   BIN_COUNT (tile)    faces (not big) whose tile range holds the tile
 *   BIN_SCAN  (1)       per instance: bin offsets; the big faces' list
 *   BIN_FILL  (tile)    the tile's faces, ascending
 *   ROW       (row of a tile) its pixels' states over the tile's faces,
 *                       ascending, then the big faces, ascending, each over
 *                       its columns on the row (the single renderer's tile
 *                       loop, one row at a time: each pixel sees its faces
 *                       in the same order), normalised
 *   DOWN      (output pixel) the k x k mean: the image
 *   LOSS_SUM  (1)       per instance: the loss, summed in pixel order
 *   LOSS_GRAD (value)   dL/d(image), times the instance's weight
 *   FACE_BWD  (face)    the face's adjoint over its pixels, then to world
 *   GATHER    (vertex)  the vertex's faces' gradients, in face order
 *   LIGHT_SUM (1)       per instance: the faces' light adjoints, in face order
 * No stage sums across threads. */
#ifndef DSIM_RENDER_RASTER_STAGES_H
#define DSIM_RENDER_RASTER_STAGES_H

#include "render/loss_kernel.h"
#include "render/raster_kernel.h"

/* The stages, in one list: the enum and the CUDA launcher's cases come
 * from it, so a new stage cannot miss its kernel. */
#define DSR_BS_STAGES(X) \
  X(DSR_BS_PROJECT)      \
  X(DSR_BS_FACES)        \
  X(DSR_BS_BIN_COUNT)    \
  X(DSR_BS_BIN_SCAN)     \
  X(DSR_BS_BIN_FILL)     \
  X(DSR_BS_ROW)          \
  X(DSR_BS_DOWN)         \
  X(DSR_BS_LOSS_SUM)     \
  X(DSR_BS_LOSS_GRAD)    \
  X(DSR_BS_FACE_BWD)     \
  X(DSR_BS_GATHER)       \
  X(DSR_BS_LIGHT_SUM)    \
  X(DSR_BS_IMG)

enum {
#define DSR_BS_ENUM(S) S,
  DSR_BS_STAGES(DSR_BS_ENUM)
#undef DSR_BS_ENUM
  DSR_BS_COUNT
};

/* Multi-scale and D-SSIM losses: image operations on each instance's
 * workspace (offsets in doubles into its block of ws), the steps of
 * ds_image_loss_eval one at a time (render/raster_batch.c orders them). */
enum {
  DSR_IO_IN,       /* value i: a[i] = image, b[i] = goal */
  DSR_IO_FILT,     /* pixel of w x h: c = F a along axis (kernel: 0 binomial, 1 Gaussian) */
  DSR_IO_FILT_T,   /* pixel of w x h: c += F^T a */
  DSR_IO_DECIM,    /* pixel of W x H: c (W x H) = every other pixel of a (w x h) */
  DSR_IO_SCATTER,  /* pixel of W x H: c (w x h, zeroed) at every other pixel = a (W x H) */
  DSR_IO_ZERO,     /* value i: c[i] = 0 */
  DSR_IO_MUL,      /* value i: c[i] = a[i] b[i] */
  DSR_IO_LVL_GRAD, /* value i of a level: c[i] += wgt d(MSE or L1)/d a[i] */
  DSR_IO_LVL_SUM,  /* instance: level `slot`'s MSE or L1 of a against b, summed in order */
  DSR_IO_SSIM,     /* value i: s into e, the SSIM maps at c (mx, my, sxx, syy, sxy) -> partials */
  DSR_IO_SSIM_SUM, /* instance: level `slot`'s D-SSIM from e, summed in order */
  DSR_IO_COMBINE,  /* value i: c[i] += 2 a[i] d[i] + b[i] e[i] */
  DSR_IO_TOTAL,    /* instance: the weighted levels in order, then the moments term: the loss */
  DSR_IO_OUT       /* value i: dL/d(image) = the pyramid's level-0 gradient (+ moments), times the weight */
};

typedef struct dsrImgOp {
  int op, count;        /* indices per instance */
  int w, h, W, H;       /* the level's size; DECIM, SCATTER: the coarse level's */
  int kern, R, axis;    /* FILT, FILT_T */
  double inv_full;      /* 1/(the filter's full-window norm) */
  size_t a, b, c, d, e; /* workspace offsets */
  int slot;             /* LVL_SUM, SSIM_SUM: the level */
  double wgt;           /* LVL_GRAD, SSIM: the level's weight */
  size_t lvl, pg, st;   /* TOTAL, OUT: level values, level-0 gradient, moments state */
} dsrImgOp;

/* Per-instance blocks: instance b's block of an array of n per instance
 * starts at b n. */
typedef struct dsrBatchArgs {
  dsrView v;
  int B, nvert, nface, vertex_color, bin_cap;
  /* shared */
  const int* faces;      /* 3 nface */
  const dsReal* colors;  /* 3 nface (flat) or 3 nvert (per vertex) */
  const int* vinc_start; /* nvert + 1 offsets into vinc */
  const int* vinc;       /* per vertex: the face corners 3 j + i that use it, ascending */
  /* per instance */
  const dsReal* verts;   /* B x 3 nvert */
  double* vproj;         /* B x 3 nvert */
  dsrFace* face;         /* B x nface */
  int* ftile;            /* B x 4 nface */
  int* bin_start;        /* B x (ntiles + 1) */
  int* bins;             /* B x bin_cap */
  int* big;              /* B x (nface + 1): the count, then the faces */
  double* pix;           /* B x 6 Wi Hi */
  dsReal* image;         /* B x 4 W H */
  /* losses */
  dsrLossConst lc;
  const dsReal* goal;    /* instance b's goal at goal + b goal_stride (0: one goal) */
  size_t goal_stride;
  const dsReal* weight;  /* B, NULL: 1 */
  dsReal* loss;          /* B */
  double* lstat;         /* B x DSR_LSTAT */
  /* backward */
  dsReal* dimage;        /* B x 4 W H: dL/d(image) */
  double* fgrad;         /* B x 9 nface */
  double* fcgrad;        /* B x 9 nface */
  double* flight;        /* B x DSR_NLIGHT nface: the faces' light adjoints */
  double* lsum;          /* B x DSR_NLIGHT: their sums */
  dsReal* dverts;        /* B x 3 nvert, += the gradient */
  /* multi-scale and D-SSIM losses */
  double* ws;            /* B x wsz */
  size_t wsz;
  dsrImgOp io;           /* the operation a DSR_BS_IMG launch runs */
} dsrBatchArgs;

/* Indices a stage runs over, per instance (host code: counts only). */
DS_HD DSR_INLINE int dsr_bstage_count(const dsrBatchArgs* a, int stage) {
  switch (stage) {
    case DSR_BS_PROJECT: case DSR_BS_GATHER: return a->nvert;
    case DSR_BS_FACES: case DSR_BS_FACE_BWD: return a->nface;
    case DSR_BS_BIN_COUNT: case DSR_BS_BIN_FILL: return a->v.ntiles;
    case DSR_BS_ROW: return a->v.Hi * a->v.ntx;
    case DSR_BS_DOWN: return a->v.W * a->v.H;
    case DSR_BS_LOSS_GRAD: return 4 * a->v.W * a->v.H;
    case DSR_BS_IMG: return a->io.count;
    default: return 1;
  }
}

#define DSR_B(a, b, n) ((size_t)(b) * (size_t)(n))

/* Whether face j's tile range holds tile (tx, ty). */
DS_HD DSR_INLINE int dsr_ft_holds(const int* ft, int tx, int ty) {
  return tx >= ft[0] && tx <= ft[1] && ty >= ft[2] && ty <= ft[3];
}

DS_HD DSR_INLINE void dsr_bs_bin(const dsrBatchArgs* a, int t, int b, int fill) {
  const int* ft = a->ftile + DSR_B(a, b, 4 * a->nface);
  int* bs = a->bin_start + DSR_B(a, b, a->v.ntiles + 1);
  int* bins = a->bins + DSR_B(a, b, a->bin_cap);
  const int tx = t % a->v.ntx, ty = t / a->v.ntx;
  int n = fill ? bs[t] : 0;
  for (int j = 0; j < a->nface; j++) {
    const int* f = ft + 4 * j;
    if (!dsr_ft_valid(f) || dsr_ft_big(f) || !dsr_ft_holds(f, tx, ty)) continue;
    if (fill) bins[n] = j;
    n++;
  }
  if (!fill) bs[t + 1] = n;
}

DS_HD DSR_INLINE void dsr_bs_scan(const dsrBatchArgs* a, int b) {
  const int* ft = a->ftile + DSR_B(a, b, 4 * a->nface);
  int* bs = a->bin_start + DSR_B(a, b, a->v.ntiles + 1);
  int* big = a->big + DSR_B(a, b, a->nface + 1);
  bs[0] = 0;
  for (int t = 0; t < a->v.ntiles; t++) bs[t + 1] += bs[t];
  int nbig = 0;
  for (int j = 0; j < a->nface; j++)
    if (dsr_ft_valid(ft + 4 * j) && dsr_ft_big(ft + 4 * j)) big[1 + nbig++] = j;
  big[0] = nbig;
}

/* Face f on row `row` of the tile spanning columns x0 .. x1: raster.c's
 * raster_face_rect on that row (the face's box intersected with the tile). */
DS_HD DSR_INLINE void dsr_bs_face_row(const dsrBatchArgs* a, const dsrFace* f, int row, int x0, int x1,
                                      double* prow) {
  if (row < f->y0 || row > f->y1) return;
  const int a0 = f->x0 > x0 ? f->x0 : x0, a1 = f->x1 < x1 ? f->x1 : x1;
  if (a0 <= a1) dsr_face_row(&a->v, f, row, a0, a1, prow);
}

/* One row of one tile (index e = row ntx + tile column): its pixels'
 * states over the tile's faces, ascending, then the big faces, ascending
 * (each pixel sees its faces in the single renderer's order), normalised. */
DS_HD DSR_INLINE void dsr_bs_row(const dsrBatchArgs* a, int e, int b) {
  const dsrView* vw = &a->v;
  const int row = e / vw->ntx, tx = e % vw->ntx;
  const int t = (row / vw->tile) * vw->ntx + tx;
  const int x0 = tx * vw->tile, x1 = x0 + vw->tile - 1 < vw->Wi - 1 ? x0 + vw->tile - 1 : vw->Wi - 1;
  const dsrFace* faces = a->face + DSR_B(a, b, a->nface);
  const int* bs = a->bin_start + DSR_B(a, b, vw->ntiles + 1);
  const int* bins = a->bins + DSR_B(a, b, a->bin_cap);
  const int* big = a->big + DSR_B(a, b, a->nface + 1);
  double* prow = a->pix + DSR_B(a, b, 6 * (size_t)vw->Wi * vw->Hi) + 6 * (size_t)row * vw->Wi;
  for (int col = x0; col <= x1; col++) dsr_pixel_init(vw, prow + 6 * (size_t)col);
  for (int q = bs[t]; q < bs[t + 1]; q++) dsr_bs_face_row(a, faces + bins[q], row, x0, x1, prow);
  for (int q = 0; q < big[0]; q++) dsr_bs_face_row(a, faces + big[1 + q], row, x0, x1, prow);
  for (int col = x0; col <= x1; col++) dsr_pixel_normalize(prow + 6 * (size_t)col);
}

DS_HD DSR_INLINE void dsr_bs_face_bwd(const dsrBatchArgs* a, int j, int b) {
  const dsrFace* f = a->face + DSR_B(a, b, a->nface) + j;
  const size_t npx = 4 * (size_t)a->v.W * a->v.H;
  dsrFaceGrad g;
  memset(&g, 0, sizeof g);
  dsr_face_bwd(&a->v, f, a->pix + DSR_B(a, b, 6 * (size_t)a->v.Wi * a->v.Hi), a->dimage + DSR_B(a, b, npx), &g);
  dsr_face_finish(&a->v, a->verts + DSR_B(a, b, 3 * a->nvert), a->faces, a->colors, a->vertex_color, j, f, &g,
                  a->fgrad + DSR_B(a, b, 9 * a->nface) + 9 * (size_t)j,
                  a->fcgrad + DSR_B(a, b, 9 * a->nface) + 9 * (size_t)j, NULL,
                  a->flight + DSR_B(a, b, DSR_NLIGHT * a->nface) + DSR_NLIGHT * (size_t)j);
}

/* Instance b's light adjoint: its faces' parts summed in face order
 * (raster.c's light_adjoint), before the direction's normalisation. */
DS_HD DSR_INLINE void dsr_bs_light_sum(const dsrBatchArgs* a, int b) {
  double* acc = a->lsum + DSR_B(a, b, DSR_NLIGHT);
  for (int k = 0; k < DSR_NLIGHT; k++) acc[k] = 0.0;
  dsr_light_sum(a->flight + DSR_B(a, b, DSR_NLIGHT * a->nface), a->nface, acc);
}

/* Vertex v's gradient: its faces' parts in face order (raster.c's gather). */
DS_HD DSR_INLINE void dsr_bs_gather(const dsrBatchArgs* a, int v, int b) {
  const double* fg = a->fgrad + DSR_B(a, b, 9 * a->nface);
  dsReal* dv = a->dverts + DSR_B(a, b, 3 * a->nvert) + 3 * (size_t)v;
  for (int q = a->vinc_start[v]; q < a->vinc_start[v + 1]; q++) {
    const double* g = fg + 9 * (size_t)(a->vinc[q] / 3) + 3 * (a->vinc[q] % 3);
    for (int k = 0; k < 3; k++) dv[k] += (dsReal)g[k];
  }
}

/* One image operation (a->io) for index e of instance b. */
DS_HD DSR_INLINE void dsr_bs_img(const dsrBatchArgs* a, int e, int b) {
  const dsrImgOp* o = &a->io;
  const dsrLossConst* lc = &a->lc;
  const size_t npx = 4 * (size_t)a->v.W * a->v.H;
  double* ws = a->ws + DSR_B(a, b, a->wsz);
  const double* k = o->kern ? lc->gk : lc->bk;
  switch (o->op) {
    case DSR_IO_IN:
      ws[o->a + e] = a->image[DSR_B(a, b, npx) + e];
      ws[o->b + e] = a->goal[DSR_B(a, b, a->goal_stride) + e];
      break;
    case DSR_IO_FILT: dsr_filt_px(ws + o->a, ws + o->c, o->w, o->h, k, o->R, o->axis, o->inv_full, e % o->w, e / o->w); break;
    case DSR_IO_FILT_T:
      dsr_filt_T_px(ws + o->a, ws + o->c, o->w, o->h, k, o->R, o->axis, o->inv_full, e % o->w, e / o->w);
      break;
    case DSR_IO_DECIM: {
      const int x = e % o->W, y = e / o->W;
      for (int c = 0; c < 4; c++)
        ws[o->c + ((size_t)y * o->W + x) * 4 + c] = ws[o->a + ((size_t)(2 * y) * o->w + 2 * x) * 4 + c];
      break;
    }
    case DSR_IO_SCATTER: {
      const int x = e % o->W, y = e / o->W;
      for (int c = 0; c < 4; c++)
        ws[o->c + ((size_t)(2 * y) * o->w + 2 * x) * 4 + c] = ws[o->a + ((size_t)y * o->W + x) * 4 + c];
      break;
    }
    case DSR_IO_ZERO: ws[o->c + e] = 0.0; break;
    case DSR_IO_MUL: ws[o->c + e] = ws[o->a + e] * ws[o->b + e]; break;
    case DSR_IO_LVL_GRAD: {
      const double d = ws[o->a + e] - ws[o->b + e], n = (double)o->count;
      if (lc->kind == DS_LOSS_MSE)
        ws[o->c + e] += o->wgt * 2.0 * d / n;
      else
        ws[o->c + e] += o->wgt * (d > 0 ? 1.0 : d < 0 ? -1.0 : 0.0) / n;
      break;
    }
    case DSR_IO_LVL_SUM: {
      const size_t n = 4 * (size_t)o->w * o->h;
      double acc = 0;
      for (size_t i = 0; i < n; i++) {
        const double d = ws[o->a + i] - ws[o->b + i];
        acc += lc->kind == DS_LOSS_MSE ? d * d : fabs(d);
      }
      ws[o->lvl + o->slot] = acc / (double)n;
      break;
    }
    case DSR_IO_SSIM: {
      const size_t n = (size_t)o->count;
      double* mx = ws + o->c + e;
      ws[o->e + e] = dsr_ssim_value(mx, mx + n, mx + 2 * n, mx + 3 * n, mx + 4 * n, lc->C1, lc->C2,
                                    o->wgt * (-0.5 / (double)n), 1);
      break;
    }
    case DSR_IO_SSIM_SUM: {
      const size_t n = 4 * (size_t)o->w * o->h;
      double acc = 0;
      for (size_t i = 0; i < n; i++) acc += ws[o->e + i];
      ws[o->lvl + o->slot] = 0.5 * (1.0 - acc / (double)n);
      break;
    }
    case DSR_IO_COMBINE: ws[o->c + e] += 2 * ws[o->a + e] * ws[o->d + e] + ws[o->b + e] * ws[o->e + e]; break;
    case DSR_IO_TOTAL: {
      double total = 0;
      for (int lv = 0; lv < lc->levels; lv++)
        if (lc->weights[lv] != 0) total += lc->weights[lv] * ws[o->lvl + lv];
      if (lc->mom_w > 0)
        total += dsr_moments_sum(lc, a->image + DSR_B(a, b, npx), a->goal + DSR_B(a, b, a->goal_stride), ws + o->st);
      a->loss[b] = (dsReal)total;
      break;
    }
    case DSR_IO_OUT: {
      double g = ws[o->pg + e];
      if (lc->mom_w > 0 && e % 4 == 3) g += dsr_moments_grad(lc, ws + o->st, e);
      dsReal gr = (dsReal)g;
      if (a->weight) gr *= a->weight[b];
      a->dimage[DSR_B(a, b, npx) + (size_t)e] = gr;
      break;
    }
    default: break;
  }
}

DS_HD DSR_INLINE void dsr_bstage_run(int stage, const dsrBatchArgs* a, int e, int b) {
  const size_t npx = 4 * (size_t)a->v.W * a->v.H;
  switch (stage) {
    case DSR_BS_PROJECT:
      dsr_project(&a->v, a->verts + DSR_B(a, b, 3 * a->nvert), e, a->vproj + DSR_B(a, b, 3 * a->nvert) + 3 * (size_t)e);
      break;
    case DSR_BS_FACES:
      dsr_face_setup(&a->v, a->verts + DSR_B(a, b, 3 * a->nvert), a->faces, a->colors, a->vertex_color,
                     a->vproj + DSR_B(a, b, 3 * a->nvert), e, a->face + DSR_B(a, b, a->nface) + e,
                     a->ftile + DSR_B(a, b, 4 * a->nface) + 4 * (size_t)e);
      break;
    case DSR_BS_BIN_COUNT: dsr_bs_bin(a, e, b, 0); break;
    case DSR_BS_BIN_SCAN: dsr_bs_scan(a, b); break;
    case DSR_BS_BIN_FILL: dsr_bs_bin(a, e, b, 1); break;
    case DSR_BS_ROW: dsr_bs_row(a, e, b); break;
    case DSR_BS_DOWN:
      dsr_downsample(&a->v, a->pix + DSR_B(a, b, 6 * (size_t)a->v.Wi * a->v.Hi), e / a->v.W, e % a->v.W,
                     a->image + DSR_B(a, b, npx) + 4 * (size_t)e);
      break;
    case DSR_BS_LOSS_SUM:
      a->loss[b] = (dsReal)dsr_loss_sum(&a->lc, a->image + DSR_B(a, b, npx), a->goal + DSR_B(a, b, a->goal_stride),
                                        a->lstat + DSR_B(a, b, DSR_LSTAT));
      break;
    case DSR_BS_LOSS_GRAD: {
      dsReal g = (dsReal)dsr_loss_grad(&a->lc, a->image + DSR_B(a, b, npx), a->goal + DSR_B(a, b, a->goal_stride),
                                       a->lstat + DSR_B(a, b, DSR_LSTAT), e);
      if (a->weight) g *= a->weight[b];
      a->dimage[DSR_B(a, b, npx) + (size_t)e] = g;
      break;
    }
    case DSR_BS_FACE_BWD: dsr_bs_face_bwd(a, e, b); break;
    case DSR_BS_GATHER: dsr_bs_gather(a, e, b); break;
    case DSR_BS_LIGHT_SUM: dsr_bs_light_sum(a, b); break;
    case DSR_BS_IMG: dsr_bs_img(a, e, b); break;
    default: break;
  }
}

#endif
