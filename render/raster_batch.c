/* The batched renderer's driver (render/raster_batch.h): memory on a
 * backend, the order of the stages, and the CPU backend. Backend-neutral,
 * so the CPU tests exercise every offset and stage order the CUDA backend
 * runs. */
#include "config.h"

#include <math.h>
#include <string.h>

#include "base/internal.h"
#include "render/raster_batch.h"

/* ---- the host backend's launches (base/backend.h) ---------------------------------- */
/* Below this many pairs a stage runs on one thread. */
#define DSR_PAR_MIN 256

/* Every pair writes only its own cells: any schedule gives the same bits. */
int ds__host_raster_run(void* ctx, int stage, const dsrBatchArgs* a, int count, int B) {
  (void)ctx;
  const long long n = (long long)count * B;
  (void)n;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 16) if (n >= DSR_PAR_MIN)
#endif
  for (long long k = 0; k < n; k++) dsr_bstage_run(stage, a, (int)(k % count), (int)(k / count));
  return 0;
}

/* ---- the driver ----------------------------------------------------------------------- */
struct dsBatchRaster {
  const dsBackend* be;
  void* ctx;
  dsrBatchArgs a;           /* every array in backend memory */
  size_t npx;               /* 4 W H */
  size_t bytes;
  void* blk[32];            /* backend allocations */
  int nblk;
  dsReal* verts;            /* B x 3 nvert: the last render's vertices */
  dsReal* goal;             /* B x npx (per instance) or npx */
  dsReal* wbuf;             /* B: the weights of the last loss call */
  int have_goal, rendered, have_grad, have_light;
  int goal_per_instance;
  dsReal light_dir[3];      /* the settings' (the light gradient's normalisation) */
  double* hlsum;            /* host, B x DSR_NLIGHT: the last backward's light sums */
  dsErrBuf err;
};

static void* take(dsBatchRaster* r, size_t bytes) {
  void* p = r->nblk < (int)(sizeof r->blk / sizeof r->blk[0]) ? r->be->alloc(r->ctx, bytes) : NULL;
  if (p) {
    r->blk[r->nblk++] = p;
    r->bytes += bytes;
  }
  return p;
}

void ds__braster_destroy(dsBatchRaster* r) {
  if (!r) return;
  for (int i = 0; i < r->nblk; i++) r->be->release(r->ctx, r->blk[i]);
  ds__free(r->hlsum);
  ds__free(r);
}

const char* ds__braster_last_error(const dsBatchRaster* r) { return r ? ds__errmsg(&r->err) : ""; }

static int be_fail(dsBatchRaster* r, int rc, const char* what) {
  return ds__seterr(&r->err, rc ? rc : DS_ERR_CUDA, "batched render (%s): %s failed: %s", r->be->name, what,
                    r->be->last_error(r->ctx));
}

static int run(dsBatchRaster* r, int stage) {
  const int count = dsr_bstage_count(&r->a, stage);
  if (count <= 0) return 0;
  int rc = r->be->run_raster(r->ctx, stage, &r->a, count, r->a.B);
  return rc ? be_fail(r, rc, "a stage launch") : 0;
}

int ds__braster_create(dsBatchRaster** out, const dsBackend* be, void* ctx, const dsRenderSettings* s, int B,
                       int nvert, int nface, const int* faces, const dsReal* colors, int color_mode, char* err,
                       size_t errlen) {
  if (!out || !be) return ds__puterr(err, errlen, DS_ERR_INVALID, "batched render: no output or backend");
  *out = NULL;
  char why[256];
  if (ds_render_settings_check(s, why, sizeof why)) return ds__puterr(err, errlen, DS_ERR_INVALID, "%s", why);
  if (B < 1 || nvert < 0 || nface < 0 || nvert > (1 << 26) || nface > (1 << 24))
    return ds__puterr(err, errlen, DS_ERR_INVALID,
                      "batched render: batch %d, %d vertices, %d faces: expected a batch >= 1 and sizes in range", B,
                      nvert, nface);
  if (color_mode != DS_COLOR_FACE && color_mode != DS_COLOR_VERTEX)
    return ds__puterr(err, errlen, DS_ERR_INVALID, "batched render: color_mode %d is neither DS_COLOR_FACE nor DS_COLOR_VERTEX",
                      color_mode);
  if (nface > 0 && (!faces || !colors))
    return ds__puterr(err, errlen, DS_ERR_INVALID, "batched render: faces and colors must not be NULL");
  for (int j = 0; j < 3 * nface; j++)
    if (faces[j] < 0 || faces[j] >= nvert)
      return ds__puterr(err, errlen, DS_ERR_MESH, "batched render: face %d refers to vertex %d (nvert %d)", j / 3,
                        faces[j], nvert);
  dsBatchRaster* r = (dsBatchRaster*)ds__calloc(1, sizeof *r);
  if (!r) return ds__puterr(err, errlen, DS_ERR_NOMEM, "batched render: out of memory");
  r->be = be;
  r->ctx = ctx;
  dsrBatchArgs* a = &r->a;
  ds__raster_view(s, &a->v);
  a->v.c.vertex_color = color_mode == DS_COLOR_VERTEX;
  a->B = B;
  a->nvert = nvert;
  a->nface = nface;
  a->vertex_color = a->v.c.vertex_color;
  a->bin_cap = DSR_BIG_TILES * (nface > 0 ? nface : 1);
  r->npx = 4 * (size_t)a->v.W * a->v.H;
  const size_t nb = (size_t)B, n3 = 3 * (size_t)nvert, npix = (size_t)a->v.Wi * a->v.Hi;
  const size_t ncol = color_mode == DS_COLOR_VERTEX ? n3 : 3 * (size_t)nface;
  /* the vertex -> face corner incidence, ascending (the gather's order) */
  int* vs = (int*)ds__calloc((size_t)nvert + 1, sizeof(int));
  int* vi = (int*)ds__calloc(3 * (size_t)nface + 1, sizeof(int));
  int rc = vs && vi ? 0 : DS_ERR_NOMEM;
  if (!rc) {
    for (int q = 0; q < 3 * nface; q++) vs[faces[q] + 1]++;
    for (int v = 0; v < nvert; v++) vs[v + 1] += vs[v];
    int* fill = (int*)ds__calloc((size_t)nvert + 1, sizeof(int));
    if (!fill) rc = DS_ERR_NOMEM;
    if (fill) {
      memcpy(fill, vs, sizeof(int) * (size_t)nvert);
      for (int q = 0; q < 3 * nface; q++) vi[fill[faces[q]]++] = q;
      ds__free(fill);
    }
  }
  int* f_d = rc ? NULL : (int*)take(r, sizeof(int) * (3 * (size_t)nface + 1));
  dsReal* c_d = rc ? NULL : (dsReal*)take(r, sizeof(dsReal) * (ncol + 1));
  int* vs_d = rc ? NULL : (int*)take(r, sizeof(int) * ((size_t)nvert + 1));
  int* vi_d = rc ? NULL : (int*)take(r, sizeof(int) * (3 * (size_t)nface + 1));
  a->faces = f_d;
  a->colors = c_d;
  a->vinc_start = vs_d;
  a->vinc = vi_d;
  r->verts = (dsReal*)take(r, sizeof(dsReal) * (nb * n3 + 1));
  a->verts = r->verts;
  a->vproj = (double*)take(r, sizeof(double) * (nb * n3 + 1));
  a->face = (dsrFace*)take(r, sizeof(dsrFace) * (nb * (size_t)nface + 1));
  a->ftile = (int*)take(r, sizeof(int) * (nb * 4 * (size_t)nface + 1));
  a->bin_start = (int*)take(r, sizeof(int) * nb * ((size_t)a->v.ntiles + 1));
  a->bins = (int*)take(r, sizeof(int) * nb * (size_t)a->bin_cap);
  a->big = (int*)take(r, sizeof(int) * nb * ((size_t)nface + 1));
  a->pix = (double*)take(r, sizeof(double) * nb * 6 * npix);
  a->image = (dsReal*)take(r, sizeof(dsReal) * nb * r->npx);
  a->dimage = (dsReal*)take(r, sizeof(dsReal) * nb * r->npx);
  a->fgrad = (double*)take(r, sizeof(double) * (nb * 9 * (size_t)nface + 1));
  a->fcgrad = (double*)take(r, sizeof(double) * (nb * 9 * (size_t)nface + 1));
  a->flight = (double*)take(r, sizeof(double) * (nb * DSR_NLIGHT * (size_t)nface + 1));
  a->lsum = (double*)take(r, sizeof(double) * nb * DSR_NLIGHT);
  r->hlsum = (double*)ds__calloc(nb * DSR_NLIGHT, sizeof(double));
  for (int k = 0; k < 3; k++) r->light_dir[k] = s->light_dir[k];
  a->loss = (dsReal*)take(r, sizeof(dsReal) * nb);
  a->lstat = (double*)take(r, sizeof(double) * nb * DSR_LSTAT);
  dsReal* w_d = (dsReal*)take(r, sizeof(dsReal) * nb);
  r->goal = (dsReal*)take(r, sizeof(dsReal) * nb * r->npx); /* one goal per instance at most */
  a->weight = NULL;
  if (!rc && (!f_d || !c_d || !vs_d || !vi_d || !a->verts || !a->vproj || !a->face || !a->ftile || !a->bin_start ||
              !a->bins || !a->big || !a->pix || !a->image || !a->dimage || !a->fgrad || !a->fcgrad || !a->flight ||
              !a->lsum || !r->hlsum || !a->loss ||
              !a->lstat || !w_d || !r->goal))
    rc = DS_ERR_NOMEM;
  if (!rc) rc = be->put(ctx, f_d, faces, sizeof(int) * 3 * (size_t)nface);
  if (!rc) rc = be->put(ctx, c_d, colors, sizeof(dsReal) * ncol);
  if (!rc) rc = be->put(ctx, vs_d, vs, sizeof(int) * ((size_t)nvert + 1));
  if (!rc) rc = be->put(ctx, vi_d, vi, sizeof(int) * 3 * (size_t)nface);
  ds__free(vs);
  ds__free(vi);
  if (rc) {
    char need[32];
    rc = ds__puterr(err, errlen, rc, "batched render of %d %dx%d images (supersample %d) on %s: %s%s", B, a->v.W,
                    a->v.H, a->v.k, be->name,
                    rc == DS_ERR_NOMEM ? "cannot allocate " : "upload failed: ",
                    rc == DS_ERR_NOMEM ? ds_format_size(r->bytes + sizeof(double) * nb * 6 * npix, need, sizeof need)
                                       : be->last_error(ctx));
    ds__braster_destroy(r);
    return rc;
  }
  r->wbuf = w_d; /* a->weight points at it during a loss call that gives weights */
  *out = r;
  return 0;
}

int ds__braster_render(dsBatchRaster* r, const dsReal* verts, dsReal* images) {
  if (!r || !verts) return DS_ERR_INVALID;
  static const int stages[] = {DSR_BS_PROJECT, DSR_BS_FACES, DSR_BS_BIN_COUNT, DSR_BS_BIN_SCAN,
                               DSR_BS_BIN_FILL, DSR_BS_ROW, DSR_BS_DOWN};
  r->rendered = r->have_grad = r->have_light = 0;
  int rc = r->be->copy(r->ctx, r->verts, verts, sizeof(dsReal) * (size_t)r->a.B * 3 * r->a.nvert);
  if (rc) return be_fail(r, rc, "copying the vertices");
  for (size_t i = 0; i < sizeof stages / sizeof stages[0]; i++)
    if ((rc = run(r, stages[i]))) return rc;
  if (images && (rc = r->be->get(r->ctx, images, r->a.image, sizeof(dsReal) * (size_t)r->a.B * r->npx)))
    return be_fail(r, rc, "reading the images");
  r->rendered = 1;
  ds__clearerr(&r->err);
  return 0;
}

int ds__braster_set_goal(dsBatchRaster* r, const dsReal* goals, int per_instance) {
  if (!r || !goals) return DS_ERR_INVALID;
  const size_t n = r->npx * (per_instance ? (size_t)r->a.B : 1);
  r->goal_per_instance = per_instance != 0;
  int rc = r->be->put(r->ctx, r->goal, goals, sizeof(dsReal) * n);
  if (rc) return be_fail(r, rc, "uploading the goals");
  r->a.goal = r->goal;
  r->a.goal_stride = per_instance ? r->npx : 0;
  r->have_goal = 1;
  return 0;
}

/* ---- multi-scale and D-SSIM losses as image operations (ds_image_loss_eval's steps) ---- */
static int io_run(dsBatchRaster* r, const dsrImgOp* o) {
  if (o->count <= 0) return 0;
  r->a.io = *o;
  return run(r, DSR_BS_IMG);
}

static dsrImgOp io_of(int op, int count) {
  dsrImgOp o;
  memset(&o, 0, sizeof o);
  o.op = op;
  o.count = count;
  return o;
}

static int io_zero(dsBatchRaster* r, size_t at, int n) {
  dsrImgOp o = io_of(DSR_IO_ZERO, n);
  o.c = at;
  return io_run(r, &o);
}

/* c = F a (transpose: c += F^T a) along axis on a w x h level */
static int io_filt(dsBatchRaster* r, int transpose, int kern, int axis, int w, int h, size_t a, size_t c) {
  const dsrLossConst* lc = &r->a.lc;
  dsrImgOp o = io_of(transpose ? DSR_IO_FILT_T : DSR_IO_FILT, w * h);
  o.w = w;
  o.h = h;
  o.kern = kern;
  o.R = kern ? lc->R : 2;
  o.axis = axis;
  const double* k = kern ? lc->gk : lc->bk;
  o.inv_full = 1.0 / dsr_norm_at(k, o.R, o.R, 2 * o.R + 1);
  o.a = a;
  o.c = c;
  return io_run(r, &o);
}

/* G (the SSIM window) applied to a -> c, through t0 */
static int io_gauss(dsBatchRaster* r, int w, int h, size_t a, size_t c, size_t t0) {
  int rc = io_filt(r, 0, 1, 0, w, h, a, t0);
  return rc ? rc : io_filt(r, 0, 1, 1, w, h, t0, c);
}

/* c += G^T a, through t0 */
static int io_gauss_T(dsBatchRaster* r, int w, int h, size_t a, size_t c, size_t t0) {
  int rc = io_zero(r, t0, 4 * w * h);
  if (!rc) rc = io_filt(r, 1, 1, 1, w, h, a, t0);
  return rc ? rc : io_filt(r, 1, 1, 0, w, h, t0, c);
}

/* The workspace of def's loss: three pyramids, two scratch images, the
 * five SSIM maps and the per-value SSIM, the level values, the moments
 * state. Offsets into it (doubles). */
typedef struct IoLayout {
  int lw[DS_LOSS_MAX_LEVELS], lh[DS_LOSS_MAX_LEVELS];
  size_t off[DS_LOSS_MAX_LEVELS], pa, pb, pg, t0, t1, ss, sv, lvl, st, size;
} IoLayout;

static void io_layout(int W, int H, int levels, IoLayout* L) {
  size_t tot = 0;
  for (int i = 0; i < levels; i++) {
    L->lw[i] = i ? (L->lw[i - 1] + 1) / 2 : W;
    L->lh[i] = i ? (L->lh[i - 1] + 1) / 2 : H;
    L->off[i] = tot;
    tot += 4 * (size_t)L->lw[i] * L->lh[i];
  }
  const size_t n = 4 * (size_t)W * H;
  L->pa = 0;
  L->pb = tot;
  L->pg = 2 * tot;
  L->t0 = 3 * tot;
  L->t1 = L->t0 + n;
  L->ss = L->t1 + n;
  L->sv = L->ss + 5 * n;
  L->lvl = L->sv + n;
  L->st = L->lvl + DS_LOSS_MAX_LEVELS;
  L->size = L->st + DSR_LSTAT;
}

/* The workspace, taken once on the first multi-level or D-SSIM loss and
 * sized for DS_LOSS_MAX_LEVELS, so a later loss with more levels never
 * grows it (no allocation after the first loss call). */
static int img_workspace(dsBatchRaster* r, const dsLossDef* def) {
  if (r->a.ws) return 0;
  const dsrLossConst* lc = &r->a.lc;
  IoLayout Lmax;
  io_layout(lc->W, lc->H, DS_LOSS_MAX_LEVELS, &Lmax);
  double* ws = (double*)take(r, sizeof(double) * Lmax.size * (size_t)r->a.B);
  if (!ws) {
    char need[32];
    return ds__seterr(&r->err, DS_ERR_NOMEM, "batched render: %s loss of %d images: cannot allocate %s",
                      def->kind == DS_LOSS_DSSIM ? "D-SSIM" : "multi-scale", r->a.B,
                      ds_format_size(sizeof(double) * Lmax.size * (size_t)r->a.B, need, sizeof need));
  }
  r->a.ws = ws;
  r->a.wsz = Lmax.size;
  return 0;
}

/* def's constants for the stages: level weights, SSIM C1, C2 and window
 * radius, the Gaussian window g_i = exp(-i^2 / (2 sigma^2)) (unnormalised:
 * the filters divide by the taps inside the image) and the 5-tap binomial
 * blur (1 4 6 4 1)/16. */
static void img_consts(dsrLossConst* lc, const dsLossDef* def) {
  lc->levels = def->levels;
  for (int i = 0; i < def->levels; i++) lc->weights[i] = def->weights[i];
  lc->C1 = def->ssim_c1;
  lc->C2 = def->ssim_c2;
  lc->R = def->ssim_radius;
  const double sg = def->ssim_sigma > 0 ? (double)def->ssim_sigma : 1.0; /* as ds_image_loss_create */
  for (int i = 0; i <= DSR_MAXR; i++) lc->gk[i] = exp(-0.5 * i * i / (sg * sg));
  lc->bk[0] = 6.0 / 16;
  lc->bk[1] = 4.0 / 16;
  lc->bk[2] = 1.0 / 16;
}

/* The image and the goal in level 0 of pyramids a and b, each further level
 * the previous one blurred in x, then y, and every other pixel kept; the
 * gradient pyramid g zeroed. */
static int img_pyramids(dsBatchRaster* r, const dsLossDef* def, const IoLayout* L, int n0) {
  dsrImgOp o = io_of(DSR_IO_IN, n0);
  o.a = L->pa;
  o.b = L->pb;
  int rc = io_run(r, &o);
  for (int lv = 0; lv + 1 < def->levels && !rc; lv++)
    for (int q = 0; q < 2 && !rc; q++) {
      const size_t src = (q ? L->pb : L->pa) + L->off[lv], dst = (q ? L->pb : L->pa) + L->off[lv + 1];
      const int w = L->lw[lv], h = L->lh[lv];
      rc = io_filt(r, 0, 0, 0, w, h, src, L->t0);
      if (!rc) rc = io_filt(r, 0, 0, 1, w, h, L->t0, L->t1);
      if (!rc) {
        o = io_of(DSR_IO_DECIM, L->lw[lv + 1] * L->lh[lv + 1]);
        o.w = w;
        o.h = h;
        o.W = L->lw[lv + 1];
        o.H = L->lh[lv + 1];
        o.a = L->t1;
        o.c = dst;
        rc = io_run(r, &o);
      }
    }
  if (!rc) rc = io_zero(r, L->pg, (int)(L->pb - L->pa));
  return rc;
}

/* Level lv's D-SSIM with weight wgt: the SSIM maps mx = G a, my = G b,
 * sxx = G a^2, syy = G b^2, sxy = G ab, the per-value SSIM and the level's
 * sum; then its gradient into g (a's level lv in the gradient pyramid). */
static int img_level_dssim(dsBatchRaster* r, const IoLayout* L, int lv, double wgt) {
  const int w = L->lw[lv], h = L->lh[lv], n = 4 * w * h;
  const size_t a = L->pa + L->off[lv], b = L->pb + L->off[lv], g = L->pg + L->off[lv];
  const size_t mx = L->ss, my = mx + (size_t)n, sxx = my + (size_t)n, syy = sxx + (size_t)n, sxy = syy + (size_t)n;
  static const int sq[3][2] = {{0, 0}, {1, 1}, {0, 1}};
  dsrImgOp o;
  int rc = io_gauss(r, w, h, a, mx, L->t0);
  if (!rc) rc = io_gauss(r, w, h, b, my, L->t0);
  for (int k = 0; k < 3 && !rc; k++) { /* a a, b b, a b */
    o = io_of(DSR_IO_MUL, n);
    o.a = sq[k][0] ? b : a;
    o.b = sq[k][1] ? b : a;
    o.c = L->t1;
    rc = io_run(r, &o);
    if (!rc) rc = io_gauss(r, w, h, L->t1, k == 0 ? sxx : k == 1 ? syy : sxy, L->t0);
  }
  if (!rc) {
    o = io_of(DSR_IO_SSIM, n);
    o.c = mx;
    o.e = L->sv;
    o.wgt = wgt;
    rc = io_run(r, &o);
  }
  if (!rc) {
    o = io_of(DSR_IO_SSIM_SUM, 1);
    o.w = w;
    o.h = h;
    o.e = L->sv;
    o.lvl = L->lvl;
    o.slot = lv;
    rc = io_run(r, &o);
  }
  /* g += G^T dmx + 2 a G^T dsxx + b G^T dsxy (my, syy: scratch) */
  if (!rc) rc = io_gauss_T(r, w, h, mx, g, L->t0);
  if (!rc) rc = io_zero(r, my, n);
  if (!rc) rc = io_gauss_T(r, w, h, sxx, my, L->t0);
  if (!rc) rc = io_zero(r, syy, n);
  if (!rc) rc = io_gauss_T(r, w, h, sxy, syy, L->t0);
  if (!rc) {
    o = io_of(DSR_IO_COMBINE, n);
    o.a = a;
    o.b = b;
    o.c = g;
    o.d = my;
    o.e = syy;
    rc = io_run(r, &o);
  }
  return rc;
}

/* Level lv's MSE or L1 with weight wgt: its gradient into g, its value into
 * the level sums. */
static int img_level_pixel(dsBatchRaster* r, const IoLayout* L, int lv, double wgt) {
  const int w = L->lw[lv], h = L->lh[lv], n = 4 * w * h;
  const size_t a = L->pa + L->off[lv], b = L->pb + L->off[lv], g = L->pg + L->off[lv];
  dsrImgOp o = io_of(DSR_IO_LVL_GRAD, n);
  o.a = a;
  o.b = b;
  o.c = g;
  o.wgt = wgt;
  int rc = io_run(r, &o);
  if (!rc) {
    o = io_of(DSR_IO_LVL_SUM, 1);
    o.w = w;
    o.h = h;
    o.a = a;
    o.b = b;
    o.lvl = L->lvl;
    o.slot = lv;
    rc = io_run(r, &o);
  }
  return rc;
}

/* The gradient down the pyramid, coarsest level first: level lv += B^T D^T
 * of level lv+1, with D keeping every other pixel (its transpose scatters
 * them back) and B the separable blur (transposed: y, then x). */
static int img_grad_down(dsBatchRaster* r, const dsLossDef* def, const IoLayout* L) {
  int rc = 0;
  for (int lv = def->levels - 2; lv >= 0 && !rc; lv--) {
    const int w = L->lw[lv], h = L->lh[lv];
    rc = io_zero(r, L->t1, 4 * w * h);
    if (!rc) {
      dsrImgOp o = io_of(DSR_IO_SCATTER, L->lw[lv + 1] * L->lh[lv + 1]);
      o.w = w;
      o.h = h;
      o.W = L->lw[lv + 1];
      o.H = L->lh[lv + 1];
      o.a = L->pg + L->off[lv + 1];
      o.c = L->t1;
      rc = io_run(r, &o);
    }
    if (!rc) rc = io_zero(r, L->t0, 4 * w * h);
    if (!rc) rc = io_filt(r, 1, 0, 1, w, h, L->t1, L->t0);
    if (!rc) rc = io_filt(r, 1, 0, 0, w, h, L->t0, L->pg + L->off[lv]);
  }
  return rc;
}

/* A multi-scale or D-SSIM loss as image operations: pyramids, each level
 * with a nonzero weight valued and differentiated, the gradient carried
 * down to level 0, then the total (with the moments term) and the image
 * gradient out. */
static int img_loss(dsBatchRaster* r, const dsLossDef* def) {
  dsrLossConst* lc = &r->a.lc;
  IoLayout L;
  io_layout(lc->W, lc->H, def->levels, &L);
  int rc = img_workspace(r, def);
  if (rc) return rc;
  img_consts(lc, def);
  const int n0 = 4 * lc->W * lc->H;
  rc = img_pyramids(r, def, &L, n0);
  for (int lv = 0; lv < def->levels && !rc; lv++) {
    const double wgt = def->weights[lv];
    if (wgt == 0) continue;
    rc = def->kind == DS_LOSS_DSSIM ? img_level_dssim(r, &L, lv, wgt) : img_level_pixel(r, &L, lv, wgt);
  }
  if (!rc) rc = img_grad_down(r, def, &L);
  dsrImgOp o;
  if (!rc) {
    o = io_of(DSR_IO_TOTAL, 1);
    o.lvl = L.lvl;
    o.st = L.st;
    rc = io_run(r, &o);
  }
  if (!rc) {
    o = io_of(DSR_IO_OUT, n0);
    o.pg = L.pg;
    o.st = L.st;
    rc = io_run(r, &o);
  }
  return rc;
}

int ds__braster_loss(dsBatchRaster* r, const dsLossDef* def, const dsReal* weights, dsReal* losses) {
  if (!r || !def || !losses) return DS_ERR_INVALID;
  char why[256];
  if (ds_image_loss_check(def, r->a.v.W, r->a.v.H, why, sizeof why))
    return ds__seterr(&r->err, DS_ERR_INVALID, "batched render: %s", why);
  if (def->kind == DS_LOSS_L2_DSSIM)
    return ds__seterr(&r->err, DS_ERR_UNSUPPORTED, "batched render: loss l2_dssim runs on the CPU renderer only");
  if (!r->rendered) return ds__seterr(&r->err, DS_ERR_STATE, "batched render: loss: nothing rendered yet");
  if (!r->have_goal) return ds__seterr(&r->err, DS_ERR_STATE, "batched render: loss: no goal images (set_goal)");
  r->have_grad = 0;
  int rc;
  dsrLossConst* lc = &r->a.lc;
  lc->W = r->a.v.W;
  lc->H = r->a.v.H;
  lc->kind = def->kind;
  lc->w0 = def->weights[0];
  lc->mom_w = def->moments_weight;
  lc->mom_q = def->moments_size;
  rc = weights ? r->be->put(r->ctx, r->wbuf, weights, sizeof(dsReal) * (size_t)r->a.B) : 0;
  if (rc) return be_fail(r, rc, "uploading the weights");
  r->a.weight = weights ? r->wbuf : NULL;
  if (def->levels > 1 || def->kind == DS_LOSS_DSSIM) {
    rc = img_loss(r, def);
  } else { /* one level of MSE or L1: two stages */
    rc = run(r, DSR_BS_LOSS_SUM);
    if (!rc) rc = run(r, DSR_BS_LOSS_GRAD);
  }
  if (!rc && (rc = r->be->get(r->ctx, losses, r->a.loss, sizeof(dsReal) * (size_t)r->a.B)))
    rc = be_fail(r, rc, "reading the losses");
  if (!rc) r->have_grad = 1;
  return rc;
}

int ds__braster_backward(dsBatchRaster* r, const dsReal* d_images, dsReal* dverts) {
  if (!r || !dverts) return DS_ERR_INVALID;
  if (!r->rendered) return ds__seterr(&r->err, DS_ERR_STATE, "batched render: backward: nothing rendered yet");
  if (!d_images && !r->have_grad)
    return ds__seterr(&r->err, DS_ERR_STATE,
                      "batched render: backward: no image gradient (give d_images, or evaluate a loss of this render)");
  int rc = 0;
  if (d_images) {
    rc = r->be->put(r->ctx, r->a.dimage, d_images, sizeof(dsReal) * (size_t)r->a.B * r->npx);
    if (rc) return be_fail(r, rc, "uploading the image gradients");
    r->have_grad = 0; /* the loss's gradient was replaced */
  }
  r->a.dverts = dverts;
  r->have_light = 0;
  rc = run(r, DSR_BS_FACE_BWD);
  if (!rc) rc = run(r, DSR_BS_GATHER);
  if (!rc) rc = run(r, DSR_BS_LIGHT_SUM);
  r->a.dverts = NULL;
  if (!rc) r->have_light = 1;
  return rc;
}

int ds__braster_light_grad(dsBatchRaster* r, dsRenderSettings* d_light) {
  if (!r || !d_light) return DS_ERR_INVALID;
  if (!r->have_light)
    return ds__seterr(&r->err, DS_ERR_STATE, "batched render: light gradient: no backward of the last render yet");
  const int B = r->a.B;
  int rc = r->be->get(r->ctx, r->hlsum, r->a.lsum, sizeof(double) * (size_t)B * DSR_NLIGHT);
  if (rc) return be_fail(r, rc, "reading the light gradients");
  for (int b = 0; b < B; b++) ds__raster_light_finish(&r->a.v, r->light_dir, r->hlsum + DSR_NLIGHT * (size_t)b, &d_light[b]);
  return 0;
}
