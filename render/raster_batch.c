/* The batched renderer's driver (render/raster_batch.h): memory on a
 * backend, the order of the stages, and the CPU backend. Backend-neutral,
 * so the CPU tests exercise every offset and stage order the CUDA backend
 * runs. */
#include "config.h"

#include <string.h>

#include "base/internal.h"
#include "render/raster_batch.h"

#ifndef DS_HAVE_CUDA
const dsRasterBackend* ds__cuda_raster_backend(void) { return NULL; }
#endif

/* ---- the CPU backend --------------------------------------------------------------- */
/* Below this many pairs a stage runs on one thread. */
#define DSR_PAR_MIN 256

/* Every pair writes only its own cells: any schedule gives the same bits. */
static int cpu_run(void* ctx, int stage, const dsrBatchArgs* a, int count, int B) {
  (void)ctx;
  const long long n = (long long)count * B;
  (void)n;
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 16) if (n >= DSR_PAR_MIN)
#endif
  for (long long k = 0; k < n; k++) dsr_bstage_run(stage, a, (int)(k % count), (int)(k / count));
  return 0;
}
static const char* cpu_last_error(void* ctx) {
  (void)ctx;
  return "";
}

const dsRasterBackend ds__cpu_raster_backend = {"cpu",         ds__host_alloc, ds__host_release, ds__host_move,
                                                ds__host_move, ds__host_move,  ds__host_zero,    cpu_run,
                                                cpu_last_error};

/* ---- the driver ----------------------------------------------------------------------- */
struct dsBatchRaster {
  const dsRasterBackend* be;
  void* ctx;
  dsrBatchArgs a;           /* every array in backend memory */
  size_t npx;               /* 4 W H */
  size_t bytes;
  void* blk[32];            /* backend allocations */
  int nblk;
  dsReal* verts;            /* B x 3 nvert: the last render's vertices */
  dsReal* goal;             /* B x npx (per instance) or npx */
  int have_goal, rendered, have_grad;
  /* host */
  dsImageLoss* hl;          /* multi-scale / D-SSIM losses */
  dsLossDef hl_def;
  dsReal *himg, *hgoal, *hgrad; /* npx each (host loss), B x npx images */
  int goal_per_instance;
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
  ds_image_loss_destroy(r->hl);
  ds__free(r->himg);
  ds__free(r->hgoal);
  ds__free(r->hgrad);
  ds__free(r);
}

const char* ds__braster_last_error(const dsBatchRaster* r) { return r ? ds__errmsg(&r->err) : ""; }
size_t ds__braster_bytes(const dsBatchRaster* r) { return r ? r->bytes : 0; }

static int be_fail(dsBatchRaster* r, int rc, const char* what) {
  return ds__seterr(&r->err, rc ? rc : DS_ERR_CUDA, "batched render (%s): %s failed: %s", r->be->name, what,
                    r->be->last_error(r->ctx));
}

static int run(dsBatchRaster* r, int stage) {
  const int count = dsr_bstage_count(&r->a, stage);
  if (count <= 0) return 0;
  int rc = r->be->run(r->ctx, stage, &r->a, count, r->a.B);
  return rc ? be_fail(r, rc, "a stage launch") : 0;
}

int ds__braster_create(dsBatchRaster** out, const dsRasterBackend* be, void* ctx, const dsRenderSettings* s, int B,
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
  a->loss = (dsReal*)take(r, sizeof(dsReal) * nb);
  a->lstat = (double*)take(r, sizeof(double) * nb * DSR_LSTAT);
  dsReal* w_d = (dsReal*)take(r, sizeof(dsReal) * nb);
  r->goal = (dsReal*)take(r, sizeof(dsReal) * nb * r->npx); /* one goal per instance at most */
  a->weight = NULL;
  if (!rc && (!f_d || !c_d || !vs_d || !vi_d || !a->verts || !a->vproj || !a->face || !a->ftile || !a->bin_start ||
              !a->bins || !a->big || !a->pix || !a->image || !a->dimage || !a->fgrad || !a->fcgrad || !a->loss ||
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
  a->weight = w_d; /* set per loss call (NULL when none is given) */
  *out = r;
  return 0;
}

int ds__braster_render(dsBatchRaster* r, const dsReal* verts, dsReal* images) {
  if (!r || !verts) return DS_ERR_INVALID;
  static const int stages[] = {DSR_BS_PROJECT, DSR_BS_FACES, DSR_BS_BIN_COUNT, DSR_BS_BIN_SCAN,
                               DSR_BS_BIN_FILL, DSR_BS_ROW, DSR_BS_DOWN};
  r->rendered = r->have_grad = 0;
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

/* The loss on the host (multi-scale, D-SSIM), instance by instance. */
static int host_loss(dsBatchRaster* r, const dsLossDef* def, const dsReal* weights, dsReal* losses) {
  const int B = r->a.B;
  const size_t npx = r->npx;
  if (!r->hl || memcmp(&r->hl_def, def, sizeof *def) != 0) {
    ds_image_loss_destroy(r->hl);
    r->hl = NULL;
    if (ds_image_loss_create(&r->hl, def, r->a.v.W, r->a.v.H))
      return ds__seterr(&r->err, DS_ERR_NOMEM, "batched render: cannot make the image loss");
    r->hl_def = *def;
  }
  if (!r->himg) r->himg = (dsReal*)ds__malloc(sizeof(dsReal) * npx * (size_t)B);
  if (!r->hgrad) r->hgrad = (dsReal*)ds__malloc(sizeof(dsReal) * npx * (size_t)B);
  if (!r->hgoal) r->hgoal = (dsReal*)ds__malloc(sizeof(dsReal) * npx * (size_t)B);
  if (!r->himg || !r->hgrad || !r->hgoal) return ds__seterr(&r->err, DS_ERR_NOMEM, "batched render: out of memory");
  int rc = r->be->get(r->ctx, r->himg, r->a.image, sizeof(dsReal) * npx * (size_t)B);
  if (!rc) rc = r->be->get(r->ctx, r->hgoal, r->goal, sizeof(dsReal) * npx * (r->goal_per_instance ? (size_t)B : 1));
  if (rc) return be_fail(r, rc, "reading the images");
  for (int b = 0; b < B; b++) {
    dsReal* g = r->hgrad + (size_t)b * npx;
    rc = ds_image_loss_eval(r->hl, r->himg + (size_t)b * npx, r->hgoal + (r->goal_per_instance ? (size_t)b * npx : 0),
                            &losses[b], g);
    if (rc) return ds__seterr(&r->err, rc, "batched render: image loss of instance %d failed", b);
    if (weights)
      for (size_t p = 0; p < npx; p++) g[p] *= weights[b];
  }
  rc = r->be->put(r->ctx, r->a.dimage, r->hgrad, sizeof(dsReal) * npx * (size_t)B);
  return rc ? be_fail(r, rc, "uploading the image gradients") : 0;
}

int ds__braster_loss(dsBatchRaster* r, const dsLossDef* def, const dsReal* weights, dsReal* losses) {
  if (!r || !def || !losses) return DS_ERR_INVALID;
  char why[256];
  if (ds_image_loss_check(def, r->a.v.W, r->a.v.H, why, sizeof why))
    return ds__seterr(&r->err, DS_ERR_INVALID, "batched render: %s", why);
  if (!r->rendered) return ds__seterr(&r->err, DS_ERR_STATE, "batched render: loss: nothing rendered yet");
  if (!r->have_goal) return ds__seterr(&r->err, DS_ERR_STATE, "batched render: loss: no goal images (set_goal)");
  r->have_grad = 0;
  int rc;
  if (def->levels > 1 || def->kind == DS_LOSS_DSSIM) {
    rc = host_loss(r, def, weights, losses);
  } else {
    dsrLossConst* lc = &r->a.lc;
    lc->W = r->a.v.W;
    lc->H = r->a.v.H;
    lc->kind = def->kind;
    lc->w0 = def->weights[0];
    lc->mom_w = def->moments_weight;
    lc->mom_q = def->moments_size;
    dsReal* w_d = (dsReal*)r->a.weight;
    rc = weights ? r->be->put(r->ctx, w_d, weights, sizeof(dsReal) * (size_t)r->a.B) : 0;
    if (rc) return be_fail(r, rc, "uploading the weights");
    const dsReal* keep = r->a.weight;
    if (!weights) r->a.weight = NULL;
    rc = run(r, DSR_BS_LOSS_SUM);
    if (!rc) rc = run(r, DSR_BS_LOSS_GRAD);
    r->a.weight = keep;
    if (!rc && (rc = r->be->get(r->ctx, losses, r->a.loss, sizeof(dsReal) * (size_t)r->a.B)))
      rc = be_fail(r, rc, "reading the losses");
  }
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
  rc = run(r, DSR_BS_FACE_BWD);
  if (!rc) rc = run(r, DSR_BS_GATHER);
  r->a.dverts = NULL;
  return rc;
}
