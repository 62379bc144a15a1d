/* Soft rasterizer adjoint vs central finite differences: every vertex
 * coordinate and every colour component of small random meshes (faces
 * crossing tile borders, faces partly behind others), perspective and
 * orthographic, flat and per-vertex colours, with supersampling, and the
 * camera (eye, target, up, field of view / orthographic height), and the
 * premultiplied colour output (dsRenderSettings.premultiplied), and the
 * lights (ambient, directional, light_dir; check_light). The loss is
 * L = sum_p R_p image_p with random R, so dL/d(image) = R. Each comparison is
 * also run on a deliberately perturbed adjoint, which must be rejected. */
#include "config.h"

#include <stdint.h>

#include "dsim/raster.h"
#include "tests/dstest.h"

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static double urand(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (double)(g_rng >> 11) / 9007199254740992.0;
}
static double urange(double a, double b) { return a + (b - a) * urand(); }

#define NV 12
#define NF 9

typedef struct Case {
  const char* name;
  dsRenderSettings s;
  dsReal verts[NV * 3];
  int faces[NF * 3];
  dsReal colors[NV * 3]; /* NF*3 used in face mode */
  int mode;
  dsReal* R;             /* dL/d(image) weights */
} Case;

static double loss_of(dsRaster* r, const Case* c, dsReal* img) {
  dsRasterMesh m = {c->verts, NV, c->faces, NF, c->colors, c->mode};
  size_t n = (size_t)c->s.width * c->s.height * 4, i;
  double L = 0;
  if (ds_raster_render(r, &m, img) != DS_OK) return NAN;
  for (i = 0; i < n; i++) L += (double)c->R[i] * img[i];
  return L;
}

/* Number of components where |fd - an| > atol + rtol |fd|, atol relative to
 * the largest analytic component; prints the first few. */
static int compare(const char* what, const double* fd, const double* an, int n, int verbose) {
  double scale = 0;
  int i, bad = 0;
  double worst = 0;
  for (i = 0; i < n; i++) scale = fmax(scale, fabs(an[i]));
  for (i = 0; i < n; i++) worst = fmax(worst, fabs(fd[i] - an[i]) / scale);
  if (verbose) fprintf(stderr, "  %s: max |fd - analytic| / max|analytic| = %.3g (max %.3g)\n", what, worst, scale);
  for (i = 0; i < n; i++) {
    double tol = 1e-7 * scale + 1e-6 * fabs(fd[i]);
    if (!(fabs(fd[i] - an[i]) <= tol)) {
      if (verbose && bad < 5)
        fprintf(stderr, "  %s[%d]: fd %.10g analytic %.10g (diff %.3g, tol %.3g)\n", what, i, fd[i],
                an[i], fabs(fd[i] - an[i]), tol);
      bad++;
    }
  }
  return bad;
}

static void check_case(Case* c) {
  dsRaster* r = NULL;
  int W = c->s.width, H = c->s.height, i;
  int nc = (c->mode == DS_COLOR_VERTEX ? NV : NF) * 3;
  size_t n = (size_t)W * H * 4;
  dsReal* img = (dsReal*)malloc(n * sizeof(dsReal));
  dsReal gv[NV * 3], gc[NV * 3], gv2[NV * 3], gc2[NV * 3];
  double fdv[NV * 3], fdc[NV * 3], anv[NV * 3], anc[NV * 3];
  dsRasterMesh m = {c->verts, NV, c->faces, NF, c->colors, c->mode};
  int rc;
  const double h = 1e-6;

  c->R = (dsReal*)malloc(n * sizeof(dsReal));
  for (i = 0; i < (int)n; i++) c->R[i] = (dsReal)urange(-1, 1);
  CHECK_INT_EQ(ds_raster_create(&r, &c->s, NF, NV), DS_OK);
  if (!r) return;
  /* the image covers some pixels partly (coverage strictly between 0 and 1) */
  loss_of(r, c, img);
  {
    int partial = 0, covered = 0;
    for (i = 0; i < W * H; i++) {
      partial += img[4 * i + 3] > 0.01 && img[4 * i + 3] < 0.99;
      covered += img[4 * i + 3] > 0.99;
    }
    fprintf(stderr, "%s: %d partial, %d covered of %d pixels\n", c->name, partial, covered, W * H);
    CHECK(partial > 10);
    CHECK(covered > 10);
  }

  memset(gv, 0, sizeof gv);
  memset(gc, 0, sizeof gc);
  rc = ds_raster_backward(r, &m, c->R, gv, gc);
  CHECK_INT_EQ(rc, DS_OK);
  /* accumulation: a second backward adds the same again */
  memcpy(gv2, gv, sizeof gv);
  memcpy(gc2, gc, sizeof gc);
  CHECK_INT_EQ(ds_raster_backward(r, &m, c->R, gv2, gc2), DS_OK);
  for (i = 0; i < NV * 3; i++) CHECK_CLOSE(gv2[i], 2 * gv[i], 1e-13, 1e-300);
  for (i = 0; i < nc; i++) CHECK_CLOSE(gc2[i], 2 * gc[i], 1e-13, 1e-300);
  /* re-render contract: identical bits */
  memset(gv2, 0, sizeof gv2);
  memset(gc2, 0, sizeof gc2);
  CHECK_INT_EQ(ds_raster_render_backward(r, &m, c->R, gv2, gc2), DS_OK);
  CHECK(memcmp(gv, gv2, sizeof gv) == 0);
  CHECK(memcmp(gc, gc2, nc * sizeof(dsReal)) == 0);

  for (i = 0; i < NV * 3; i++) {
    dsReal v0 = c->verts[i];
    double lp, lm;
    c->verts[i] = v0 + h;
    lp = loss_of(r, c, img);
    c->verts[i] = v0 - h;
    lm = loss_of(r, c, img);
    c->verts[i] = v0;
    fdv[i] = (lp - lm) / (2 * h);
    anv[i] = gv[i];
  }
  for (i = 0; i < nc; i++) {
    dsReal v0 = c->colors[i];
    double lp, lm;
    c->colors[i] = v0 + h;
    lp = loss_of(r, c, img);
    c->colors[i] = v0 - h;
    lm = loss_of(r, c, img);
    c->colors[i] = v0;
    fdc[i] = (lp - lm) / (2 * h);
    anc[i] = gc[i];
  }
  {
    int bv = compare("d_verts", fdv, anv, NV * 3, 1), bc = compare("d_colors", fdc, anc, nc, 1);
    int imax = 0, cmax = 0;
    if (bv || bc) fprintf(stderr, "%s: %d vertex and %d colour mismatches\n", c->name, bv, bc);
    CHECK_INT_EQ(bv, 0);
    CHECK_INT_EQ(bc, 0);
    /* perturbed adjoints are rejected: largest component x1.01, or one colour
     * component's sign flipped */
    for (i = 0; i < NV * 3; i++)
      if (fabs(anv[i]) > fabs(anv[imax])) imax = i;
    for (i = 0; i < nc; i++)
      if (fabs(anc[i]) > fabs(anc[cmax])) cmax = i;
    CHECK(fabs(anv[imax]) > 0);
    anv[imax] *= 1.01;
    CHECK(compare("perturbed d_verts", fdv, anv, NV * 3, 0) > 0);
    anc[cmax] = -anc[cmax];
    CHECK(compare("perturbed d_colors", fdc, anc, nc, 0) > 0);
    /* and a vertex gradient in a single small component: x1.01 on each of
     * them must be caught whenever the component is not tiny */
    anv[imax] /= 1.01;
    {
      int caught = 0, tried = 0;
      for (i = 0; i < NV * 3; i++) {
        double keep = anv[i];
        if (fabs(keep) < 0.05 * fabs(anv[imax])) continue;
        tried++;
        anv[i] = keep * 1.01;
        caught += compare("x", fdv, anv, NV * 3, 0) > 0;
        anv[i] = keep;
      }
      CHECK(tried > 5);
      CHECK_INT_EQ(caught, tried);
    }
  }
  /* camera: eye, at, up and fov (perspective) or ortho_height */
  {
    dsCamera dc, cam = c->s.camera;
    dsReal* fields[10];
    double fdc2[10], anc2[10];
    int nf = 0, imax = 0;
    memset(&dc, 0, sizeof dc);
    CHECK_INT_EQ(ds_raster_set_camera(r, &cam), DS_OK);
    loss_of(r, c, img);
    CHECK_INT_EQ(ds_raster_backward_camera(r, &m, c->R, NULL, NULL, &dc), DS_OK);
    for (i = 0; i < 3; i++) {
      fields[nf] = &cam.eye[i], anc2[nf++] = dc.eye[i];
      fields[nf] = &cam.at[i], anc2[nf++] = dc.at[i];
      fields[nf] = &cam.up[i], anc2[nf++] = dc.up[i];
    }
    if (cam.orthographic)
      fields[nf] = &cam.ortho_height, anc2[nf++] = dc.ortho_height;
    else
      fields[nf] = &cam.fov_deg, anc2[nf++] = dc.fov_deg;
    for (i = 0; i < nf; i++) {
      dsReal v0 = *fields[i];
      double lp, lm;
      *fields[i] = v0 + h;
      ds_raster_set_camera(r, &cam);
      lp = loss_of(r, c, img);
      *fields[i] = v0 - h;
      ds_raster_set_camera(r, &cam);
      lm = loss_of(r, c, img);
      *fields[i] = v0;
      fdc2[i] = (lp - lm) / (2 * h);
    }
    ds_raster_set_camera(r, &cam);
    CHECK_INT_EQ(compare("d_camera", fdc2, anc2, nf, 1), 0);
    for (i = 0; i < nf; i++)
      if (fabs(anc2[i]) > fabs(anc2[imax])) imax = i;
    anc2[imax] *= 1.01;
    CHECK(compare("perturbed d_camera", fdc2, anc2, nf, 0) > 0);
    anc2[imax] /= 1.01;
    anc2[nf - 1] *= -1; /* fov / ortho height sign flipped */
    CHECK(compare("perturbed d_camera", fdc2, anc2, nf, 0) > 0);
  }
  ds_raster_destroy(r);
  free(img);
  free(c->R);
}

/* premultiplied = 1 at supersample k is, per output pixel, the mean of
 * alpha rgb over the k x k pixels of the same scene rendered without
 * supersampling at k times the size (the same sample positions); its alpha
 * is the unpremultiplied render's. Also: a renderer refuses premultiplied 2. */
static void check_premultiplied(const Case* c) {
  const int W = c->s.width, H = c->s.height, k = c->s.supersample;
  dsRasterMesh m = {c->verts, NV, c->faces, NF, c->colors, c->mode};
  dsRenderSettings fine = c->s, plain = c->s, bad = c->s;
  dsRaster *rp = NULL, *rf = NULL, *rn = NULL, *rb = NULL;
  dsReal* img = (dsReal*)malloc((size_t)W * H * 4 * sizeof(dsReal));
  dsReal* ref = (dsReal*)malloc((size_t)W * H * 4 * sizeof(dsReal));
  dsReal* big = (dsReal*)malloc((size_t)W * H * k * k * 4 * sizeof(dsReal));
  double worst = 0, moved = 0;
  fine.width = W * k;
  fine.height = H * k;
  fine.supersample = 1;
  fine.premultiplied = 0;
  plain.premultiplied = 0;
  bad.premultiplied = 2;
  CHECK_INT_EQ(ds_raster_create(&rb, &bad, NF, NV), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_raster_create(&rp, &c->s, NF, NV), DS_OK);
  CHECK_INT_EQ(ds_raster_create(&rf, &fine, NF, NV), DS_OK);
  CHECK_INT_EQ(ds_raster_create(&rn, &plain, NF, NV), DS_OK);
  if (!rp || !rf || !rn) return;
  CHECK_INT_EQ(ds_raster_render(rp, &m, img), DS_OK);
  CHECK_INT_EQ(ds_raster_render(rf, &m, big), DS_OK);
  CHECK_INT_EQ(ds_raster_render(rn, &m, ref), DS_OK);
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) {
      double acc[4] = {0, 0, 0, 0};
      for (int a = 0; a < k; a++)
        for (int b = 0; b < k; b++) {
          const dsReal* q = big + 4 * ((size_t)(y * k + a) * W * k + (size_t)(x * k + b));
          for (int ch = 0; ch < 3; ch++) acc[ch] += (double)q[3] * q[ch];
          acc[3] += q[3];
        }
      const dsReal* o = img + 4 * ((size_t)y * W + x);
      for (int ch = 0; ch < 4; ch++) worst = fmax(worst, fabs(o[ch] - acc[ch] / (k * k)));
      for (int ch = 0; ch < 3; ch++) moved = fmax(moved, fabs(o[ch] - ref[4 * ((size_t)y * W + x) + ch]));
      CHECK(o[3] == ref[4 * ((size_t)y * W + x) + 3]);
    }
  fprintf(stderr, "%s: max |premultiplied - mean alpha rgb| = %.3g (%.3g from the plain rgb)\n", c->name, worst, moved);
  CHECK(worst < 1e-12);
  CHECK(moved > 0.05);
  ds_raster_destroy(rp);
  ds_raster_destroy(rf);
  ds_raster_destroy(rn);
  free(img);
  free(ref);
  free(big);
}

/* central differences of the loss in the first n settings fields */
static void light_fd(dsRaster* r, const Case* c, dsReal* img, dsRenderSettings* s, dsReal* const* fields, int n,
                     double h, double* fd) {
  for (int i = 0; i < n; i++) {
    const dsReal v0 = *fields[i];
    *fields[i] = v0 + h;
    ds_raster_set_settings(r, s);
    const double lp = loss_of(r, c, img);
    *fields[i] = v0 - h;
    ds_raster_set_settings(r, s);
    const double lm = loss_of(r, c, img);
    *fields[i] = v0;
    fd[i] = (lp - lm) / (2 * h);
  }
  ds_raster_set_settings(r, s);
}

/* The light adjoint (ds_raster_backward_light): dL/d ambient, directional
 * and light_dir (the raw direction, through its normalisation) against
 * central differences, on a mesh with faces on both sides of the
 * max(0, s n.l) kink: every face's |s n_u . l| is checked to stay above
 * 1e-3, so a step of 1e-6 never crosses it. Rejections: the largest
 * component x1.01, the ambient's sign flipped, and (one at a time) each
 * light_dir component x1.01. */
/* Faces lit by direction l (s n_u . l > 0, s turning the normal toward the
 * camera), faces turned away, and the smallest |s n_u . l|. */
static void light_split(const Case* c, const dsReal l[3], int* lit, int* unlit, double* mincos) {
  const dsCamera* cam = &c->s.camera;
  double ln = sqrt((double)l[0] * l[0] + (double)l[1] * l[1] + (double)l[2] * l[2]);
  int i, k;
  *lit = *unlit = 0;
  *mincos = 1;
  for (i = 0; i < NF; i++) {
    const dsReal *p0 = c->verts + 3 * c->faces[3 * i], *p1 = c->verts + 3 * c->faces[3 * i + 1],
                 *p2 = c->verts + 3 * c->faces[3 * i + 2];
    double e1[3], e2[3], nv[3], view[3], nn, sv = 0, cl = 0;
    for (k = 0; k < 3; k++) e1[k] = p1[k] - p0[k], e2[k] = p2[k] - p0[k];
    nv[0] = e1[1] * e2[2] - e1[2] * e2[1];
    nv[1] = e1[2] * e2[0] - e1[0] * e2[2];
    nv[2] = e1[0] * e2[1] - e1[1] * e2[0];
    nn = sqrt(nv[0] * nv[0] + nv[1] * nv[1] + nv[2] * nv[2]);
    for (k = 0; k < 3; k++)
      view[k] = cam->orthographic ? cam->eye[k] - cam->at[k] : cam->eye[k] - (p0[k] + p1[k] + p2[k]) / 3.0;
    for (k = 0; k < 3; k++) sv += nv[k] * view[k], cl += nv[k] * l[k];
    cl = (sv >= 0 ? 1 : -1) * cl / (nn * ln);
    *lit += cl > 0;
    *unlit += cl < 0;
    *mincos = fmin(*mincos, fabs(cl));
  }
}

/* The light adjoint (ds_raster_backward_light): dL/d ambient, directional
 * and light_dir (the raw direction, through its normalisation) against
 * central differences, on a mesh with faces on both sides of the
 * max(0, s n.l) kink (the case's light_dir, or the first of a few others
 * that splits the faces so): every face's |s n_u . l| is checked to stay
 * above 1e-3, so a step of 1e-6 never crosses the kink. Rejections: the
 * largest component x1.01, the ambient's sign flipped, and (one at a time)
 * each light_dir component x1.01. */
static void check_light(Case* c) {
  static const double cand[5][3] = {{1, 0.2, 0.3}, {-1, 0.3, 0.2}, {0.3, -0.2, 1}, {0.2, 1, -0.1}, {-0.5, -1, 0.4}};
  const int W = c->s.width, H = c->s.height;
  const size_t n = (size_t)W * H * 4;
  const double h = 1e-6;
  dsRasterMesh m = {c->verts, NV, c->faces, NF, c->colors, c->mode};
  dsRenderSettings s = c->s, dl;
  dsRaster* r = NULL;
  dsReal* img = (dsReal*)malloc(n * sizeof(dsReal));
  dsReal* fields[5] = {&s.ambient, &s.directional, &s.light_dir[0], &s.light_dir[1], &s.light_dir[2]};
  double fd[5], an[5], ln = 0, dotl = 0;
  int i, k, lit = 0, unlit = 0;
  double mincos = 1;
  c->R = (dsReal*)malloc(n * sizeof(dsReal));
  for (i = 0; i < (int)n; i++) c->R[i] = (dsReal)urange(-1, 1);
  light_split(c, s.light_dir, &lit, &unlit, &mincos);
  for (i = 0; i < 5 && !(lit >= 2 && unlit >= 2 && mincos > 1e-3); i++) {
    for (k = 0; k < 3; k++) s.light_dir[k] = (dsReal)cand[i][k];
    light_split(c, s.light_dir, &lit, &unlit, &mincos);
  }
  for (k = 0; k < 3; k++) ln += (double)s.light_dir[k] * s.light_dir[k];
  ln = sqrt(ln);
  fprintf(stderr, "%s: light (%g, %g, %g): %d faces lit, %d turned away, min |s n.l| %.3g\n", c->name,
          (double)s.light_dir[0], (double)s.light_dir[1], (double)s.light_dir[2], lit, unlit, mincos);
  CHECK(lit >= 2);
  CHECK(unlit >= 2);
  CHECK(mincos > 1e-3);
  CHECK_INT_EQ(ds_raster_create(&r, &s, NF, NV), DS_OK);
  if (!r) return;
  memset(&dl, 0, sizeof dl);
  loss_of(r, c, img);
  CHECK_INT_EQ(ds_raster_backward_light(r, &m, c->R, NULL, NULL, NULL, &dl), DS_OK);
  an[0] = dl.ambient, an[1] = dl.directional;
  for (k = 0; k < 3; k++) an[2 + k] = dl.light_dir[k], dotl += dl.light_dir[k] * s.light_dir[k];
  /* a scale of the direction changes nothing: its gradient is orthogonal */
  CHECK(fabs(dotl) <= 1e-12 * (fabs(an[2]) + fabs(an[3]) + fabs(an[4])) * ln);
  light_fd(r, c, img, &s, fields, 5, h, fd);
  CHECK_INT_EQ(compare("d_light", fd, an, 5, 1), 0);
  {
    int imax = 0;
    for (i = 0; i < 5; i++)
      if (fabs(an[i]) > fabs(an[imax])) imax = i;
    an[imax] *= 1.01;
    CHECK(compare("perturbed d_light", fd, an, 5, 0) > 0);
    an[imax] /= 1.01;
    an[0] = -an[0];
    CHECK(compare("perturbed d_light", fd, an, 5, 0) > 0);
    an[0] = -an[0];
    for (i = 2; i < 5; i++) {
      if (fabs(an[i]) < 0.05 * fabs(an[imax])) continue;
      an[i] *= 1.01;
      CHECK(compare("perturbed d_light", fd, an, 5, 0) > 0);
      an[i] /= 1.01;
    }
  }
  /* a headlight: the factors still, no direction */
  for (k = 0; k < 3; k++) s.light_dir[k] = 0;
  ds_raster_set_settings(r, &s);
  memset(&dl, 0, sizeof dl);
  loss_of(r, c, img);
  CHECK_INT_EQ(ds_raster_backward_light(r, &m, c->R, NULL, NULL, NULL, &dl), DS_OK);
  CHECK(dl.ambient != 0 && dl.directional != 0);
  CHECK(dl.light_dir[0] == 0 && dl.light_dir[1] == 0 && dl.light_dir[2] == 0);
  light_fd(r, c, img, &s, fields, 2, h, fd);
  an[0] = dl.ambient, an[1] = dl.directional;
  CHECK_INT_EQ(compare("d_light (headlight)", fd, an, 2, 1), 0);
  ds_raster_destroy(r);
  free(img);
  free(c->R);
}

/* Two large triangles at different depths overlapping on screen (partial
 * occlusion), then random ones. */
static void random_mesh(Case* c) {
  static const double big[6][3] = {{-1.3, -1.0, -0.5}, {1.0, -0.9, -0.45}, {0.1, 1.1, -0.55},
                                   {-0.6, -1.3, 0.5},  {1.4, 0.2, 0.4},    {-0.8, 1.2, 0.6}};
  int i, k;
  for (i = 6; i < NV; i++) {
    c->verts[3 * i] = (dsReal)urange(-1.2, 1.2);
    c->verts[3 * i + 1] = (dsReal)urange(-1.2, 1.2);
    c->verts[3 * i + 2] = (dsReal)urange(-0.8, 0.8);
  }
  for (i = 0; i < 6; i++)
    for (k = 0; k < 3; k++) c->verts[3 * i + k] = (dsReal)(big[i][k] + urange(-0.1, 0.1));
  for (i = 0; i < 2; i++)
    for (k = 0; k < 3; k++) c->faces[3 * i + k] = 3 * i + k;
  for (i = 2; i < NF; i++) {
    int a = (int)(urand() * NV), b, d;
    do b = (int)(urand() * NV); while (b == a);
    do d = (int)(urand() * NV); while (d == a || d == b);
    c->faces[3 * i] = a;
    c->faces[3 * i + 1] = b;
    c->faces[3 * i + 2] = d;
  }
  for (i = 0; i < NV * 3; i++) c->colors[i] = (dsReal)urange(0.1, 0.9);
}

int main(void) {
  Case c;
  if (DS_SINGLE) DST_SKIP("finite-difference checks need double precision");

  /* perspective, flat colours, 2x supersampling: 40 x 40 internal, 9 tiles */
  memset(&c, 0, sizeof c);
  c.name = "perspective/flat/ss2";
  c.s = ds_default_render_settings();
  c.s.width = c.s.height = 20;
  c.s.supersample = 2;
  c.s.sigma = 2e-3;
  c.s.gamma = 5e-2;
  c.s.camera.fov_deg = 45;
  ds_camera_look_at(&c.s.camera, 4, 20, 30);
  c.mode = DS_COLOR_FACE;
  random_mesh(&c);
  check_case(&c);

  /* perspective, per-vertex colours, non-square, light from an oblique
   * direction, grey background with some alpha */
  memset(&c, 0, sizeof c);
  c.name = "perspective/vertex/24x18";
  c.s = ds_default_render_settings();
  c.s.width = 24;
  c.s.height = 18;
  c.s.supersample = 1;
  c.s.sigma = 1e-3;
  c.s.gamma = 2e-2;
  c.s.background[0] = 0.2;
  c.s.background[1] = 0.3;
  c.s.background[2] = 0.4;
  c.s.background[3] = 0.25;
  c.s.light_dir[0] = 0.3;
  c.s.light_dir[1] = 1;
  c.s.light_dir[2] = -0.5;
  c.s.camera.fov_deg = 50;
  ds_camera_look_at(&c.s.camera, 3.5, -15, -40);
  c.mode = DS_COLOR_VERTEX;
  random_mesh(&c);
  check_case(&c);

  /* orthographic, flat colours, supersampling 3 */
  memset(&c, 0, sizeof c);
  c.name = "ortho/flat/ss3";
  c.s = ds_default_render_settings();
  c.s.width = c.s.height = 14;
  c.s.supersample = 3;
  c.s.sigma = 3e-3;
  c.s.gamma = 3e-2;
  c.s.camera.orthographic = 1;
  c.s.camera.ortho_height = 1.5;
  ds_camera_look_at(&c.s.camera, 6, 35, 10);
  c.mode = DS_COLOR_FACE;
  random_mesh(&c);
  check_case(&c);

  /* orthographic, per-vertex colours */
  memset(&c, 0, sizeof c);
  c.name = "ortho/vertex";
  c.s = ds_default_render_settings();
  c.s.width = c.s.height = 16;
  c.s.supersample = 2;
  c.s.sigma = 2e-3;
  c.s.gamma = 1e-1;
  c.s.camera.orthographic = 1;
  c.s.camera.ortho_height = 1.4;
  ds_camera_look_at(&c.s.camera, 5, 60, 120);
  c.mode = DS_COLOR_VERTEX;
  random_mesh(&c);
  check_case(&c);

  /* larger image: the two big triangles span more than 16 tiles and take
   * the renderer's big-face path */
  memset(&c, 0, sizeof c);
  c.name = "perspective/flat/big faces";
  c.s = ds_default_render_settings();
  c.s.width = c.s.height = 96;
  c.s.supersample = 2;
  c.s.sigma = 1e-3;
  c.s.gamma = 5e-2;
  c.s.camera.fov_deg = 45;
  ds_camera_look_at(&c.s.camera, 4, 20, 30);
  c.mode = DS_COLOR_FACE;
  random_mesh(&c);
  check_case(&c);

  /* premultiplied colour: the forward against its definition, then the
   * adjoint (flat, grey background with alpha so that the background's
   * samples carry alpha_bg C_bg; per-vertex colours at 3 x 3) */
  memset(&c, 0, sizeof c);
  c.name = "premultiplied/flat/ss2";
  c.s = ds_default_render_settings();
  c.s.width = c.s.height = 20;
  c.s.supersample = 2;
  c.s.sigma = 2e-3;
  c.s.gamma = 5e-2;
  c.s.background[0] = 0.6;
  c.s.background[1] = 0.5;
  c.s.background[2] = 0.2;
  c.s.background[3] = 0.3;
  c.s.premultiplied = 1;
  c.s.camera.fov_deg = 45;
  ds_camera_look_at(&c.s.camera, 4, 20, 30);
  c.mode = DS_COLOR_FACE;
  random_mesh(&c);
  check_premultiplied(&c);
  check_case(&c);

  memset(&c, 0, sizeof c);
  c.name = "premultiplied/vertex/ss3";
  c.s = ds_default_render_settings();
  c.s.width = 16;
  c.s.height = 12;
  c.s.supersample = 3;
  c.s.sigma = 1e-3;
  c.s.gamma = 3e-2;
  c.s.light_dir[0] = -0.4;
  c.s.light_dir[1] = 1;
  c.s.light_dir[2] = -0.5;
  c.s.premultiplied = 1;
  c.s.camera.fov_deg = 50;
  ds_camera_look_at(&c.s.camera, 3.5, 25, -30);
  c.mode = DS_COLOR_VERTEX;
  random_mesh(&c);
  check_premultiplied(&c);
  check_case(&c);

  /* the light adjoint: flat and per-vertex colours, perspective and
   * orthographic, each with an oblique light that some faces turn from */
  memset(&c, 0, sizeof c);
  c.name = "light/perspective/flat/ss2";
  c.s = ds_default_render_settings();
  c.s.width = c.s.height = 20;
  c.s.supersample = 2;
  c.s.sigma = 2e-3;
  c.s.gamma = 5e-2;
  c.s.ambient = 0.3;
  c.s.directional = 0.8;
  c.s.light_dir[0] = -0.4;
  c.s.light_dir[1] = 1;
  c.s.light_dir[2] = -0.5;
  c.s.camera.fov_deg = 45;
  ds_camera_look_at(&c.s.camera, 4, 20, 30);
  c.mode = DS_COLOR_FACE;
  random_mesh(&c);
  check_light(&c);

  memset(&c, 0, sizeof c);
  c.name = "light/perspective/vertex/premultiplied";
  c.s = ds_default_render_settings();
  c.s.width = 24;
  c.s.height = 18;
  c.s.supersample = 2;
  c.s.sigma = 1e-3;
  c.s.gamma = 2e-2;
  c.s.ambient = 0.2;
  c.s.directional = 1.1;
  c.s.light_dir[0] = 0.5;
  c.s.light_dir[1] = 0.7;
  c.s.light_dir[2] = 0.4;
  c.s.premultiplied = 1;
  c.s.camera.fov_deg = 50;
  ds_camera_look_at(&c.s.camera, 3.5, -15, -40);
  c.mode = DS_COLOR_VERTEX;
  random_mesh(&c);
  check_light(&c);

  memset(&c, 0, sizeof c);
  c.name = "light/ortho/flat";
  c.s = ds_default_render_settings();
  c.s.width = c.s.height = 16;
  c.s.supersample = 2;
  c.s.sigma = 2e-3;
  c.s.gamma = 1e-1;
  c.s.ambient = 0.4;
  c.s.directional = 0.6;
  c.s.light_dir[0] = 0.2;
  c.s.light_dir[1] = -1;
  c.s.light_dir[2] = 0.3;
  c.s.camera.orthographic = 1;
  c.s.camera.ortho_height = 1.4;
  ds_camera_look_at(&c.s.camera, 5, 60, 120);
  c.mode = DS_COLOR_FACE;
  random_mesh(&c);
  check_light(&c);

  return DST_RESULT();
}
