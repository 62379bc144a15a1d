/* Image losses: values on known inputs, every gradient component against
 * central finite differences (MSE, L1, D-SSIM, multi-scale MSE and D-SSIM,
 * the alpha-moments term alone, with MSE and with nothing visible),
 * perturbed gradients rejected, allocation-free evaluation, and the wider
 * basins of the multi-scale loss and of the moments term when the object
 * and the goal do not overlap. */
#include "config.h"

#include <stdint.h>

#include "dsim/raster.h"
#include "tests/dstest.h"

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static double urand(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (double)(g_rng >> 11) / 9007199254740992.0;
}

typedef int (*LossFn)(void* ctx, const dsReal* a, const dsReal* b, dsReal* loss, dsReal* grad);

static int W_, H_;
static int fn_mse(void* ctx, const dsReal* a, const dsReal* b, dsReal* loss, dsReal* grad) {
  (void)ctx;
  return ds_loss_mse(a, b, W_, H_, loss, grad);
}
static int fn_l1(void* ctx, const dsReal* a, const dsReal* b, dsReal* loss, dsReal* grad) {
  (void)ctx;
  return ds_loss_l1(a, b, W_, H_, loss, grad);
}
static int fn_obj(void* ctx, const dsReal* a, const dsReal* b, dsReal* loss, dsReal* grad) {
  return ds_image_loss_eval((dsImageLoss*)ctx, a, b, loss, grad);
}

/* mismatching components: |fd - an| > 1e-7 max|an| + 1e-6 |fd| */
static int compare(const double* fd, const double* an, int n, const char* what, int verbose) {
  double scale = 0, worst = 0;
  int i, bad = 0;
  for (i = 0; i < n; i++) scale = fmax(scale, fabs(an[i]));
  for (i = 0; i < n; i++) {
    double d = fabs(fd[i] - an[i]);
    worst = fmax(worst, d / scale);
    if (!(d <= 1e-7 * scale + 1e-6 * fabs(fd[i]))) {
      if (verbose && bad < 5) fprintf(stderr, "  %s[%d]: fd %.10g analytic %.10g\n", what, i, fd[i], an[i]);
      bad++;
    }
  }
  if (verbose) fprintf(stderr, "%s: max |fd - analytic| / max|analytic| = %.3g\n", what, worst);
  return bad;
}

static void fd_check(const char* what, LossFn fn, void* ctx, int w, int h) {
  int n = w * h * 4, i, bad, imax = 0;
  dsReal* a = (dsReal*)calloc(n, sizeof(dsReal));
  dsReal* b = (dsReal*)calloc(n, sizeof(dsReal));
  dsReal* g = (dsReal*)calloc(n, sizeof(dsReal));
  double* fd = (double*)calloc(n, sizeof(double));
  double* an = (double*)calloc(n, sizeof(double));
  dsReal L, lp, lm;
  const double hh = 1e-6;
  for (i = 0; i < n; i++) {
    a[i] = (dsReal)urand();
    b[i] = (dsReal)urand();
  }
  CHECK_INT_EQ(fn(ctx, a, b, &L, g), DS_OK);
  for (i = 0; i < n; i++) {
    dsReal v = a[i];
    a[i] = v + hh;
    fn(ctx, a, b, &lp, NULL);
    a[i] = v - hh;
    fn(ctx, a, b, &lm, NULL);
    a[i] = v;
    fd[i] = ((double)lp - (double)lm) / (2 * hh);
    an[i] = g[i];
  }
  bad = compare(fd, an, n, what, 1);
  CHECK_INT_EQ(bad, 0);
  for (i = 0; i < n; i++)
    if (fabs(an[i]) > fabs(an[imax])) imax = i;
  an[imax] *= 1.01;
  CHECK(compare(fd, an, n, what, 0) > 0);
  an[imax] /= 1.01;
  an[n / 2] = -an[n / 2];
  if (fabs(an[n / 2]) > 1e-3 * fabs(an[imax])) CHECK(compare(fd, an, n, what, 0) > 0);
  free(a), free(b), free(g), free(fd), free(an);
}

static size_t g_nalloc = 0;
static void* count_malloc(size_t n) { g_nalloc++; return malloc(n); }
static void* count_realloc(void* p, size_t n) { g_nalloc++; return realloc(p, n); }
static void* count_calloc(size_t c, size_t n) { g_nalloc++; return calloc(c, n); }

/* a white square of side s at column x0 (rows 8..8+s) on a transparent
 * background */
static void square(dsReal* img, int w, int h, int x0, int s) {
  int x, y;
  memset(img, 0, sizeof(dsReal) * w * h * 4);
  for (y = 8; y < 8 + s; y++)
    for (x = x0; x < x0 + s; x++)
      if (x >= 0 && x < w && y < h)
        for (int c = 0; c < 4; c++) img[4 * (y * w + x) + c] = 1;
}

int main(void) {
  dsLossDef def;
  dsImageLoss* obj = NULL;
  if (DS_SINGLE) DST_SKIP("finite-difference checks need double precision");

  /* known values */
  {
    dsReal a[8] = {0, 0.5, 1, 1, 0.25, 0.25, 0, 1}, b[8] = {0, 0, 1, 0.5, 0.25, 0.75, 1, 1};
    dsReal L, g[8];
    CHECK_INT_EQ(ds_loss_mse(a, b, 2, 1, &L, g), DS_OK);
    CHECK_CLOSE(L, (0.25 + 0.25 + 0.25 + 1) / 8, 1e-15, 0);
    CHECK_CLOSE(g[1], 2 * 0.5 / 8, 1e-15, 0);
    CHECK_CLOSE(g[6], -2.0 / 8, 1e-15, 0);
    CHECK_INT_EQ(ds_loss_l1(a, b, 2, 1, &L, g), DS_OK);
    CHECK_CLOSE(L, (0.5 + 0.5 + 0.5 + 1) / 8, 1e-15, 0);
    CHECK(g[0] == 0);
    CHECK_CLOSE(g[5], -1.0 / 8, 1e-15, 0);
    CHECK_INT_EQ(ds_loss_mse(NULL, b, 2, 1, &L, g), DS_ERR_INVALID);
    CHECK_INT_EQ(ds_loss_l1(a, b, 0, 1, &L, g), DS_ERR_INVALID);
  }

  /* D-SSIM of an image with itself is 0 and its gradient vanishes */
  {
    int w = 12, h = 9, n = w * h * 4, i;
    dsReal* a = (dsReal*)malloc(sizeof(dsReal) * n);
    dsReal* g = (dsReal*)malloc(sizeof(dsReal) * n);
    dsReal L;
    double gmax = 0;
    for (i = 0; i < n; i++) a[i] = (dsReal)urand();
    def = ds_default_loss_def();
    def.kind = DS_LOSS_DSSIM;
    CHECK_INT_EQ(ds_image_loss_create(&obj, &def, w, h), DS_OK);
    CHECK_INT_EQ(ds_image_loss_eval(obj, a, a, &L, g), DS_OK);
    CHECK_CLOSE(L, 0, 0, 1e-14);
    for (i = 0; i < n; i++) gmax = fmax(gmax, fabs(g[i]));
    CHECK(gmax < 1e-12);
    /* a constant offset lowers SSIM: loss in (0, 1] */
    for (i = 0; i < n; i++) g[i] = a[i] * (dsReal)0.5;
    CHECK_INT_EQ(ds_image_loss_eval(obj, a, g, &L, NULL), DS_OK);
    CHECK(L > 0.01 && L <= 1);
    ds_image_loss_destroy(obj);
    free(a), free(g);
  }

  /* gradients vs finite differences (odd sizes exercise pyramid borders) */
  W_ = 7;
  H_ = 5;
  fd_check("mse", fn_mse, NULL, W_, H_);
  fd_check("l1", fn_l1, NULL, W_, H_);
  def = ds_default_loss_def();
  def.kind = DS_LOSS_DSSIM;
  {
    /* an invalid definition: the field is named with its expected value */
    char msg[256];
    dsLossDef bad = ds_default_loss_def();
    dsImageLoss* nobj = NULL;
    bad.levels = 0;
    CHECK_INT_EQ(ds_image_loss_create(&nobj, &bad, 8, 8), DS_ERR_INVALID);
    CHECK_INT_EQ(ds_image_loss_check(&bad, 8, 8, msg, sizeof msg), DS_ERR_INVALID);
    CHECK_STR_CONTAINS(msg, "image loss: levels: expected 1 to 8, got 0");
    bad = ds_default_loss_def();
    bad.moments_weight = -2;
    CHECK_INT_EQ(ds_image_loss_check(&bad, 8, 8, msg, sizeof msg), DS_ERR_INVALID);
    CHECK_STR_CONTAINS(msg, "image loss: moments_weight: expected a finite number >= 0, got -2");
    CHECK_INT_EQ(ds_image_loss_check(&def, 8, 8, msg, sizeof msg), DS_OK);
  }
  CHECK_INT_EQ(ds_image_loss_create(&obj, &def, 13, 11), DS_OK);
  fd_check("dssim", fn_obj, obj, 13, 11);
  ds_image_loss_destroy(obj);
  def = ds_default_loss_def();
  def.kind = DS_LOSS_MSE;
  def.levels = 4;
  def.weights[0] = 1;
  def.weights[1] = 0.5;
  def.weights[2] = 2;
  def.weights[3] = 3;
  CHECK_INT_EQ(ds_image_loss_create(&obj, &def, 15, 10), DS_OK);
  fd_check("multiscale mse", fn_obj, obj, 15, 10);
  ds_image_loss_destroy(obj);
  def.kind = DS_LOSS_DSSIM;
  def.levels = 3;
  CHECK_INT_EQ(ds_image_loss_create(&obj, &def, 14, 9), DS_OK);
  fd_check("multiscale dssim", fn_obj, obj, 14, 9);
  ds_image_loss_destroy(obj);
  def.kind = DS_LOSS_L1;
  def.levels = 2;
  CHECK_INT_EQ(ds_image_loss_create(&obj, &def, 9, 9), DS_OK);
  fd_check("multiscale l1", fn_obj, obj, 9, 9);
  ds_image_loss_destroy(obj);
  /* the alpha-moments term, alone and on top of a multi-scale MSE */
  def = ds_default_loss_def();
  def.weights[0] = 0;
  def.moments_weight = 3;
  CHECK_INT_EQ(ds_image_loss_create(&obj, &def, 11, 7), DS_OK);
  fd_check("moments", fn_obj, obj, 11, 7);
  ds_image_loss_destroy(obj);
  def = ds_default_loss_def();
  def.levels = 3;
  def.moments_weight = (dsReal)0.7;
  def.moments_size = (dsReal)0.3;
  CHECK_INT_EQ(ds_image_loss_create(&obj, &def, 10, 9), DS_OK);
  fd_check("multiscale mse + moments", fn_obj, obj, 10, 9);
  ds_image_loss_destroy(obj);
  /* degenerate: nothing visible in either image (alpha 0): the term is 0
   * with a finite gradient that matches finite differences */
  {
    int w = 6, h = 5, n = w * h * 4, i;
    dsReal a[120], b[120], g[120], L, lp, lm;
    memset(a, 0, sizeof a);
    memset(b, 0, sizeof b);
    def = ds_default_loss_def();
    def.weights[0] = 0;
    def.moments_weight = 1;
    b[4 * (2 * w + 5) + 3] = 1; /* goal: one opaque pixel at the right */
    CHECK_INT_EQ(ds_image_loss_create(&obj, &def, w, h), DS_OK);
    CHECK_INT_EQ(ds_image_loss_eval(obj, a, b, &L, g), DS_OK);
    CHECK(isfinite(L) && L > 0);
    for (i = 3; i < n; i += 4) {
      const dsReal hh = (dsReal)1e-7;
      a[i] = hh;
      ds_image_loss_eval(obj, a, b, &lp, NULL);
      a[i] = -hh;
      ds_image_loss_eval(obj, a, b, &lm, NULL);
      a[i] = 0;
      CHECK_CLOSE(g[i], ((double)lp - (double)lm) / (2 * hh), 1e-5, 1e-6);
    }
    for (i = 0; i < n; i++)
      if (i % 4 != 3) CHECK(g[i] == 0);
    ds_image_loss_destroy(obj);
  }

  /* single-scale MSE with level 0 only equals ds_loss_mse */
  {
    int n = 6 * 5 * 4, i;
    dsReal a[120], b[120], g1[120], g2[120], L1, L2;
    for (i = 0; i < n; i++) a[i] = (dsReal)urand(), b[i] = (dsReal)urand();
    def = ds_default_loss_def();
    CHECK_INT_EQ(ds_image_loss_create(&obj, &def, 6, 5), DS_OK);
    CHECK_INT_EQ(ds_image_loss_eval(obj, a, b, &L1, g1), DS_OK);
    ds_loss_mse(a, b, 6, 5, &L2, g2);
    CHECK_CLOSE(L1, L2, 1e-14, 0);
    for (i = 0; i < n; i++) CHECK_CLOSE(g1[i], g2[i], 1e-14, 1e-300);
    ds_image_loss_destroy(obj);
  }

  /* invalid definitions */
  def = ds_default_loss_def();
  def.levels = 0;
  CHECK_INT_EQ(ds_image_loss_create(&obj, &def, 8, 8), DS_ERR_INVALID);
  def.levels = DS_LOSS_MAX_LEVELS + 1;
  CHECK_INT_EQ(ds_image_loss_create(&obj, &def, 8, 8), DS_ERR_INVALID);
  def = ds_default_loss_def();
  def.kind = 7;
  CHECK_INT_EQ(ds_image_loss_create(&obj, &def, 8, 8), DS_ERR_INVALID);
  CHECK(obj == NULL);
  def = ds_default_loss_def();
  def.moments_weight = -1;
  CHECK_INT_EQ(ds_image_loss_create(&obj, &def, 8, 8), DS_ERR_INVALID);
  def.moments_weight = (dsReal)NAN;
  CHECK_INT_EQ(ds_image_loss_create(&obj, &def, 8, 8), DS_ERR_INVALID);
  def.moments_weight = 1;
  def.moments_size = -1;
  CHECK_INT_EQ(ds_image_loss_create(&obj, &def, 8, 8), DS_ERR_INVALID);
  CHECK(obj == NULL);

  /* evaluation allocates nothing */
  {
    int w = 32, h = 32, n = w * h * 4, i;
    dsReal* a = (dsReal*)malloc(sizeof(dsReal) * n);
    dsReal* g = (dsReal*)malloc(sizeof(dsReal) * n);
    dsReal L;
    for (i = 0; i < n; i++) a[i] = (dsReal)urand();
    def = ds_default_loss_def();
    def.kind = DS_LOSS_DSSIM;
    def.levels = 3;
    CHECK_INT_EQ(ds_image_loss_create(&obj, &def, w, h), DS_OK);
    CHECK_INT_EQ(ds_replace_allocator(count_malloc, count_realloc, count_calloc, free), DS_OK);
    g_nalloc = 0;
    for (i = 0; i < n; i++) g[i] = (dsReal)urand();
    CHECK_INT_EQ(ds_image_loss_eval(obj, a, g, &L, g), DS_OK);
    CHECK_INT_EQ(g_nalloc, 0);
    ds_replace_allocator(NULL, NULL, NULL, NULL);
    ds_image_loss_destroy(obj);
    free(a), free(g);
  }

  /* basin: a square 8 px wide moves toward its goal 30 px away. Without
   * overlap the single-scale MSE is flat (no gradient signal); the
   * multi-scale loss decreases at every step. */
  {
    int w = 64, h = 32, x, flat = 1, mono = 1;
    dsReal *a = (dsReal*)malloc(sizeof(dsReal) * w * h * 4), *goal = (dsReal*)malloc(sizeof(dsReal) * w * h * 4);
    dsReal Lms, Lprev = 1e30, Lmse, Lmse0 = -1;
    dsImageLoss* ms = NULL;
    def = ds_default_loss_def();
    def.levels = 6;
    CHECK_INT_EQ(ds_image_loss_create(&ms, &def, w, h), DS_OK);
    square(goal, w, h, 44, 8);
    for (x = 6; x <= 30; x += 4) {
      square(a, w, h, x, 8);
      ds_image_loss_eval(ms, a, goal, &Lms, NULL);
      ds_loss_mse(a, goal, w, h, &Lmse, NULL);
      if (Lmse0 < 0) Lmse0 = Lmse;
      if (Lmse != Lmse0) flat = 0;
      if (!(Lms < Lprev)) mono = 0;
      Lprev = Lms;
    }
    CHECK(flat);
    CHECK(mono);
    ds_image_loss_destroy(ms);
    /* the moments term falls at every step toward the goal, from where
     * the per-pixel losses are flat, down to 0 on it */
    def = ds_default_loss_def();
    def.weights[0] = 0;
    def.moments_weight = 1;
    CHECK_INT_EQ(ds_image_loss_create(&ms, &def, w, h), DS_OK);
    mono = 1;
    Lprev = 1e30;
    for (x = 6; x <= 44; x += 2) {
      square(a, w, h, x, 8);
      ds_image_loss_eval(ms, a, goal, &Lms, NULL);
      if (!(Lms < Lprev)) mono = 0;
      Lprev = Lms;
    }
    CHECK(mono);
    CHECK_CLOSE(Lprev, 0, 0, 1e-12); /* on the goal */
    ds_image_loss_destroy(ms);
    free(a), free(goal);
  }
  return DST_RESULT();
}
