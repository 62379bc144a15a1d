/* System identification from video (dsim/sysid.h): the episode, the loss
 * against the video's frames, the gradient through the env's adjoints and
 * the reparameterisation, and the optimisers. Only the env API below. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dsim/batch.h"
#include "dsim/controller.h"
#include "dsim/sysid.h"
#include "base/internal.h"
#include "base/rng.h"
#include "controllers/sysid_field.h"
#include "controllers/sysid_views.h"
#include "io/cfg.h"

/* ---- definition and config keys --------------------------------------------- */
/* L-BFGS's default stop on the loss: round-off of its start (sysid.loss_tolerance) */
#define SYSID_LOSS_TOL 1e-15

dsSysidDef ds_default_sysid_def(void) {
  dsSysidDef d;
  memset(&d, 0, sizeof d);
  for (int p = 0; p < DS_SYSID_MAX_PARAMS; p++) {
    d.params[p].lower = (dsReal)-1e30;
    d.params[p].upper = (dsReal)1e30;
    d.params[p].tv_eps = 1e-3;
  }
  d.optimizer = DS_SYSID_ADAM;
  d.lr = 0.05;
  d.momentum = 0.9;
  d.lbfgs_memory = 8;
  d.iterations = 60;
  d.loss_tolerance = SYSID_LOSS_TOL;
  d.video = DS_SYSID_SYNTHETIC;
  d.camsim.cam = ds_default_camsim_def();
  d.camsim.fit_gain = 1;
  d.camsim.image_weight = 1;
  d.camsim.mask_threshold = 0.1;
  d.frames = DS_SYSID_FRAMES_ALL;
  d.seed = 0;
  return d;
}

#define O(f) offsetof(dsSysidDef, f)
#define PO(k, f) (offsetof(dsSysidDef, params) + (k) * sizeof(dsSysidParam) + offsetof(dsSysidParam, f))
#define PARAM_KEYS(k, s)                                                                                              \
  {"param" s ".name", DS_KEY_STRING, PO(k, name), 0, DS_SYSID_NAME_MAX, NULL, 0,                                   \
   "engine parameter name (particle.mass, tet.k_mu, initial_velocity, ...)"},                                      \
      {"param" s ".per_element", DS_KEY_BOOL, PO(k, per_element), 0, 1, NULL, 0,                                   \
       "one value per element (false: one value shared by all)"},                                                  \
      {"param" s ".lower", DS_KEY_REAL, PO(k, lower), -1e30, 1e30, NULL, 0, "lower bound (> 0: log reparameterisation)"}, \
      {"param" s ".upper", DS_KEY_REAL, PO(k, upper), -1e30, 1e30, NULL, 0, "upper bound"},                       \
      {"param" s ".init", DS_KEY_REALS, PO(k, init), -1e30, DS_SYSID_MAX_VEC, NULL, PO(k, ninit),                  \
       "initial guess: 1 or width values (absent: the env's value)"},                                              \
      {"param" s ".init_range", DS_KEY_REALS, PO(k, init_range), -1e30, 2, NULL, PO(k, ninit_range),               \
       "[a, b]: draw the initial guess of every value from U[a, b) per object"},                                   \
      {"param" s ".init_each", DS_KEY_BOOL, PO(k, init_each), 0, 1, NULL, 0,                                       \
       "init_range: one draw per value (false: one draw shared by the parameter's values)"},                       \
      {"param" s ".true", DS_KEY_REALS, PO(k, truth), -1e30, DS_SYSID_MAX_VEC, NULL, PO(k, ntruth),                \
       "synthetic video: the hidden true value (absent: the env's value)"},                                        \
      {"param" s ".true_range", DS_KEY_REALS, PO(k, truth_range), -1e30, 2, NULL, PO(k, ntruth_range),             \
       "synthetic video: draw the true value from U[a, b) per object"},                                            \
      {"param" s ".true_field.kind", DS_KEY_ENUM, PO(k, true_field.kind), 0, 0, "none|layers|band", 0,              \
       "synthetic video: the truth as a field over the elements (per_element): equal slabs or a band along axis"}, \
      {"param" s ".true_field.axis", DS_KEY_ENUM, PO(k, true_field.axis), 0, 0, "x|y|z", 0,                         \
       "axis of the layers or band (fractions of the body's extent)"},                                             \
      {"param" s ".true_field.values", DS_KEY_REALS, PO(k, true_field.values), -1e30, DS_SYSID_MAX_REGIONS, NULL,   \
       PO(k, true_field.nvalues), "the true value per region (layers: one per slab; band: outside, inside)"},      \
      {"param" s ".true_field.ranges", DS_KEY_REALS, PO(k, true_field.ranges), -1e30, 2 * DS_SYSID_MAX_REGIONS,     \
       NULL, PO(k, true_field.nranges), "[lo, hi] per region, flattened: a draw per object and region"},          \
      {"param" s ".true_field.band", DS_KEY_REALS, PO(k, true_field.band), 0, 2, NULL, PO(k, true_field.nband),     \
       "band: [from, to) as fractions of the extent along axis"},                                                  \
      {"param" s ".tv", DS_KEY_DOUBLE, PO(k, tv), 0, 1e12, NULL, 0,                                                 \
       "weight of the smoothed total variation of a per-element field (in u: ln(value) when lower > 0)"},        \
      {"param" s ".tv_eps", DS_KEY_DOUBLE, PO(k, tv_eps), 1e-12, 1e6, NULL, 0,                                     \
       "smoothing of the total variation: sqrt(d^2 + eps^2) - eps, d a difference in u"},                         \
      {"param" s ".laplacian", DS_KEY_DOUBLE, PO(k, laplacian), 0, 1e12, NULL, 0,                                   \
       "weight of the squared differences (Laplacian) of a per-element field, in u"}

static const dsConfigKey g_keys[] = {
    PARAM_KEYS(0, "1"), PARAM_KEYS(1, "2"), PARAM_KEYS(2, "3"), PARAM_KEYS(3, "4"),
    PARAM_KEYS(4, "5"), PARAM_KEYS(5, "6"), PARAM_KEYS(6, "7"), PARAM_KEYS(7, "8"),
    {"optimizer", DS_KEY_ENUM, O(optimizer), 0, 0, "adam|sgd|lbfgs", 0, "optimiser"},
    {"lr", DS_KEY_DOUBLE, O(lr), 0, 1e6, NULL, 0, "learning rate in u (L-BFGS: first step length)"},
    {"momentum", DS_KEY_DOUBLE, O(momentum), 0, 0.999999, NULL, 0, "SGD momentum"},
    {"lbfgs_memory", DS_KEY_INT, O(lbfgs_memory), 1, 100, NULL, 0, "L-BFGS pairs kept"},
    {"iterations", DS_KEY_INT, O(iterations), 1, 1000000, NULL, 0, "optimisation iterations"},
    {"video", DS_KEY_ENUM, O(video), 0, 0, "synthetic|frames|camsim", 0,
     "synthetic: rendered with the true values; frames: PNG folder + camera file; camsim: the true episode "
     "filmed by the camera simulator (sysid.camsim)"},
    {"camsim.fit_gain", DS_KEY_BOOL, O(camsim.fit_gain), 0, 1, NULL, 0,
     "camsim: the identifier fits a gain per frame and colour channel to its own colours (least squares; it does "
     "not know the light)"},
    {"camsim.fit_shading", DS_KEY_BOOL, O(camsim.fit_shading), 0, 1, NULL, 0,
     "camsim: the identifier paints its faces by the main axis of their rest normal (red x, green y, blue z) and "
     "fits a 3 x 3 colour matrix per frame (a light factor per class of faces and channel) instead of the gain"},
    {"camsim.image_weight", DS_KEY_DOUBLE, O(camsim.image_weight), 0, 1e6, NULL, 0,
     "camsim: weight of the image loss of the composite over the known background (0: the silhouette alone)"},
    {"camsim.silhouette", DS_KEY_DOUBLE, O(camsim.silhouette), 0, 1e6, NULL, 0,
     "camsim: weight of the silhouette term, the mean squared difference of the identifier's alpha and the "
     "video's foreground coverage from background subtraction (0: none)"},
    {"camsim.premultiplied", DS_KEY_BOOL, O(camsim.premultiplied), 0, 1, NULL, 0,
     "camsim: the identifier renders premultiplied colour (the mean of alpha rgb over its samples) and composites "
     "it over the background as rgb + (1 - alpha) B, as a camera integrates coverage; off: alpha rgb + (1 - alpha) B"},
    {"camsim.mask_threshold", DS_KEY_DOUBLE, O(camsim.mask_threshold), 0, 1, NULL, 0,
     "camsim: |video - background| (RGB, values in [0, 1]) above which a pixel is the object's (silhouette)"},
    {"camsim.supersample", DS_KEY_INT, O(camsim.cam.supersample), 1, 16, NULL, 0,
     "camsim: hard z-buffer samples per pixel per axis, box-averaged"},
    {"camsim.light_dir", DS_KEY_VEC3, O(camsim.cam.light_dir), -1e6, 1e6, NULL, 0,
     "camsim: direction towards its light, world (not the identifier's headlight)"},
    {"camsim.light_color", DS_KEY_VEC3, O(camsim.cam.light_color), 0, 1e6, NULL, 0, "camsim: RGB of its light"},
    {"camsim.ambient", DS_KEY_REAL, O(camsim.cam.ambient), 0, 1e6, NULL, 0, "camsim: ambient factor"},
    {"camsim.diffuse", DS_KEY_REAL, O(camsim.cam.diffuse), 0, 1e6, NULL, 0, "camsim: Lambert factor"},
    {"camsim.specular", DS_KEY_REAL, O(camsim.cam.specular), 0, 1e6, NULL, 0, "camsim: Blinn-Phong specular factor"},
    {"camsim.shininess", DS_KEY_REAL, O(camsim.cam.shininess), 0, 1e6, NULL, 0, "camsim: Blinn-Phong exponent"},
    {"camsim.drift", DS_KEY_DOUBLE, O(camsim.drift), 0, 1, NULL, 0,
     "camsim: fraction of the light's intensity lost from the first frame to the last (linear)"},
    {"camsim.background", DS_KEY_VEC3, O(camsim.cam.background), 0, 1, NULL, 0, "camsim: RGB behind the scene"},
    {"camsim.clutter", DS_KEY_INT, O(camsim.cam.clutter), 0, 10000, NULL, 0,
     "camsim: random rectangles and discs on the static background (0: plain); the identifier composites over it"},
    {"camsim.clutter_seed", DS_KEY_U64, O(camsim.cam.clutter_seed), 0, 9007199254740992.0, NULL, 0,
     "camsim: the clutter's stream"},
    {"camsim.blur", DS_KEY_REAL, O(camsim.cam.blur), 0, DS_CAMSIM_MAX_BLUR, NULL, 0,
     "camsim: Gaussian blur sigma, pixels (0: none)"},
    {"camsim.noise", DS_KEY_REAL, O(camsim.cam.noise), 0, 1, NULL, 0,
     "camsim: Gaussian sensor noise sigma on [0, 1] pixel values, seeded per object and frame, clamped"},
    {"frames_dir", DS_KEY_STRING, O(frames_dir), 0, DS_SYSID_PATH_MAX, NULL, 0, "folder of PNG frames (video frames)"},
    {"camera", DS_KEY_STRING, O(camera), 0, DS_SYSID_PATH_MAX, NULL, 0,
     "JSON file: times, position, look_at, fov (video frames)"},
    {"frames", DS_KEY_ENUM, O(frames), 0, 0, "all|first_last|last", 0, "frames in the loss"},
    {"restarts", DS_KEY_INT, O(restarts), 0, 1000, NULL, 0,
     "lbfgs: when it stops before the iterations run out, start again from a new draw of every init_range (at "
     "most this many times); the estimate is the lowest loss of all starts"},
    {"loss_tolerance", DS_KEY_DOUBLE, O(loss_tolerance), 0, 1, NULL, 0,
     "lbfgs: stop once the loss is at most this fraction of its value at the start (of the stage); the default is "
     "round-off, a larger value stops where the error is already far below what matters"},
    {"action", DS_KEY_REALS, O(action), -1e30, DS_SYSID_MAX_VEC, NULL, O(naction),
     "a known action held at every step (first values; the rest 0), e.g. rigid-toss's impulse, N s"},
    {NULL, DS_KEY_REAL, 0, 0, 0, NULL, 0, NULL}};

const dsConfigKey* ds_sysid_keys(void) { return g_keys; }

int ds_sysid_num_params(const dsSysidDef* def) {
  int n = 0;
  while (n < DS_SYSID_MAX_PARAMS && def->params[n].name[0]) n++;
  return n;
}

static int in_bounds(const dsSysidParam* p, dsReal v) { return v >= p->lower && v <= p->upper; }

int ds_sysid_def_validate(const dsSysidDef* def, char* err, size_t errlen) {
  if (!def) return DS_ERR_INVALID;
  const int np = ds_sysid_num_params(def);
  for (int k = np + 1; k < DS_SYSID_MAX_PARAMS; k++)
    if (def->params[k].name[0])
      return ds__puterr(err, errlen, DS_ERR_CONFIG, "sysid.param%d: comes after sysid.param%d, which has no name", k + 1,
                        np + 1);
  if (np == 0) return ds__puterr(err, errlen, DS_ERR_CONFIG, "sysid.param1: no parameter to identify (sysid.param1.name)");
  for (int k = 0; k < np; k++) {
    const dsSysidParam* p = &def->params[k];
    if (!(p->lower < p->upper))
      return ds__puterr(err, errlen, DS_ERR_CONFIG, "sysid.param%d: lower (%g) must be below upper (%g)", k + 1,
                        (double)p->lower, (double)p->upper);
    for (int i = 0; i < p->ninit; i++)
      if (!in_bounds(p, p->init[i]))
        return ds__puterr(err, errlen, DS_ERR_CONFIG, "sysid.param%d.init: %g is outside the bounds [%g, %g]", k + 1,
                          (double)p->init[i], (double)p->lower, (double)p->upper);
    if (p->ninit_range && p->ninit_range != 2)
      return ds__puterr(err, errlen, DS_ERR_CONFIG, "sysid.param%d.init_range: expected [a, b]", k + 1);
    if (p->ninit_range == 2 &&
        (!in_bounds(p, p->init_range[0]) || !in_bounds(p, p->init_range[1]) || !(p->init_range[0] <= p->init_range[1])))
      return ds__puterr(err, errlen, DS_ERR_CONFIG,
                        "sysid.param%d.init_range: [%g, %g] is not an interval inside the bounds [%g, %g]", k + 1,
                        (double)p->init_range[0], (double)p->init_range[1], (double)p->lower, (double)p->upper);
    if (p->ntruth_range && p->ntruth_range != 2)
      return ds__puterr(err, errlen, DS_ERR_CONFIG, "sysid.param%d.true_range: expected [a, b]", k + 1);
    if (p->ntruth_range == 2 && !(p->truth_range[0] <= p->truth_range[1]))
      return ds__puterr(err, errlen, DS_ERR_CONFIG, "sysid.param%d.true_range: [%g, %g] is not an interval", k + 1,
                        (double)p->truth_range[0], (double)p->truth_range[1]);
    if (!(p->tv >= 0) || !(p->laplacian >= 0) || !(p->tv_eps > 0))
      return ds__puterr(err, errlen, DS_ERR_CONFIG,
                        "sysid.param%d.%s: %g: expected a weight >= 0 (tv_eps: > 0)", k + 1,
                        !(p->tv >= 0) ? "tv" : !(p->laplacian >= 0) ? "laplacian" : "tv_eps",
                        !(p->tv >= 0) ? p->tv : !(p->laplacian >= 0) ? p->laplacian : p->tv_eps);
    if ((p->tv > 0 || p->laplacian > 0 || p->true_field.kind) && !p->per_element)
      return ds__puterr(err, errlen, DS_ERR_CONFIG, "sysid.param%d.%s: needs per_element true (a field of values)",
                        k + 1, p->true_field.kind ? "true_field" : p->tv > 0 ? "tv" : "laplacian");
    const dsSysidField* tf = &p->true_field;
    for (int i = 0; i < tf->nranges / 2; i++)
      if (!(tf->ranges[2 * i] <= tf->ranges[2 * i + 1]))
        return ds__puterr(err, errlen, DS_ERR_CONFIG, "sysid.param%d.true_field.ranges: [%g, %g] is not an interval",
                          k + 1, (double)tf->ranges[2 * i], (double)tf->ranges[2 * i + 1]);
  }
  for (int st = 0; st < def->nstages; st++) {
    const dsSysidStage* g = &def->stages[st];
    if (g->iterations < 1)
      return ds__puterr(err, errlen, DS_ERR_CONFIG, "sysid.stages[%d].iterations: %d: expected at least 1", st,
                        g->iterations);
    if (!g->free_mask || (g->free_mask >> np))
      return ds__puterr(err, errlen, DS_ERR_CONFIG,
                        "sysid.stages[%d].params: expected 1 to %d of the parameters (their names or indices 1 to %d)",
                        st, np, np);
    if (g->loss < DS_SYSID_LOSS_ENV || g->loss > DS_SYSID_LOSS_L2_DSSIM || !(g->lr >= 0))
      return ds__puterr(err, errlen, DS_ERR_CONFIG, "sysid.stages[%d].%s: out of range", st,
                        !(g->lr >= 0) ? "lr" : "loss");
  }
  if (def->video == DS_SYSID_FRAMES && (!def->frames_dir[0] || !def->camera[0]))
    return ds__puterr(err, errlen, DS_ERR_CONFIG, "sysid.%s: required with video \"frames\"",
                      def->frames_dir[0] ? "camera" : "frames_dir");
  const dsSysidCamSim* cs = &def->camsim;
  if (def->video == DS_SYSID_CAMSIM &&
      (!(cs->image_weight >= 0 && cs->silhouette >= 0) || !(cs->image_weight + cs->silhouette > 0) ||
       !isfinite(cs->image_weight + cs->silhouette) || !(cs->mask_threshold >= 0 && cs->mask_threshold <= 1)))
    return ds__puterr(err, errlen, DS_ERR_CONFIG,
                      "sysid.camsim: image_weight %g, silhouette %g, mask_threshold %g: expected finite weights >= 0, "
                      "not both 0, and a threshold in [0, 1]",
                      cs->image_weight, cs->silhouette, cs->mask_threshold);
  return 0;
}

/* sysid.stages, read field by field (io/cfg.h's ds__cfg_take_list) */
typedef struct StageCtx {
  const char* name;
  dsSysidDef* d;
  char* err;
  size_t errlen;
} StageCtx;

/* stage st's "params": names of d's parameters or their indices (1-based) */
static int stage_params(const StageCtx* c, int st, const dsCfgItem* it, int n, unsigned* mask) {
  const dsSysidDef* d = c->d;
  const int np = ds_sysid_num_params(d);
  if (n < 1)
    return ds__puterr(c->err, c->errlen, DS_ERR_CONFIG,
                      "%s: sysid.stages[%d].params: expected a list of 1 to %d parameter names or indices (1 to %d)",
                      c->name, st, DS_SYSID_MAX_PARAMS, np);
  for (int q = 0; q < n; q++) {
    int k = -1;
    if (it[q].kind == DS_CFG_NUMBER && it[q].number >= 1 && it[q].number <= np && it[q].number == floor(it[q].number))
      k = (int)it[q].number - 1;
    for (int j = 0; j < np && k < 0 && it[q].kind == DS_CFG_STRING; j++)
      if (!strcmp(d->params[j].name, it[q].string)) k = j;
    if (k < 0) {
      char list[DS_SYSID_MAX_PARAMS * (DS_SYSID_NAME_MAX + 2)] = "", shown[80];
      for (int j = 0; j < np; j++) {
        strncat(list, j ? ", " : "", sizeof list - strlen(list) - 1);
        strncat(list, d->params[j].name, sizeof list - strlen(list) - 1);
      }
      if (it[q].kind == DS_CFG_STRING)
        snprintf(shown, sizeof shown, "\"%.60s\"", it[q].string);
      else if (it[q].kind == DS_CFG_NUMBER)
        snprintf(shown, sizeof shown, "%g", it[q].number);
      else
        snprintf(shown, sizeof shown, "a value that is neither a name nor an index");
      return ds__puterr(c->err, c->errlen, DS_ERR_CONFIG,
                        "%s: sysid.stages[%d].params: %s is not a parameter of this config (expected a name of %s, "
                        "or an index 1 to %d)",
                        c->name, st, shown, list, np);
    }
    *mask |= 1u << k;
  }
  return 0;
}

static const char* const kStageLoss[] = {"env", "mse", "l1", "dssim", "l2_dssim"};

/* one field of stage st: params, iterations, loss, lr */
static int stage_field(void* user, int st, const char* field, const dsCfgItem* it, int n) {
  const StageCtx* c = (const StageCtx*)user;
  if (st >= DS_SYSID_MAX_STAGES) return 0; /* the count is checked after the walk */
  dsSysidStage* g = &c->d->stages[st];
  if (!field) return ds__puterr(c->err, c->errlen, DS_ERR_CONFIG, "%s: sysid.stages[%d]: expected an object", c->name, st);
  const int num = n == 1 && it[0].kind == DS_CFG_NUMBER;
  if (!strcmp(field, "params")) return stage_params(c, st, it, n, &g->free_mask);
  if (!strcmp(field, "iterations")) {
    if (!num || !(it[0].number >= 1 && it[0].number <= 1e6) || it[0].number != floor(it[0].number))
      return ds__puterr(c->err, c->errlen, DS_ERR_CONFIG,
                        "%s: sysid.stages[%d].iterations: expected an integer from 1 to 1000000", c->name, st);
    g->iterations = (int)it[0].number;
    return 0;
  }
  if (!strcmp(field, "lr")) {
    if (!num || !(it[0].number > 0) || !isfinite(it[0].number))
      return ds__puterr(c->err, c->errlen, DS_ERR_CONFIG, "%s: sysid.stages[%d].lr: expected a number > 0", c->name, st);
    g->lr = it[0].number;
    return 0;
  }
  if (!strcmp(field, "loss")) {
    g->loss = -1;
    for (int j = 0; j < 5 && n == 1 && it[0].kind == DS_CFG_STRING; j++)
      if (!strcmp(it[0].string, kStageLoss[j])) g->loss = j;
    if (g->loss < 0)
      return ds__puterr(c->err, c->errlen, DS_ERR_CONFIG,
                        "%s: sysid.stages[%d].loss: expected env, mse, l1, dssim or l2_dssim", c->name, st);
    return 0;
  }
  return ds__puterr(c->err, c->errlen, DS_ERR_CONFIG,
                    "%s: sysid.stages[%d]: unknown key \"%s\" (keys: params, iterations, loss, lr)", c->name, st,
                    field);
}

static int parse_section_keys(const char* name, const char* text, dsSysidDef* d, char* err, size_t errlen);

int ds__sysid_parse_section(const char* name, const char* text, dsSysidDef* d, char* err, size_t errlen) {
  /* sysid.cameras, a list like sysid.stages, is taken out first
     (controllers/sysid_views.c) */
  char* rest = NULL;
  int rc = ds__sysid_parse_cameras(name, text, d, &rest, err, errlen);
  if (!rc) rc = parse_section_keys(name, rest ? rest : text, d, err, errlen);
  ds__free(rest);
  return rc;
}

static int parse_section_keys(const char* name, const char* text, dsSysidDef* d, char* err, size_t errlen) {
  /* sysid.stages is a list of objects, which the key table cannot hold: it
     is taken out of the text and read field by field, after the parameters
     (a stage names them) */
  char* rest = NULL;
  int count = 0;
  dsSysidDef tmp = *d;
  memset(tmp.stages, 0, sizeof tmp.stages);
  StageCtx c = {name, &tmp, err, errlen};
  /* first the text without the list, for the parameters' names */
  int rc = ds__cfg_take_list(text, "sysid", "stages", &rest, &count, NULL, NULL);
  if (rc == DS_ERR_NOTFOUND && !rest) return ds_config_parse_section(name, text, "sysid", g_keys, d, sizeof *d, err, errlen);
  if (!rest) return rc;
  rc = ds_config_parse_section(name, rest, "sysid", g_keys, &tmp, sizeof tmp, err, errlen);
  ds__free(rest);
  rest = NULL;
  if (!rc) rc = ds__cfg_take_list(text, "sysid", "stages", &rest, &count, stage_field, &c);
  ds__free(rest);
  if ((!rc || count < 0) && (count < 1 || count > DS_SYSID_MAX_STAGES))
    rc = ds__puterr(err, errlen, DS_ERR_CONFIG,
                    "%s: sysid.stages: expected a list of 1 to %d stages ({\"params\": [...], \"iterations\": N, "
                    "\"loss\": ..., \"lr\": ...})",
                    name, DS_SYSID_MAX_STAGES);
  int total = 0;
  for (int st = 0; st < count && !rc; st++) {
    const dsSysidStage* g = &tmp.stages[st];
    if (!g->free_mask || !g->iterations)
      rc = ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: sysid.stages[%d]: %s is required", name, st,
                      g->free_mask ? "iterations" : "params");
    total += g->iterations;
  }
  if (rc) return rc;
  tmp.nstages = count;
  tmp.iterations = total; /* the schedule sets the length of the run */
  *d = tmp;
  return 0;
}

int ds_sysid_def_from_text(const char* name, const char* text, dsSysidDef* def, char* err, size_t errlen) {
  if (!name || !text || !def) return DS_ERR_INVALID;
  dsSysidDef d = *def;
  int rc = ds__sysid_parse_section(name, text, &d, err, errlen);
  if (rc) return rc;
  char msg[512];
  rc = ds_sysid_def_validate(&d, msg, sizeof msg);
  if (rc) return ds__puterr(err, errlen, rc, "%s: %s", name, msg);
  *def = d;
  return 0;
}

/* ---- the identification ------------------------------------------------------ */
typedef struct Param {
  const char* name;
  int count, width, nelem, nval, offset, logp;
  /* a positive quantity (logp) whose env value is 0 stays 0: a fixed
     particle's mass (mass 0 = fixed) is not a mass to identify */
  unsigned char* zero; /* count: 1 where held at 0 */
  int* edges;          /* the element graph of a smoothness term (2 x nedge), NULL without one */
  int nedge;
  int* region;         /* true_field: region per element (NULL: a uniform truth) */
  int nregion;
} Param;

struct dsSysid {
  dsSysidDef def;
  dsEnv* env;
  dsErrBuf err;
  int np, nval;
  Param p[DS_SYSID_MAX_PARAMS];
  double *x, *u, *gu, *gx, *x0, *best, *truth, *ulo, *uhi, *itx, *uprev;
  unsigned char* fixed; /* nval: values held at 0 (see Param.zero) */
  double best_loss, f, f0, g0; /* g0: |projected dL/du| at iteration 0 */
  int have_truth, iter, have_f;
  const char* stop;        /* L-BFGS: why it stopped (NULL: it has steps left) */
  int *vparam;
  /* video */
  dsSysidVideo video;
  int* substep;
  int* fstep;     /* frame -> step index */
  int* used;      /* frame enters the loss */
  int nused;
  dsReal* rgba;   /* nframes x npix */
  dsReal *bg, *comp; /* camsim: the known background (npix) and a frame composited over it */
  dsReal* mask;      /* camsim silhouette: the video's foreground coverage (nframes x w h; NULL: no term) */
  /* episode buffers */
  int nstep, adim, w, h;
  size_t npix;
  int* step_frame; /* step -> frame or -1 */
  dsReal *rendered, *adj, *scratch_img, *action, *pbuf;
  int pbuf_n;
  uint64_t env_seed;
  dsOptim* opt;
  dsLbfgs* lb;
  /* schedule: stage `stage` runs until iteration stage_end (its first at
     stage_first); its optimiser and loss; frozen values keep xstage */
  int nst, stage, stage_first, stage_end;
  dsOptim* opts[DS_SYSID_MAX_STAGES];
  dsLbfgs* lbs[DS_SYSID_MAX_STAGES];
  dsImageLoss* ils[DS_SYSID_MAX_STAGES];
  dsImageLoss* il;        /* the stage's loss (NULL: the env's) */
  unsigned char* frozen;  /* nval */
  double *xstage, *ureg;  /* nval: frozen values; u of the regulariser */
  int have_reg;
  dsSysidViewSet* views;  /* several views or camera parameters (NULL: the env's image observation) */
  /* restarts (sysid.restarts): how many are left, their draws' stream, the best of the starts before */
  int restarts_left;
  uint64_t restart_rng;
  double rbest_loss;
  double* rbest;          /* nval */
};

/* Values per element of an engine array: vectors by name (the engine's
 * names, dsim/engine.h), scalars otherwise. */
static int ends_with(const char* s, const char* suffix) {
  const size_t a = strlen(s), b = strlen(suffix);
  return a >= b && !strcmp(s + a - b, suffix);
}
static int width_of(const char* name) {
  if (ends_with(name, "inertia")) return 9;
  if (ends_with(name, "orientation")) return 4;
  return (ends_with(name, "initial_position") || ends_with(name, "initial_velocity") ||
          ends_with(name, "angular_velocity") || !strcmp(name, "gravity") || !strcmp(name, "body.com") ||
          !strcmp(name, "light.direction") ||
          (ds__sysid_is_camera_param(name) && (ends_with(name, ".position") || ends_with(name, ".look_at"))))
             ? 3
             : 1;
}

void ds_sysid_destroy(dsSysid* s) {
  if (!s) return;
  ds_env_destroy(s->env);
  ds__sysid_views_destroy(s->views);
  for (int st = 0; st < DS_SYSID_MAX_STAGES; st++) {
    ds_optim_destroy(s->opts[st]);
    ds_lbfgs_destroy(s->lbs[st]);
    ds_env_image_loss_destroy(s->ils[st]);
  }
  for (int k = 0; k < s->np; k++) {
    ds__free(s->p[k].zero);
    ds__free(s->p[k].edges);
    ds__free(s->p[k].region);
  }
  void* bufs[] = {s->rbest, s->frozen, s->xstage, s->ureg, s->fixed, s->uprev, s->x, s->u, s->gu, s->gx, s->x0, s->best, s->truth, s->ulo, s->uhi, s->itx, s->vparam,
                  s->substep, s->fstep, s->used, s->rgba, s->step_frame, s->rendered, s->adj, s->scratch_img,
                  s->action, s->pbuf, s->bg, s->comp, s->mask};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ds__free(bufs[i]);
  ds__free(s);
}

const char* ds_sysid_last_error(const dsSysid* s) { return s ? ds__errmsg(&s->err) : ""; }
int ds_sysid_num_values(const dsSysid* s) { return s ? s->nval : 0; }
int ds_sysid_value_param(const dsSysid* s, int i) { return s && i >= 0 && i < s->nval ? s->vparam[i] : -1; }
int ds_sysid_param_width(const dsSysid* s, int p) { return s && p >= 0 && p < s->np ? s->p[p].width : 0; }
int ds_sysid_value_fixed(const dsSysid* s, int i) { return s && i >= 0 && i < s->nval ? s->fixed[i] : 0; }
const double* ds_sysid_values(const dsSysid* s) { return s ? s->x : NULL; }
const double* ds_sysid_initial_values(const dsSysid* s) { return s ? s->x0 : NULL; }
const double* ds_sysid_best_values(const dsSysid* s, double* best_loss) {
  if (!s) return NULL;
  const int before = s->rbest && s->rbest_loss < s->best_loss; /* an earlier start's (sysid.restarts) */
  if (best_loss) *best_loss = before ? s->rbest_loss : s->best_loss;
  return before ? s->rbest : s->best;
}
const double* ds_sysid_truth(const dsSysid* s) { return s && s->have_truth ? s->truth : NULL; }
const dsReal* ds_sysid_rendered(const dsSysid* s) { return s ? s->rendered : NULL; }
const dsSysidVideo* ds_sysid_video(const dsSysid* s) { return s ? &s->video : NULL; }
dsEnv* ds_sysid_env(dsSysid* s) { return s ? s->env : NULL; }
int ds_sysid_num_views(const dsSysid* s) { return !s ? 0 : s->views ? ds__sysid_views_count(s->views) : 1; }
int ds_sysid_view(const dsSysid* s, int v, dsSysidView* out) {
  if (!s || !out) return DS_ERR_INVALID;
  if (s->views) return ds__sysid_views_get(s->views, v, out);
  dsReal c[DS_ENV_CAMERA_NVAL];
  if (v != 0 || ds_env_camera(s->env, c)) return DS_ERR_RANGE;
  memset(out, 0, sizeof *out);
  for (int k = 0; k < 3; k++) {
    out->position[k] = c[k];
    out->look_at[k] = c[3 + k];
  }
  out->fov = c[6];
  out->fx = c[7], out->fy = c[8], out->cx = c[9], out->cy = c[10];
  return 0;
}
int ds_sysid_nparams(const dsSysid* s) { return s ? s->np : 0; }
const char* ds_sysid_param_name(const dsSysid* s, int p) { return s && p >= 0 && p < s->np ? s->p[p].name : NULL; }

static double to_u(const Param* p, double x) { return p->logp ? log(x) : x; }
static double to_x(const Param* p, double u) { return p->logp ? exp(u) : u; }

/* write the values of x into env (s's own, or its instance in a group;
 * before the episode's first step) */
static int set_params_in(dsSysid* s, dsEnv* env, const double* x) {
  for (int k = 0; k < s->np; k++) {
    const Param* p = &s->p[k];
    const double* v = x + p->offset;
    for (int i = 0; i < p->count; i++)
      s->pbuf[i] = p->zero[i] ? 0 : (dsReal)(p->nval == p->count ? v[i] : v[i % p->width]);
    dsReal* cam = NULL;
    if (s->views && !ds__sysid_views_param(s->views, p->name, &cam, NULL, NULL)) {
      memcpy(cam, s->pbuf, (size_t)p->count * sizeof(dsReal)); /* the next episode's camera */
      continue;
    }
    int rc = ds_env_set_param(env, p->name, s->pbuf, p->count);
    if (rc) return ds__seterr(&s->err, rc, "set %s: %s", p->name, ds_env_last_error(env));
  }
  return 0;
}

/* The identifier's colour of pixel p (index of its red), channel q, as it
 * covers the pixel: alpha_p rgb_p, or with camsim.premultiplied the render's
 * own mean of alpha rgb over its samples. */
static inline double covered(const dsSysid* s, const dsReal* img, size_t p, int q) {
  return s->def.camsim.premultiplied ? (double)img[p + q] : (double)img[p + 3] * img[p + q];
}
/* dL/da_p (da) into dL/d(img) at p: through a_p = alpha_p rgb_p
 * (dL/drgb_p = alpha_p da, dL/dalpha_p += rgb_p . da), or directly for
 * premultiplied colour; dal: dL/dalpha_p by the other paths. */
static inline void covered_adjoint(const dsSysid* s, const dsReal* img, size_t p, const double da[3], double dal,
                                   dsReal* G) {
  const int pm = s->def.camsim.premultiplied;
  for (int q = 0; q < 3; q++) {
    if (!pm) dal += img[p + q] * da[q];
    G[p + q] = (dsReal)(pm ? da[q] : img[p + 3] * da[q]);
  }
  G[p + 3] = (dsReal)dal;
}

/* Over the known background B (camsim): per colour channel
 *   c_p = g a_p + (1 - alpha_p) B_p,   a_p = alpha_p rgb_p (covered),   alpha' = 1
 * (the video's frames are opaque). With fit_gain the identifier does not
 * know the light: g is the frame's and channel's least-squares gain of its
 * own colour against the video v, g = N/D, N = sum_p a_p u_p, u_p = v_p -
 * (1 - alpha_p) B_p, D = sum_p a_p^2 (1 when D = 0 or without fit_gain). */
static void composite(dsSysid* s, const dsReal* img, const dsReal* video, double gain[3]) {
  for (int q = 0; q < 3; q++) {
    double N = 0, D = 0;
    for (size_t p = 0; s->def.camsim.fit_gain && p < s->npix; p += 4) {
      const double a = covered(s, img, p, q);
      N += a * (video[p + q] - (1 - (double)img[p + 3]) * s->bg[p + q]);
      D += a * a;
    }
    gain[q] = D > 0 ? N / D : 1;
  }
  for (size_t p = 0; p < s->npix; p += 4) {
    const dsReal al = img[p + 3];
    for (int q = 0; q < 3; q++)
      s->comp[p + q] = (dsReal)(s->def.camsim.premultiplied ? gain[q] * img[p + q] : gain[q] * al * img[p + q]) +
                       (1 - al) * s->bg[p + q];
    s->comp[p + 3] = 1;
  }
}
/* fit_shading: c_p = M a_p + (1 - alpha_p) B_p with M (row-major) the
 * least-squares fit to u_p = v_p - (1 - alpha_p) B_p, M = S_ua S^-1,
 * S_ua = sum_p u_p a_p^T, S = sum_p a_p a_p^T + 1e-12 I (a class absent
 * from the frame gets a column 0). */
static void composite_matrix(dsSysid* s, const dsReal* img, const dsReal* video, double M[9], double Si[9]) {
  double S[9] = {1e-12, 0, 0, 0, 1e-12, 0, 0, 0, 1e-12}, U[9] = {0};
  for (size_t p = 0; p < s->npix; p += 4) {
    const double al = img[p + 3];
    double a[3], u[3];
    for (int q = 0; q < 3; q++) a[q] = covered(s, img, p, q), u[q] = video[p + q] - (1 - al) * s->bg[p + q];
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++) S[3 * i + j] += a[i] * a[j], U[3 * i + j] += u[i] * a[j];
  }
  /* S^-1 by cofactors (S is symmetric positive definite) */
  const double c0 = S[4] * S[8] - S[5] * S[7], c1 = S[5] * S[6] - S[3] * S[8], c2 = S[3] * S[7] - S[4] * S[6];
  const double det = S[0] * c0 + S[1] * c1 + S[2] * c2;
  Si[0] = c0 / det, Si[3] = c1 / det, Si[6] = c2 / det;
  Si[1] = (S[2] * S[7] - S[1] * S[8]) / det, Si[4] = (S[0] * S[8] - S[2] * S[6]) / det;
  Si[7] = (S[1] * S[6] - S[0] * S[7]) / det;
  Si[2] = (S[1] * S[5] - S[2] * S[4]) / det, Si[5] = (S[2] * S[3] - S[0] * S[5]) / det;
  Si[8] = (S[0] * S[4] - S[1] * S[3]) / det;
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) M[3 * i + j] = U[3 * i] * Si[j] + U[3 * i + 1] * Si[3 + j] + U[3 * i + 2] * Si[6 + j];
  for (size_t p = 0; p < s->npix; p += 4) {
    const double al = img[p + 3];
    for (int q = 0; q < 3; q++) {
      double c = (1 - al) * s->bg[p + q];
      for (int j = 0; j < 3; j++)
        c += s->def.camsim.premultiplied ? M[3 * q + j] * img[p + j] : M[3 * q + j] * al * img[p + j];
      s->comp[p + q] = (dsReal)c;
    }
    s->comp[p + 3] = 1;
  }
}
/* G: dL/dc in, dL/d(img) out. With Gam = dL/dM = sum_p G_p a_p^T and
 * K = Gam S^-1 (dM = dS_ua S^-1 - M dS S^-1): dL/da_p = M^T G_p + K^T u_p -
 * (J + J^T) a_p, J = M^T K, and dL/dalpha_p = -G_p.B_p + B_p.(K a_p), then
 * covered_adjoint (dL/drgb_p = alpha_p dL/da_p, dL/dalpha_p += rgb_p.dL/da_p). */
static void composite_matrix_adjoint(const dsSysid* s, const dsReal* img, const dsReal* video, const double M[9],
                                     const double Si[9], dsReal* G) {
  double Gam[9] = {0}, K[9], J[9], JJ[9];
  for (size_t p = 0; p < s->npix; p += 4)
    for (int i = 0; i < 3; i++)
      for (int j = 0; j < 3; j++)
        Gam[3 * i + j] += s->def.camsim.premultiplied ? G[p + i] * (double)img[p + j]
                                                      : G[p + i] * (double)img[p + 3] * img[p + j];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) K[3 * i + j] = Gam[3 * i] * Si[j] + Gam[3 * i + 1] * Si[3 + j] + Gam[3 * i + 2] * Si[6 + j];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) J[3 * i + j] = M[i] * K[j] + M[3 + i] * K[3 + j] + M[6 + i] * K[6 + j];
  for (int i = 0; i < 3; i++)
    for (int j = 0; j < 3; j++) JJ[3 * i + j] = J[3 * i + j] + J[3 * j + i];
  for (size_t p = 0; p < s->npix; p += 4) {
    const double al = img[p + 3];
    double a[3], u[3], B[3], da[3], dal = 0;
    for (int q = 0; q < 3; q++) {
      B[q] = s->bg[p + q];
      a[q] = covered(s, img, p, q);
      u[q] = video[p + q] - (1 - al) * B[q];
    }
    for (int q = 0; q < 3; q++) {
      da[q] = 0;
      for (int i = 0; i < 3; i++) da[q] += M[3 * i + q] * G[p + i] + K[3 * i + q] * u[i] - JJ[3 * q + i] * a[i];
      double Ka = 0;
      for (int j = 0; j < 3; j++) Ka += K[3 * q + j] * a[j];
      dal += -G[p + q] * B[q] + B[q] * Ka;
    }
    covered_adjoint(s, img, p, da, dal, G);
  }
}

/* G: dL/dc in, dL/d(img) out. At fixed g: dL/da_p = g G_p, dL/dalpha_p =
 * -sum G_p B_p; a fitted g adds S dg/da_p = S (u_p - 2 g a_p)/D and
 * S dg/dalpha_p = S a_p B_p / D, S = dL/dg = sum_p G_p a_p; then
 * covered_adjoint (dL/drgb_p = alpha_p dL/da_p, dL/dalpha_p += rgb_p.dL/da_p). */
static void composite_adjoint(const dsSysid* s, const dsReal* img, const dsReal* video, const double gain[3],
                              dsReal* G) {
  double S[3] = {0, 0, 0}, D[3] = {0, 0, 0};
  const int fit = s->def.camsim.fit_gain;
  for (size_t p = 0; fit && p < s->npix; p += 4)
    for (int q = 0; q < 3; q++) {
      const double a = covered(s, img, p, q);
      S[q] += G[p + q] * a;
      D[q] += a * a;
    }
  for (size_t p = 0; p < s->npix; p += 4) {
    const double al = img[p + 3];
    double ga = 0;
    for (int q = 0; q < 3; q++) {
      const double a = covered(s, img, p, q), B = s->bg[p + q];
      double da = gain[q] * G[p + q], dal = -G[p + q] * B;
      if (fit && D[q] > 0) {
        const double u = video[p + q] - (1 - al) * B;
        da += S[q] * (u - 2 * gain[q] * a) / D[q];
        dal += S[q] * a * B / D[q];
      }
      /* covered_adjoint, in the order that keeps the bits of the default */
      const int pm = s->def.camsim.premultiplied;
      ga += pm ? dal : dal + img[p + q] * da;
      G[p + q] = (dsReal)(pm ? da : al * da);
    }
    G[p + 3] = (dsReal)ga;
  }
}

/* The video's foreground coverage m of one frame v (dsSysidCamSim: 0 off
 * the object, 1 inside, the projection onto the colour of the most
 * contrasted inside neighbour on the edge); d, in: per pixel scratch. */
static void footage_mask(const dsSysid* s, const dsReal* v, dsReal* m, double* d, unsigned char* in) {
  const int W = s->w, H = s->h;
  const double t = s->def.camsim.mask_threshold;
  for (int p = 0; p < W * H; p++) {
    double e = 0;
    for (int q = 0; q < 3; q++) e += ((double)v[4 * p + q] - s->bg[4 * p + q]) * ((double)v[4 * p + q] - s->bg[4 * p + q]);
    d[p] = sqrt(e);
  }
  /* in: 0 no pixel of the 3 x 3 neighbourhood (inside the image) is the
     object's, 2 all are, 1 some */
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) {
      int n = 0, fg = 0;
      for (int j = y - 1; j <= y + 1; j++)
        for (int i = x - 1; i <= x + 1; i++)
          if (i >= 0 && i < W && j >= 0 && j < H) n++, fg += d[j * W + i] > t;
      in[y * W + x] = fg == 0 ? 0 : fg == n ? 2 : 1;
    }
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W; x++) {
      const int p = y * W + x;
      m[p] = in[p] == 2 ? 1 : 0;
      if (in[p] != 1) continue;
      /* the neighbour whose colour stands for the object's: an inside one
         if there is one, else the most contrasted of all (a thin part) */
      int best = -1, best_in = 0;
      for (int j = y - 1; j <= y + 1; j++)
        for (int i = x - 1; i <= x + 1; i++) {
          if (i < 0 || i >= W || j < 0 || j >= H) continue;
          const int q = j * W + i, qi = in[q] == 2;
          if (best < 0 || qi > best_in || (qi == best_in && d[q] > d[best])) best = q, best_in = qi;
        }
      double num = 0, den = 0;
      for (int c = 0; c < 3; c++) {
        const double u = (double)v[4 * best + c] - s->bg[4 * p + c];
        num += ((double)v[4 * p + c] - s->bg[4 * p + c]) * u;
        den += u * u;
      }
      m[p] = (dsReal)(den > 0 ? fmin(1, num / den) : 0);
    }
}

/* The silhouette term of frame f (dsSysidCamSim.silhouette, without the
 * weight): (1/P) sum_p (alpha_p - m_p)^2; g (may be NULL): += w dL/d(alpha). */
static double silhouette_loss(const dsSysid* s, int f, const dsReal* img, double w, dsReal* g) {
  const size_t P = s->npix / 4;
  const dsReal* m = s->mask + (size_t)f * P;
  double L = 0;
  for (size_t p = 0; p < P; p++) {
    const double r = (double)img[4 * p + 3] - m[p];
    L += r * r;
    if (g) g[4 * p + 3] += (dsReal)(w * 2 * r / (double)P);
  }
  return L / (double)P;
}

/* The loss of the frames in s->rendered against the video; with adj (nstep
 * x npix), its image adjoints there. */
static int video_loss(dsSysid* s, dsReal* adj, double* loss) {
  double L = 0;
  if (adj) memset(adj, 0, (size_t)s->nstep * s->npix * sizeof(dsReal));
  const double wf = 1.0 / s->nused, wi = s->bg ? s->def.camsim.image_weight : 1;
  for (int f = 0; f < s->video.nframes; f++) {
    if (!s->used[f]) continue;
    dsReal* g = adj ? adj + (size_t)s->fstep[f] * s->npix : NULL;
    dsReal l = 0;
    const dsReal *img = s->rendered + (size_t)f * s->npix, *goal = s->rgba + (size_t)f * s->npix;
    double gain[9], Si[9] = {0};
    const int shading = s->bg && s->def.camsim.fit_shading;
    if (wi > 0) {
      if (shading)
        composite_matrix(s, img, goal, gain, Si);
      else if (s->bg)
        composite(s, img, goal, gain);
      int rc = s->il ? ds_env_image_loss_eval(s->il, s->bg ? s->comp : img, goal, &l, g)
                     : ds_env_image_loss(s->env, s->bg ? s->comp : img, goal, &l, g);
      if (rc) return ds__seterr(&s->err, rc, "frame %d: %s", f, ds_env_last_error(s->env));
      if (g && wi != 1)
        for (size_t q = 0; q < s->npix; q++) g[q] *= (dsReal)wi;
      if (g && shading)
        composite_matrix_adjoint(s, img, goal, gain, Si, g);
      else if (g && s->bg)
        composite_adjoint(s, img, goal, gain, g);
      if (wi != 1) l *= (dsReal)wi;
    }
    if (s->mask) {
      const double ws = s->def.camsim.silhouette;
      l += (dsReal)(ws * silhouette_loss(s, f, img, ws, g));
    }
    L += wf * (double)l;
    if (g)
      for (size_t q = 0; q < s->npix; q++) g[q] *= (dsReal)wf;
  }
  *loss = L;
  return 0;
}

/* A parameter's values and gradient: a camera's (controllers/sysid_views.c)
 * or the env's. */
static int param_now(const dsSysid* s, const char* name, const dsReal** v, int* n) {
  dsReal* cam = NULL;
  if (s->views && !ds__sysid_views_param(s->views, name, &cam, NULL, n)) {
    *v = cam;
    return 0;
  }
  return ds_env_param(s->env, name, v, n);
}
static int param_grad(const dsSysid* s, const dsEnv* env, const char* name, const dsReal** g, int* n) {
  if (s->views && !ds__sysid_views_param(s->views, name, NULL, g, n)) return 0;
  return ds_env_param_grad(env, name, g, n);
}

/* dL/d(value) from env's parameter gradients after a backward */
static int read_grad(dsSysid* s, dsEnv* env, double* grad) {
  for (int k = 0; k < s->np; k++) {
    const Param* p = &s->p[k];
    const dsReal* g = NULL;
    int n = 0;
    int rc = param_grad(s, env, p->name, &g, &n);
    if (rc || n != p->count) return ds__seterr(&s->err, rc ? rc : DS_ERR_STATE, "gradient of %s unavailable", p->name);
    double* out = grad + p->offset;
    if (p->nval == p->count) {
      for (int i = 0; i < n; i++) out[i] = p->zero[i] ? 0 : (double)g[i];
    } else {
      for (int j = 0; j < p->width; j++) out[j] = 0;
      for (int i = 0; i < n; i++)
        if (!p->zero[i]) out[i % p->width] += (double)g[i];
    }
  }
  return 0;
}

/* episode() with several views or camera parameters: the views render
 * the kept positions and, with want_grad, run the whole backward */
static int views_episode(dsSysid* s, double* loss, int want_grad) {
  const dsSysidViewsEp ep = {s->action, s->step_frame, s->fstep, s->used, s->nused, s->il, s->rendered};
  double l = 0;
  const int rc = ds__sysid_views_episode(s->views, s->env, &ep, !s->video.rgba, want_grad, &l, &s->err);
  if (!rc && s->video.rgba) *loss = l;
  return rc;
}

/* Simulate the episode with values x, render the video's frames into
 * s->rendered; with want_grad also the loss's image adjoints (s->adj).
 * Returns the loss in *loss. */
static int episode(dsSysid* s, const double* x, double* loss, int want_grad) {
  int rc = ds_env_reset(s->env, s->env_seed, NULL, NULL);
  if (!rc) rc = set_params_in(s, s->env, x);
  if (rc) return s->err.code ? rc : ds__seterr(&s->err, rc, "reset: %s", ds_env_last_error(s->env));
  if (s->views) return views_episode(s, loss, want_grad);
  for (int k = 0; k < s->nstep; k++) {
    const int f = s->step_frame[k];
    dsReal* img = f >= 0 ? s->rendered + (size_t)f * s->npix : s->scratch_img;
    int done = 0;
    rc = ds_env_step(s->env, s->action, NULL, img, NULL, &done);
    if (rc) return ds__seterr(&s->err, rc, "step %d: %s", k, ds_env_last_error(s->env));
  }
  if (!s->video.rgba) return 0; /* making the synthetic video */
  return video_loss(s, want_grad ? s->adj : NULL, loss);
}

int ds_sysid_eval(dsSysid* s, const double* x, double* loss, double* grad) {
  if (!s || !x || !loss) return DS_ERR_INVALID;
  int rc = episode(s, x, loss, grad != NULL);
  if (rc || !grad) return rc;
  if (s->views) return read_grad(s, s->env, grad); /* the views ran the backward */
  rc = ds_env_backward_adjoints(s->env, NULL, s->adj, NULL, NULL);
  if (rc) return ds__seterr(&s->err, rc, "backward: %s", ds_env_last_error(s->env));
  return read_grad(s, s->env, grad);
}

int ds_sysid_render_initial(dsSysid* s, const double* x, dsReal* image) {
  if (!s || !x || !image) return DS_ERR_INVALID;
  int rc = ds_env_reset(s->env, s->env_seed, NULL, NULL);
  if (!rc) rc = set_params_in(s, s->env, x);
  if (!rc && s->views) return ds__sysid_views_render(s->views, s->env, image, &s->err);
  if (!rc) rc = ds_env_render(s->env, image);
  if (rc && !s->err.code) ds__seterr(&s->err, rc, "initial frame: %s", ds_env_last_error(s->env));
  return rc;
}

static void u_to_x(dsSysid* s, const double* u, double* x) {
  for (int i = 0; i < s->nval; i++)
    x[i] = s->fixed[i] ? 0 : s->frozen[i] ? s->xstage[i] : to_x(&s->p[s->vparam[i]], u[i]);
}

/* The smoothness terms at values x (dsSysidParam.tv, .laplacian), in u;
 * gu (may be NULL) += dR/du. */
static double regulariser(dsSysid* s, const double* x, double* gu) {
  if (!s->have_reg) return 0;
  double R = 0;
  for (int k = 0; k < s->np; k++) {
    const Param* p = &s->p[k];
    if (!p->edges) continue;
    const dsSysidParam* sp = &s->def.params[k];
    double* u = s->ureg + p->offset;
    for (int i = 0; i < p->nval; i++) u[i] = s->fixed[p->offset + i] ? 0 : to_u(p, x[p->offset + i]);
    R += ds__sysid_field_reg(p->edges, p->nedge, u, s->fixed + p->offset, sp->tv, sp->tv_eps, sp->laplacian,
                             gu ? gu + p->offset : NULL);
  }
  return R;
}

int ds_sysid_regularizer(dsSysid* s, const double* values, double* r, double* grad) {
  if (!s || !values || !r) return DS_ERR_INVALID;
  if (grad) memset(grad, 0, (size_t)s->nval * sizeof(double));
  *r = regulariser(s, values, grad);
  /* dR/dx = dR/du du/dx, du/dx = 1/x under the log reparameterisation */
  for (int i = 0; grad && i < s->nval; i++)
    if (s->p[s->vparam[i]].logp && !s->fixed[i]) grad[i] /= values[i];
  return 0;
}

/* objective in u (L-BFGS and the gradient methods); an episode that
 * diverges or inverts an element has loss +inf (a line search backs off) */
/* an evaluation's outcome at s->itx (loss f, dL/dx in s->gx) as the
 * objective in u: a failed episode is +inf with gradient 0 */
static int objective_of(dsSysid* s, int rc, double* f, double* g) {
  if (rc == DS_ERR_DIVERGED || rc == DS_ERR_INVERTED) {
    *f = INFINITY;
    for (int i = 0; i < s->nval; i++) g[i] = 0;
    return 0;
  }
  if (rc) return rc;
  for (int i = 0; i < s->nval; i++) g[i] = s->fixed[i] ? 0 : s->gx[i] * (s->p[s->vparam[i]].logp ? s->itx[i] : 1.0);
  *f += regulariser(s, s->itx, g);
  for (int i = 0; i < s->nval; i++)
    if (s->frozen[i]) g[i] = 0; /* a frozen value: no step moves it */
  return 0;
}

static int eval_at(dsSysid* s, const double* x, double* f, double* g) {
  if (x != s->itx) memcpy(s->itx, x, (size_t)s->nval * sizeof(double));
  return objective_of(s, ds_sysid_eval(s, s->itx, f, s->gx), f, g);
}

static int objective(void* user, const double* u, double* f, double* g) {
  dsSysid* s = (dsSysid*)user;
  u_to_x(s, u, s->itx);
  return eval_at(s, s->itx, f, g);
}

static void enter_stage(dsSysid* s, int st);

static uint64_t object_seed(const dsSysidDef* def, int object) {
  uint64_t z = def->seed + (uint64_t)object;
  (void)ds__splitmix64(&z);
  return z;
}

/* The env an identification runs: one step per frame interval, an image at
 * every step, no frames of its own but substep 0's. */
static dsEnvDef sysid_env_def(const dsEnvDef* env_def) {
  dsEnvDef ed = *env_def;
  ed.control_interval = ed.render_interval;
  ed.render_interval = ed.substeps;
  ed.render_last = 0;
  ed.obs_image = 1;
  return ed;
}

/* group: the object's own env runs forward only on the CPU (its synthetic
 * video and the frames of records); its evaluations run in the group's batch */
static int sysid_create(const dsEnvDef* env_def, const dsSysidDef* def, int object, const dsSysidVideo* video,
                        int group, dsSysid** out, char* err, size_t errlen);

int ds_sysid_create(const dsEnvDef* env_def, const dsSysidDef* def, int object, const dsSysidVideo* video,
                    dsSysid** out, char* err, size_t errlen) {
  return sysid_create(env_def, def, object, video, 0, out, err, errlen);
}

/* 1 when a parameter is one of the env's lights (light.ambient, ...: the
 * env's renderer's, envs/env_episode.c): nuisance parameters of the image. */
static int uses_light(const dsSysidDef* def) {
  for (int k = 0; k < DS_SYSID_MAX_PARAMS && def->params[k].name[0]; k++)
    if (!strncmp(def->params[k].name, "light.", 6)) return 1;
  return 0;
}

/* The identification's env (sysid_env_def; a group's own env is forward
 * only on the CPU), its sizes, reset for the object. */
static int create_env(dsSysid* s, const dsEnvDef* env_def, int object, const dsSysidVideo* video, int group,
                      dsEnvDef* ed, char* err, size_t errlen) {
  *ed = sysid_env_def(env_def);
  if (ds__sysid_views_wanted(&s->def, video)) {
    /* the views draw the positions of the state observation */
    if (group)
      return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED,
                        "sysid: several views (sysid.cameras) and camera parameters run one object at a time, not "
                        "in a group (--group, --device cuda)");
    ed->obs_state = DS_OBS_STATE_FULL;
    ed->obs_image = 0;
  }
  if (s->def.video == DS_SYSID_CAMSIM) ed->premultiplied = s->def.camsim.premultiplied;
  if (group) {
    ed->gradients = 0;
    ed->device = ds_device_cpu();
    ed->batch_engine = 0;
  }
  if (video && (video->width != ed->width || video->height != ed->height))
    return ds__puterr(err, errlen, DS_ERR_CONFIG, "video frames are %d x %d but env.render is %d x %d", video->width,
                      video->height, ed->width, ed->height);
  char msg[512];
  int rc = ds_env_create(ed, &s->env, msg, sizeof msg);
  if (rc) return ds__puterr(err, errlen, rc, "env: %s", msg);
  s->nstep = ds_env_num_steps(s->env);
  s->adim = ds_env_action_size(s->env);
  s->w = ed->width;
  s->h = ed->height;
  s->npix = 4 * (size_t)s->w * (size_t)s->h;
  s->env_seed = s->def.seed + (uint64_t)object;
  rc = ds_env_reset(s->env, s->env_seed, NULL, NULL);
  if (rc) return ds__puterr(err, errlen, rc, "env reset: %s", ds_env_last_error(s->env));
  if (uses_light(&s->def) && (group || ds__sysid_views_wanted(&s->def, video)))
    return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED,
                      "sysid: light parameters (light.ambient, light.directional, light.direction) take the env's own "
                      "image: not with several views or camera parameters, nor in a group (--group, --device cuda)");
  if (ds__sysid_views_wanted(&s->def, video) && s->def.video == DS_SYSID_CAMSIM)
    return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED,
                      "sysid.video \"camsim\" films the env's first camera only: it does not take sysid.cameras or "
                      "camera parameters yet");
  if (ds__sysid_views_wanted(&s->def, video))
    rc = ds__sysid_views_create(&s->views, s->env, &s->def, video, s->nstep, video ? video->nframes : s->nstep, err,
                                errlen);
  return rc;
}

/* Parameters: names checked against the env, sizes, the flattened layout;
 * *maxcount gets the largest parameter array. */
static int param_layout(dsSysid* s, int* maxcount, char* err, size_t errlen) {
  const dsSysidDef* def = &s->def;
  *maxcount = 1;
  for (int k = 0; k < s->np; k++) {
    const dsSysidParam* sp = &def->params[k];
    Param* p = &s->p[k];
    p->name = s->def.params[k].name;
    const dsReal* v = NULL;
    const dsReal* g = NULL;
    int n = 0, ng = 0;
    if (ds__sysid_is_camera_param(p->name) && param_now(s, p->name, &v, &n))
      return ds__puterr(err, errlen, DS_ERR_CONFIG,
                        "sysid.param%d.name: \"%s\" is not a camera parameter of these %d view(s) (camera.position, "
                        "camera.look_at, and camera.fov for a view with a field of view or camera.fx, fy, cx, cy for "
                        "one with intrinsics; cameraK. for view K)",
                        k + 1, p->name, ds__sysid_views_count(s->views));
    if (ds__sysid_is_camera_param(p->name) && !(sp->lower > 0) &&
        (ends_with(p->name, ".fov") || ends_with(p->name, ".fx") || ends_with(p->name, ".fy")))
      return ds__puterr(err, errlen, DS_ERR_CONFIG, "sysid.param%d.lower: \"%s\" must stay positive: expected lower > 0",
                        k + 1, p->name);
    if (!strncmp(p->name, "light.", 6) && strcmp(p->name, "light.direction") && !(sp->lower >= 0))
      return ds__puterr(err, errlen, DS_ERR_CONFIG,
                        "sysid.param%d.lower: \"%s\" must stay non-negative: expected lower >= 0, got %g", k + 1,
                        p->name, (double)sp->lower);
    if (param_now(s, p->name, &v, &n))
      return ds__puterr(err, errlen, DS_ERR_CONFIG,
                        "sysid.param%d.name: env \"%s\" has no parameter \"%s\" (engine names: particle.mass, "
                        "tet.k_mu, tet.k_lambda, tri.k_mu, spring.ke, contact.ke, contact.mu, initial_velocity, "
                        "gravity, ...; the renderer's light.ambient, light.directional, light.direction)",
                        k + 1, ds_env_name(s->env), p->name);
    if (param_grad(s, s->env, p->name, &g, &ng))
      return ds__puterr(err, errlen, DS_ERR_CONFIG, "sysid.param%d.name: \"%s\" is not a differentiable parameter",
                        k + 1, p->name);
    if (n == 0)
      return ds__puterr(err, errlen, DS_ERR_CONFIG, "sysid.param%d.name: env \"%s\" has no elements of \"%s\"", k + 1,
                        ds_env_name(s->env), p->name);
    p->count = n;
    p->width = width_of(p->name);
    p->nelem = n / p->width;
    p->nval = sp->per_element ? n : p->width;
    p->offset = s->nval;
    p->logp = sp->lower > 0;
    s->nval += p->nval;
    if (n > *maxcount) *maxcount = n;
    const int nv[3] = {sp->ninit, sp->ntruth, 0};
    const char* what[2] = {"init", "true"};
    for (int q = 0; q < 2; q++)
      if (nv[q] && nv[q] != 1 && nv[q] != p->width)
        return ds__puterr(err, errlen, DS_ERR_CONFIG, "sysid.param%d.%s: expected 1 or %d values for \"%s\", got %d",
                          k + 1, what[q], p->width, p->name, nv[q]);
  }
  return 0;
}

/* Every per-value and per-step buffer (sized by the layout). */
static int alloc_buffers(dsSysid* s, int maxcount, char* err, size_t errlen) {
  const size_t nv = (size_t)s->nval;
  s->x = (double*)ds__calloc(nv, sizeof(double));
  s->u = (double*)ds__calloc(nv, sizeof(double));
  s->gu = (double*)ds__calloc(nv, sizeof(double));
  s->gx = (double*)ds__calloc(nv, sizeof(double));
  s->x0 = (double*)ds__calloc(nv, sizeof(double));
  s->best = (double*)ds__calloc(nv, sizeof(double));
  s->truth = (double*)ds__calloc(nv, sizeof(double));
  s->ulo = (double*)ds__calloc(nv, sizeof(double));
  s->uhi = (double*)ds__calloc(nv, sizeof(double));
  s->itx = (double*)ds__calloc(nv, sizeof(double));
  s->uprev = (double*)ds__calloc(nv, sizeof(double));
  s->fixed = (unsigned char*)ds__calloc(nv, 1);
  s->vparam = (int*)ds__calloc(nv, sizeof(int));
  s->pbuf = (dsReal*)ds__calloc((size_t)maxcount, sizeof(dsReal));
  s->action = (dsReal*)ds__calloc((size_t)(s->adim > 0 ? s->adim : 1), sizeof(dsReal));
  s->scratch_img = (dsReal*)ds__calloc(s->npix, sizeof(dsReal));
  s->adj = (dsReal*)ds__calloc((size_t)s->nstep * s->npix, sizeof(dsReal));
  s->step_frame = (int*)ds__calloc((size_t)s->nstep, sizeof(int));
  s->frozen = (unsigned char*)ds__calloc(nv, 1);
  s->xstage = (double*)ds__calloc(nv, sizeof(double));
  s->ureg = (double*)ds__calloc(nv, sizeof(double));
  if (!s->frozen || !s->xstage || !s->ureg) return ds__puterr(err, errlen, DS_ERR_NOMEM, "sysid: out of memory");
  if (!s->x || !s->u || !s->gu || !s->gx || !s->x0 || !s->best || !s->truth || !s->ulo || !s->uhi || !s->itx || !s->uprev || !s->fixed ||
      !s->vparam || !s->pbuf || !s->action || !s->scratch_img || !s->adj || !s->step_frame)
    return ds__puterr(err, errlen, DS_ERR_NOMEM, "sysid: out of memory");
  for (int i = 0; i < s->def.naction && i < s->adim; i++) s->action[i] = s->def.action[i];
  return 0;
}

/* Parameter k's element graph (a smoothness term) and true field: the
 * regions and their values (rval), drawn from *rng per region. */
static int field_setup(dsSysid* s, int k, double* rval, uint64_t* rng, char* err, size_t errlen) {
  const dsSysidParam* sp = &s->def.params[k];
  Param* p = &s->p[k];
  char key[64];
  if ((sp->tv > 0 || sp->laplacian > 0)) {
    snprintf(key, sizeof key, "sysid.param%d.%s", k + 1, sp->tv > 0 ? "tv" : "laplacian");
    if (p->width != 1)
      return ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: a smoothness term needs a scalar field, not \"%s\"", key,
                        p->name);
    int rc = ds__sysid_field_graph(s->env, p->name, key, &p->edges, &p->nedge, err, errlen);
    if (rc) return rc;
    s->have_reg = 1;
  }
  if (!sp->true_field.kind) return 0;
  snprintf(key, sizeof key, "sysid.param%d.true_field", k + 1);
  if (p->width != 1 || !sp->per_element)
    return ds__puterr(err, errlen, DS_ERR_CONFIG, "%s: needs a per-element scalar parameter, not \"%s\"", key, p->name);
  p->region = (int*)ds__calloc((size_t)p->nelem, sizeof(int));
  if (!p->region) return ds__puterr(err, errlen, DS_ERR_NOMEM, "sysid: out of memory");
  int rc = ds__sysid_field_regions(s->env, p->name, &sp->true_field, key, p->region, p->nelem, &p->nregion, err, errlen);
  if (rc) return rc;
  const dsSysidField* f = &sp->true_field;
  for (int r = 0; r < p->nregion; r++)
    rval[r] = f->nvalues ? (double)f->values[r]
                         : f->ranges[2 * r] + (f->ranges[2 * r + 1] - f->ranges[2 * r]) * ds__splitmix64_uniform(rng);
  return 0;
}

/* Parameter k's values: initial guess and truth, in the flattened layout
 * (draws from *rng in a fixed order: truth components, shared guess
 * components, then a guess per value). */
static int init_param_values(dsSysid* s, int k, uint64_t* rng, char* err, size_t errlen) {
  const dsSysidParam* sp = &s->def.params[k];
  Param* p = &s->p[k];
  const dsReal* cur = NULL;
  int n = 0;
  param_now(s, p->name, &cur, &n);
  p->zero = (unsigned char*)ds__calloc((size_t)n, 1);
  if (!p->zero) return ds__puterr(err, errlen, DS_ERR_NOMEM, "sysid: out of memory");
  int nzero = 0;
  for (int i = 0; i < n; i++) {
    p->zero[i] = p->logp && cur[i] == 0;
    nzero += p->zero[i];
  }
  if (nzero == n)
    return ds__puterr(err, errlen, DS_ERR_CONFIG,
                      "sysid.param%d: every value of \"%s\" is 0 in env \"%s\", and lower > 0 keeps zeros (fixed) at 0",
                      k + 1, p->name, ds_env_name(s->env));
  /* truth: one draw per parameter and component (a uniform material) */
  double tdraw[3] = {0, 0, 0};
  for (int c = 0; c < p->width && sp->ntruth_range == 2; c++)
    tdraw[c] = sp->truth_range[0] + (sp->truth_range[1] - sp->truth_range[0]) * ds__splitmix64_uniform(rng);
  /* a true field: a value per region (drawn after the uniform draws) */
  double rval[DS_SYSID_MAX_REGIONS] = {0};
  int rc = field_setup(s, k, rval, rng, err, errlen);
  if (rc) return rc;
  double idraw[3] = {0, 0, 0};
  for (int c = 0; c < p->width && sp->ninit_range == 2 && !sp->init_each; c++)
    idraw[c] = sp->init_range[0] + (sp->init_range[1] - sp->init_range[0]) * ds__splitmix64_uniform(rng);
  for (int i = 0; i < p->nval; i++) {
    const int j = p->offset + i;
    const int c = i % p->width;
    s->vparam[j] = k;
    if (p->nval == p->count && p->zero[i]) { /* held at 0 */
      s->fixed[j] = 1;
      continue;
    }
    double t = (double)cur[i % p->count];
    if (p->region)
      t = rval[p->region[i / p->width]];
    else if (sp->ntruth_range == 2)
      t = tdraw[c];
    else if (sp->ntruth)
      t = (double)sp->truth[sp->ntruth == 1 ? 0 : c];
    s->truth[j] = t;
    double x0 = (double)cur[i % p->count];
    if (sp->ninit_range == 2 && sp->init_each)
      x0 = sp->init_range[0] + (sp->init_range[1] - sp->init_range[0]) * ds__splitmix64_uniform(rng);
    else if (sp->ninit_range == 2)
      x0 = idraw[c];
    else if (sp->ninit)
      x0 = (double)sp->init[sp->ninit == 1 ? 0 : c];
    if (!(x0 >= sp->lower && x0 <= sp->upper))
      return ds__puterr(err, errlen, DS_ERR_CONFIG,
                        "sysid.param%d: the initial guess %g of \"%s\" (value %d) is outside the bounds [%g, %g]",
                        k + 1, x0, p->name, i, (double)sp->lower, (double)sp->upper);
    s->x0[j] = x0;
    s->ulo[j] = p->logp ? log((double)sp->lower) : (double)sp->lower;
    s->uhi[j] = p->logp ? log((double)sp->upper) : (double)sp->upper;
  }
  return 0;
}

/* Body b's value of engine array `name` at the initial guess (which 0) or
 * the truth (1) when a parameter identifies it, else the env's. */
static double body_value(const dsSysid* s, const char* name, int b, int which) {
  for (int k = 0; k < s->np; k++) {
    const Param* p = &s->p[k];
    if (strcmp(p->name, name)) continue;
    const int j = p->offset + (p->nval == p->count ? b : 0);
    return which ? s->truth[j] : s->x0[j];
  }
  const dsReal* v = NULL;
  int n = 0;
  return !ds_env_param(s->env, name, &v, &n) && b < n ? (double)v[b] : 0;
}

/* Rigid contact's friction and approach damping are explicit (engine/rigid.h).
 * Friction: while a contact vertex sticks (kf |vt| below the Coulomb cap) it
 * feels ft = -kf vt, with vt = J q its tangential (x, z) velocity, q = (v, om)
 * the body's velocities and J = [e; u x e] for e = x, z (u: the vertex's arm
 * from the centre of mass). A substep maps q to (1 - dt kf M^-1 K) q with
 * K = sum over the contact vertices of J^T J and M = diag(m, m, m, I_world),
 * so the body is stable while dt kf lambda < 2, lambda the largest eigenvalue
 * of M^-1 K. For a box on its n = 4 bottom corners lambda is the largest of
 * the translation's n/m (the old bound, dt kf n / m < 2), the yaw's
 * n rho^2 / I_yy (rho the corners' distance from the vertical through the
 * centre of mass: 3 n / m for a uniform box) and the slide-and-tip pairs'
 * n (1/m + h^2 / I) (h the centre's height over the corners). Identifying
 * body.mass does not rescale the inertia (the env's), so for rigid-toss's
 * box (the inertia of 1 kg) lambda = 12 / (kg) from 0.5 to 3 kg, and the
 * old bound let kf through up to 3x (at 1 kg) to 9x (3 kg) the stable limit.
 * Measured on that box at rest, every velocity perturbed by 1e-5 and the
 * tangential vertex speed after 1 s grown or decayed (bisection on kf,
 * ke 5e3-2e4, kd 10): the critical kf is 2 / (dt lambda) to 0.1 % at 1, 2
 * and 3 kg (160 at dt 1/960, 320 at 1/1920, 1280 at 1/7680; with the
 * inertia scaled to 0.5 and 3 kg: 80 and 480), and lower by 2-8 % for a
 * 0.5 kg body with the 1 kg inertia at dt 1/960 (the contact spring's tilt
 * couples in; 1280 exactly at dt 1/7680). So the refusal is at dt kf lambda
 * >= DS_SYSID_FRICTION_LIMIT = 1.8. A cylinder on its 17-point bottom
 * (lambda 32.8 /kg at 1 kg): 58.5 = 2 / (dt lambda) with restitution 1, but
 * 30.5 with e 0.5: the restitution damping kr (explicit too, 2 z sqrt(m ke)
 * on every vertex, unchecked here) couples in; the box's is small enough
 * not to. Past the limit the forward stays bounded
 * (the cap clips the friction) but round-off grows into the unstable mode
 * and the adjoint by |1 - dt kf lambda| a substep (a 10 g box with the 1 kg
 * box's contact: a gradient of 1e26). The approach damping kd keeps the
 * translation's dt kd n / m < 2 (not measured here). Checked at the initial
 * guess and the truth, n the body's vertices on its lowest level at reset. */
#define DS_SYSID_FRICTION_LIMIT 1.8

/* K (6 x 6, above) of body b's vertices v0..v1 on their lowest level (x at
 * reset, p the centre of mass); returns their number. u x e_x = (0, u_z,
 * -u_y), u x e_z = (u_y, -u_x, 0). */
static int friction_gram(const dsReal* x, int v0, int v1, const double* p, double K[36]) {
  double ymin = INFINITY, ymax = -INFINITY;
  for (int v = v0; v < v1; v++) {
    ymin = fmin(ymin, (double)x[3 * v + 1]);
    ymax = fmax(ymax, (double)x[3 * v + 1]);
  }
  int n = 0;
  memset(K, 0, 36 * sizeof(double));
  for (int v = v0; v < v1; v++) {
    if (!((double)x[3 * v + 1] <= ymin + 1e-6 * (ymax - ymin))) continue;
    const double u[3] = {(double)x[3 * v] - p[0], (double)x[3 * v + 1] - p[1], (double)x[3 * v + 2] - p[2]};
    const double J[2][6] = {{1, 0, 0, 0, u[2], -u[1]}, {0, 0, 1, u[1], -u[0], 0}};
    for (int e = 0; e < 2; e++)
      for (int i = 0; i < 36; i++) K[i] += J[e][i / 6] * J[e][i % 6];
    n++;
  }
  return n;
}

/* The world inertia R I R^T of body b and its inverse (R from the unit
 * initial orientation q0). */
static void world_inertia(const dsModel* m, int b, double W[9], double Winv[9]) {
  const dsReal* q0 = m->body_q0 + 4 * (size_t)b;
  const double qn = sqrt((double)q0[0] * q0[0] + (double)q0[1] * q0[1] + (double)q0[2] * q0[2] + (double)q0[3] * q0[3]);
  const double w = q0[0] / qn, x = q0[1] / qn, y = q0[2] / qn, z = q0[3] / qn;
  const double R[9] = {1 - 2 * (y * y + z * z), 2 * (x * y - w * z),     2 * (x * z + w * y),
                       2 * (x * y + w * z),     1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
                       2 * (x * z - w * y),     2 * (y * z + w * x),     1 - 2 * (x * x + y * y)};
  const dsReal* I = m->body_inertia + 9 * (size_t)b;
  for (int i = 0; i < 9; i++) {
    W[i] = 0;
    for (int k = 0; k < 3; k++)
      for (int l = 0; l < 3; l++) W[i] += R[3 * (i / 3) + k] * (double)I[3 * k + l] * R[3 * (i % 3) + l];
  }
  const double c[9] = {W[4] * W[8] - W[5] * W[7], W[2] * W[7] - W[1] * W[8], W[1] * W[5] - W[2] * W[4],
                       W[5] * W[6] - W[3] * W[8], W[0] * W[8] - W[2] * W[6], W[2] * W[3] - W[0] * W[5],
                       W[3] * W[7] - W[4] * W[6], W[1] * W[6] - W[0] * W[7], W[0] * W[4] - W[1] * W[3]};
  const double det = W[0] * c[0] + W[1] * c[3] + W[2] * c[6];
  for (int i = 0; i < 9; i++) Winv[i] = det > 0 ? c[i] / det : 0;
}

/* lambda, the largest eigenvalue of M^-1 K (M = diag(mass, mass, mass, W)):
 * power iteration, then the Rayleigh quotient q.Kq / q.Mq (M^-1 K is
 * self-adjoint in M's inner product, its eigenvalues real and >= 0). */
static double friction_rate(const double K[36], double mass, const double W[9], const double Winv[9]) {
  double q[6] = {1, 0.9, 0.8, 0.7, 0.6, 0.5}, kq[6], mq[6];
  for (int it = 0; it < 400; it++) {
    for (int i = 0; i < 6; i++) {
      kq[i] = 0;
      for (int j = 0; j < 6; j++) kq[i] += K[6 * i + j] * q[j];
    }
    double z[6], zmax = 0;
    for (int i = 0; i < 3; i++) z[i] = kq[i] / mass;
    for (int i = 0; i < 3; i++) z[3 + i] = Winv[3 * i] * kq[3] + Winv[3 * i + 1] * kq[4] + Winv[3 * i + 2] * kq[5];
    for (int i = 0; i < 6; i++) zmax = fmax(zmax, fabs(z[i]));
    if (!(zmax > 0)) return 0;
    for (int i = 0; i < 6; i++) q[i] = z[i] / zmax;
  }
  double qkq = 0, qmq = 0;
  for (int i = 0; i < 6; i++) {
    kq[i] = 0;
    for (int j = 0; j < 6; j++) kq[i] += K[6 * i + j] * q[j];
    mq[i] = i < 3 ? mass * q[i] : W[3 * (i - 3)] * q[3] + W[3 * (i - 3) + 1] * q[4] + W[3 * (i - 3) + 2] * q[5];
    qkq += q[i] * kq[i];
    qmq += q[i] * mq[i];
  }
  return qkq / qmq;
}

/* Body b at its initial guess (which 0) or truth (1): the friction's
 * dt kf lambda at or above DS_SYSID_FRICTION_LIMIT, or kd's dt kd n / m at or
 * above 2, is refused (above). */
static int rigid_check_body(dsSysid* s, int b, int which, int n, const double K[36], const double W[9],
                            const double Winv[9], char* err, size_t errlen) {
  const double dt = (double)ds_env_def(s->env)->dt;
  const double mass = body_value(s, "body.mass", b, which);
  const double kf = body_value(s, "body.contact_kf", b, which);
  const double kd = body_value(s, "body.contact_kd", b, which);
  if (!(mass > 0)) return 0;
  const double lambda = friction_rate(K, mass, W, Winv), rf = dt * kf * lambda, rd = dt * kd * n / mass;
  const char* at = which ? "true value" : "initial guess";
  if (rf >= DS_SYSID_FRICTION_LIMIT)
    return ds__puterr(err, errlen, DS_ERR_CONFIG,
                      "sysid: body %d at its %s: body.contact_kf %g N s/m is at or above the bound %.4g N s/m "
                      "(dt kf lambda < %g, lambda = %.4g /kg the fastest mode of the explicit friction on %d "
                      "contact vertices with mass %g kg and the body's inertia, dt %g s), where round-off "
                      "and the gradient grow without bound; lower kf (env.contact.kf, or the sysid parameter's "
                      "ranges) or env.physics.dt",
                      b, at, kf, DS_SYSID_FRICTION_LIMIT / (dt * lambda), DS_SYSID_FRICTION_LIMIT, lambda, n, mass, dt);
  if (rd >= 2)
    return ds__puterr(err, errlen, DS_ERR_CONFIG,
                      "sysid: body %d at its %s: mass %g kg with contact kd %g N s/m on %d vertices gives dt kd n "
                      "/ m = %.3g, at or above 2, where the explicit contact makes the gradient grow without "
                      "bound; scale env.contact.ke, kd and kf with the mass (a 10-100 g body: 1/50 of the "
                      "1 kg box's) or lower env.physics.dt",
                      b, at, mass, kd, n, rd);
  return 0;
}

static int rigid_check(dsSysid* s, char* err, size_t errlen) {
  const int* range = NULL;
  int nbody = 0, per = 0;
  if (ds_env_elements(s->env, "body.mass", &range, &nbody, &per)) return 0;
  const dsReal* x = ds_env_positions(s->env);
  const dsModel* m = ds_env_model(s->env);
  for (int b = 0; b < nbody && x && m && b < m->nbody; b++) {
    double K[36], W[9], Winv[9], p[3];
    for (int k = 0; k < 3; k++) p[k] = (double)m->body_x0[3 * b + k];
    const int n = friction_gram(x, range[2 * b], range[2 * b + 1], p, K);
    world_inertia(m, b, W, Winv);
    for (int which = 0; which < 1 + s->have_truth; which++) {
      const int rc = rigid_check_body(s, b, which, n, K, W, Winv, err, errlen);
      if (rc) return rc;
    }
  }
  return 0;
}

/* The frames' schedule: frame f at substep sub is the image of step k (the
 * step ending there); C the frame interval, T the episode's substeps. */
static int frame_schedule(dsSysid* s, const dsSysidVideo* video, int C, int T, char* err, size_t errlen) {
  const int F = s->video.nframes;
  for (int k = 0; k < s->nstep; k++) s->step_frame[k] = -1;
  for (int f = 0; f < F; f++) {
    const int sub = video ? video->substep[f] : (f + 1 < s->nstep ? (f + 1) * C : T);
    int k = -1;
    if (sub == T)
      k = s->nstep - 1;
    else if (sub > 0 && sub < T && sub % C == 0)
      k = sub / C - 1;
    if (k < 0 || (f > 0 && sub <= s->substep[f - 1]))
      return ds__puterr(err, errlen, DS_ERR_CONFIG,
                        "video frame %d: substep %d is not after the previous frame at a multiple of the frame "
                        "interval %d (env.physics.render_interval) within the episode (%d substeps)",
                        f, sub, C, T);
    s->substep[f] = sub;
    s->fstep[f] = k;
    s->step_frame[k] = f;
    s->used[f] = s->def.frames == DS_SYSID_FRAMES_ALL || f == F - 1 ||
                 (s->def.frames == DS_SYSID_FRAMES_FIRST_LAST && f == 0);
    s->nused += s->used[f];
  }
  return 0;
}

/* sysid.video "camsim": the known background (always: an object given
 * another's video needs it too) and, without a video, the true episode
 * filmed by the camera simulator; frame f under the light 1 - drift f/(F-1),
 * its noise from (env seed, f). */
static int camsim_video(dsSysid* s, int film, char* err, size_t errlen) {
  dsCamSim* cam = NULL;
  char why[256] = "";
  int rc = ds_env_camsim_create(s->env, &s->def.camsim.cam, &cam, why, sizeof why);
  if (rc) return ds__puterr(err, errlen, rc, "sysid.camsim: %s", why);
  s->bg = (dsReal*)ds__calloc(s->npix, sizeof(dsReal));
  s->comp = (dsReal*)ds__calloc(s->npix, sizeof(dsReal));
  if (!s->bg || !s->comp) rc = ds__puterr(err, errlen, DS_ERR_NOMEM, "sysid: out of memory");
  if (!rc) memcpy(s->bg, ds_camsim_background(cam), s->npix * sizeof(dsReal));
  const int F = s->video.nframes;
  if (!rc && film) rc = ds_env_reset(s->env, s->env_seed, NULL, NULL);
  if (!rc && film) rc = set_params_in(s, s->env, s->truth);
  for (int k = 0; k < s->nstep && !rc && film; k++) {
    int done = 0;
    rc = ds_env_step(s->env, s->action, NULL, s->scratch_img, NULL, &done);
    const int f = s->step_frame[k];
    uint64_t seed = s->env_seed ^ 0x5eed0f11a7e5ull, fs = (uint64_t)f;
    seed ^= ds__splitmix64(&fs);
    const double light = 1 - s->def.camsim.drift * (F > 1 ? (double)f / (F - 1) : 0);
    if (!rc && f >= 0) rc = ds_env_camsim_render(s->env, cam, (dsReal)light, seed, s->rgba + (size_t)f * s->npix);
  }
  /* the identifier's colours: the face classes at the rest shape */
  if (!rc && s->def.camsim.fit_shading) rc = ds_env_reset(s->env, s->env_seed, NULL, NULL);
  if (!rc && s->def.camsim.fit_shading) rc = ds_env_camsim_paint_faces(s->env);
  if (rc && err && errlen && !err[0]) ds__puterr(err, errlen, rc, "camsim video: %s", ds_env_last_error(s->env));
  ds_camsim_destroy(cam);
  return rc;
}

/* The target video: the caller's frames, or rendered with the true values. */
static int setup_video(dsSysid* s, const dsSysidVideo* video, int C, int T, char* err, size_t errlen) {
  s->have_truth = video == NULL;
  s->video.nframes = video ? video->nframes : s->nstep;
  s->video.width = video ? video->width : s->w;
  s->video.height = video ? video->height : s->h;
  const int F = s->video.nframes;
  if (F < 1) return ds__puterr(err, errlen, DS_ERR_CONFIG, "video: no frames");
  s->substep = (int*)ds__calloc((size_t)F, sizeof(int));
  s->fstep = (int*)ds__calloc((size_t)F, sizeof(int));
  s->used = (int*)ds__calloc((size_t)F, sizeof(int));
  s->rgba = (dsReal*)ds__calloc((size_t)F * s->npix, sizeof(dsReal));
  s->rendered = (dsReal*)ds__calloc((size_t)F * s->npix, sizeof(dsReal));
  if (!s->substep || !s->fstep || !s->used || !s->rgba || !s->rendered)
    return ds__puterr(err, errlen, DS_ERR_NOMEM, "sysid: out of memory");
  int rc = frame_schedule(s, video, C, T, err, errlen);
  if (rc) return rc;
  s->video.substep = s->substep;
  if (s->def.video == DS_SYSID_CAMSIM) {
    rc = camsim_video(s, !video, err, errlen);
    if (rc) return rc;
  }
  if (video) {
    memcpy(s->rgba, video->rgba, (size_t)F * s->npix * sizeof(dsReal)); /* several views: the first's */
    if (s->views) ds__sysid_views_set_goal(s->views, video);
  } else if (s->def.video != DS_SYSID_CAMSIM) {
    double l = 0;
    rc = episode(s, s->truth, &l, 0);
    if (rc) return ds__puterr(err, errlen, rc, "synthetic video: %s", ds__errmsg(&s->err));
    memcpy(s->rgba, s->rendered, (size_t)F * s->npix * sizeof(dsReal));
  }
  s->video.rgba = s->rgba;
  if (s->bg && s->def.camsim.silhouette > 0) {
    const size_t P = s->npix / 4;
    s->mask = (dsReal*)ds__calloc((size_t)F * P, sizeof(dsReal));
    double* d = (double*)ds__calloc(P, sizeof(double));
    unsigned char* in = (unsigned char*)ds__calloc(P, 1);
    const int ok = s->mask && d && in;
    for (int f = 0; ok && f < F; f++) footage_mask(s, s->rgba + (size_t)f * s->npix, s->mask + (size_t)f * P, d, in);
    ds__free(d);
    ds__free(in);
    if (!ok) return ds__puterr(err, errlen, DS_ERR_NOMEM, "sysid: out of memory");
  }
  return 0;
}

/* The optimiser, in u, from the initial guess. */
static int create_optimiser(dsSysid* s, char* err, size_t errlen) {
  const dsSysidDef* def = &s->def;
  for (int i = 0; i < s->nval; i++) {
    s->x[i] = s->x0[i];
    s->u[i] = s->fixed[i] ? 0 : to_u(&s->p[s->vparam[i]], s->x0[i]);
  }
  /* one optimiser (and loss) per stage, made here: iterate allocates nothing */
  s->nst = def->nstages > 0 ? def->nstages : 1;
  int rc = 0;
  for (int st = 0; st < s->nst && !rc; st++) {
    const dsSysidStage* g = def->nstages ? &def->stages[st] : NULL;
    const double lr = g && g->lr > 0 ? g->lr : def->lr;
    if (def->optimizer == DS_SYSID_LBFGS) {
      dsLbfgsDef ld = ds_default_lbfgs_def();
      ld.memory = def->lbfgs_memory;
      ld.step0 = lr > 0 ? lr : 1;
      ld.max_linesearch = 12; /* every try is an episode */
      rc = ds_lbfgs_create(&ld, s->nval, &s->lbs[st]);
      if (!rc) rc = ds_lbfgs_set_bounds(s->lbs[st], s->ulo, s->uhi);
    } else {
      dsOptimDef od = ds_default_optim_def(def->optimizer == DS_SYSID_SGD ? DS_OPTIM_SGD : DS_OPTIM_ADAM);
      od.lr = lr;
      od.momentum = def->momentum;
      rc = ds_optim_create(&od, s->nval, &s->opts[st]);
    }
    if (rc) return ds__puterr(err, errlen, rc, "sysid: optimiser: %s", ds_strerror(rc));
    if (g && g->loss != DS_SYSID_LOSS_ENV) {
      /* the env's loss (levels, moments) of the stage's kind: dsSysidStageLoss k > 0 is dsLossKind k - 1 */
      char why[256] = "";
      rc = ds_env_image_loss_create(s->env, g->loss - 1, &s->ils[st], why, sizeof why);
      if (rc) return ds__puterr(err, errlen, rc, "sysid.stages[%d].loss: %s", st, why);
    }
  }
  s->restarts_left = def->optimizer == DS_SYSID_LBFGS ? def->restarts : 0;
  s->rbest_loss = INFINITY;
  if (s->restarts_left) {
    s->rbest = (double*)ds__calloc((size_t)s->nval, sizeof(double));
    if (!s->rbest) return ds__puterr(err, errlen, DS_ERR_NOMEM, "sysid: out of memory");
    s->restart_rng = s->env_seed ^ 0x7e57a27ull; /* its own stream: the object's draws stay as they were */
  }
  enter_stage(s, 0);
  return 0;
}

/* A new start (sysid.restarts) after the last stage's L-BFGS stopped: the
 * best so far kept aside, every value with an init_range drawn again (the
 * others from the initial guess), the schedule from its first stage with
 * fresh L-BFGS memories. */
static int restart(dsSysid* s) {
  if (s->best_loss < s->rbest_loss) {
    s->rbest_loss = s->best_loss;
    memcpy(s->rbest, s->best, (size_t)s->nval * sizeof(double));
  }
  for (int i = 0; i < s->nval; i++) {
    const dsSysidParam* sp = &s->def.params[s->vparam[i]];
    s->x[i] = s->x0[i];
    if (!s->fixed[i] && sp->ninit_range == 2)
      s->x[i] = sp->init_range[0] + (sp->init_range[1] - sp->init_range[0]) * ds__splitmix64_uniform(&s->restart_rng);
  }
  for (int st = 0; st < s->nst; st++) {
    if (!s->lbs[st]) continue;
    dsLbfgsDef ld = ds_default_lbfgs_def();
    const dsSysidStage* g = s->def.nstages ? &s->def.stages[st] : NULL;
    const double lr = g && g->lr > 0 ? g->lr : s->def.lr;
    ld.memory = s->def.lbfgs_memory;
    ld.step0 = lr > 0 ? lr : 1;
    ld.max_linesearch = 12;
    ds_lbfgs_destroy(s->lbs[st]);
    s->lbs[st] = NULL;
    int rc = ds_lbfgs_create(&ld, s->nval, &s->lbs[st]);
    if (!rc) rc = ds_lbfgs_set_bounds(s->lbs[st], s->ulo, s->uhi);
    if (rc) return ds__seterr(&s->err, rc, "sysid restart: optimiser: %s", ds_strerror(rc));
  }
  s->restarts_left--;
  enter_stage(s, 0);
  return 0;
}

/* Stage st from the current estimates: its free parameters, its optimiser
 * from scratch, its loss; the best point and L-BFGS's stop are the stage's. */
static void enter_stage(dsSysid* s, int st) {
  const dsSysidDef* def = &s->def;
  s->stage = st;
  s->stage_first = s->iter;
  s->stage_end = s->iter + (def->nstages ? def->stages[st].iterations : def->iterations);
  s->opt = s->opts[st];
  s->lb = s->lbs[st];
  s->il = s->ils[st];
  if (s->opt) ds_optim_reset(s->opt);
  if (st > 0) /* the estimates of the last iteration (Adam/SGD stepped past them) */
    memcpy(s->x, s->itx, (size_t)s->nval * sizeof(double));
  for (int i = 0; i < s->nval; i++) {
    s->frozen[i] = def->nstages && !s->fixed[i] && !(def->stages[st].free_mask >> s->vparam[i] & 1u);
    s->xstage[i] = s->x[i];
    s->u[i] = s->fixed[i] ? 0 : to_u(&s->p[s->vparam[i]], s->x[i]);
  }
  s->stop = NULL;
  s->have_f = 0;
  s->best_loss = INFINITY;
  memcpy(s->best, s->x, (size_t)s->nval * sizeof(double));
}

/* Before an iteration: the next stage when this one ran its iterations or
 * L-BFGS found nothing left in it. */
static void stage_advance(dsSysid* s) {
  if (s->stage + 1 < s->nst && (s->iter >= s->stage_end || s->stop)) enter_stage(s, s->stage + 1);
}

static int sysid_create(const dsEnvDef* env_def, const dsSysidDef* def, int object, const dsSysidVideo* video,
                        int group, dsSysid** out, char* err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (!env_def || !def || !out || object < 0) return DS_ERR_INVALID;
  *out = NULL;
  int rc = ds_sysid_def_validate(def, err, errlen);
  if (rc) return rc;
  dsSysid* s = (dsSysid*)ds__calloc(1, sizeof *s);
  if (!s) return DS_ERR_NOMEM;
  s->def = *def;
  s->np = ds_sysid_num_params(def);
  uint64_t rng = object_seed(def, object);
  dsEnvDef ed;
  int maxcount = 1;
  rc = create_env(s, env_def, object, video, group, &ed, err, errlen);
  if (!rc) rc = param_layout(s, &maxcount, err, errlen);
  if (!rc) rc = alloc_buffers(s, maxcount, err, errlen);
  for (int k = 0; k < s->np && !rc; k++) rc = init_param_values(s, k, &rng, err, errlen);
  if (!rc) rc = rigid_check(s, err, errlen);
  if (!rc) rc = setup_video(s, video, ed.control_interval, ed.substeps, err, errlen);
  if (!rc) rc = create_optimiser(s, err, errlen);
  if (rc) {
    ds_sysid_destroy(s);
    return rc;
  }
  *out = s;
  return 0;
}

static int finish_iteration(dsSysid* s, dsSysidIter* it, int rc, int nev);
/* L-BFGS stops at a projected gradient norm this small relative to iteration 0's */
#define SYSID_GTOL 1e-10

/* |dL/du| without the components that push u out of its bounds (a step
 * could not follow them) */
static double projected_gradient_norm(const dsSysid* s) {
  double n = 0;
  for (int i = 0; i < s->nval; i++) {
    const double g = s->gu[i];
    const int held = (s->u[i] <= s->ulo[i] && g > 0) || (s->u[i] >= s->uhi[i] && g < 0);
    if (!held) n += g * g;
  }
  return sqrt(n);
}

/* a stage that stops hands over to the next: only the last one's stop ends the run */
const char* ds_sysid_stop_reason(const dsSysid* s) {
  if (!s) return "";
  if (s->stop && s->stage + 1 == s->nst) return s->restarts_left > 0 ? "" : s->stop;
  if (s->def.nstages && s->stage + 1 == s->nst && s->iter >= s->stage_end && s->iter < s->def.iterations)
    return "schedule done: every stage ran its iterations";
  return "";
}

int ds_sysid_iterate(dsSysid* s, dsSysidIter* it) {
  if (!s || !it) return DS_ERR_INVALID;
  ds__clearerr(&s->err);
  memset(it, 0, sizeof *it);
  stage_advance(s);
  if (s->restarts_left > 0 && s->stop && s->stage + 1 == s->nst) {
    const int r = restart(s);
    if (r) return r;
  }
  it->iteration = s->iter;
  int rc = 0, nev = 0;
  if (s->lb && s->have_f && s->stop) {
    nev = 0;
  } else if (s->lb && s->have_f) {
    rc = ds_lbfgs_step(s->lb, s->u, &s->f, s->gu, objective, s, &nev);
    if (rc == DS_ERR_RANGE) { /* no decrease: once more from steepest descent, then stay */
      int nev2 = 0;
      rc = ds_lbfgs_step(s->lb, s->u, &s->f, s->gu, objective, s, &nev2);
      nev += nev2;
      if (rc == DS_ERR_RANGE) {
        s->stop = "converged: no decrease along steepest descent (line search)";
        rc = 0;
      }
    }
  } else {
    /* at s->x: the exact values (the initial guess as given, not exp(log(x))) */
    rc = s->iter == s->stage_first || s->lb ? eval_at(s, s->x, &s->f, s->gu) : objective(s, s->u, &s->f, s->gu);
    nev = 1;
    /* Adam/SGD: a step whose episode failed is halved back towards the
       previous iterate (the optimiser's moments are kept) */
    for (int b = 0; !rc && !isfinite(s->f) && s->iter > s->stage_first && b < 20; b++) {
      for (int i = 0; i < s->nval; i++) s->u[i] = 0.5 * (s->u[i] + s->uprev[i]);
      rc = objective(s, s->u, &s->f, s->gu);
      nev++;
    }
    if (!rc && !isfinite(s->f))
      return ds__seterr(&s->err, DS_ERR_DIVERGED, "the episode diverged or inverted an element at the estimates (%s)",
                        ds_env_last_error(s->env));
    s->have_f = 1;
  }
  return finish_iteration(s, it, rc, nev);
}

/* The rest of an iteration once its evaluations are done (rc: their outcome). */
static int finish_iteration(dsSysid* s, dsSysidIter* it, int rc, int nev) {
  if (rc) return s->err.code ? rc : ds__seterr(&s->err, rc, "iteration %d failed (%s)", s->iter, ds_strerror(rc));
  const double pg = s->lb ? projected_gradient_norm(s) : 0;
  if (s->iter == s->stage_first) {
    s->f0 = s->f;
    s->g0 = pg;
  }
  /* L-BFGS: the loss at round-off of its start, or a gradient (within the
   * bounds) at round-off of its start: nothing left to find */
  if (s->lb && !s->stop && s->f <= s->def.loss_tolerance * s->f0)
    s->stop = s->def.loss_tolerance == SYSID_LOSS_TOL ? "converged: loss at most 1e-15 of its initial value"
                                                      : "converged: loss at most sysid.loss_tolerance of its initial value";
  if (s->lb && !s->stop && pg <= SYSID_GTOL * s->g0)
    s->stop = "gradient tolerance: projected gradient at most 1e-10 of its initial norm";
  if (s->lb)
    u_to_x(s, s->u, s->x); /* the accepted point (a trial that failed may have been evaluated last) */
  else
    memcpy(s->x, s->itx, (size_t)s->nval * sizeof(double)); /* the values evaluated */
  double nn = 0;
  for (int i = 0; i < s->nval; i++) nn += s->gu[i] * s->gu[i];
  memcpy(s->itx, s->x, (size_t)s->nval * sizeof(double));
  it->loss = s->f;
  it->grad_norm = sqrt(nn);
  it->values = s->itx;
  it->evaluations = nev;
  if (s->f < s->best_loss) {
    s->best_loss = s->f;
    memcpy(s->best, s->x, (size_t)s->nval * sizeof(double));
  }
  if (s->opt) { /* the step for the next iteration */
    memcpy(s->uprev, s->u, (size_t)s->nval * sizeof(double));
    rc = ds_optim_step(s->opt, s->u, s->gu, NULL);
    if (rc) return ds__seterr(&s->err, rc, "optimiser step: gradient not finite");
    for (int i = 0; i < s->nval; i++) {
      if (s->u[i] < s->ulo[i]) s->u[i] = s->ulo[i];
      if (s->u[i] > s->uhi[i]) s->u[i] = s->uhi[i];
    }
    s->have_f = 0;
    u_to_x(s, s->u, s->x);
  }
  s->iter++;
  return 0;
}

int ds_sysid_errors(const dsSysid* s, const double* values, double* are) {
  if (!s || !are) return DS_ERR_INVALID;
  if (!s->have_truth) return DS_ERR_STATE;
  if (!values) values = ds_sysid_best_values(s, NULL);
  for (int k = 0; k < s->np; k++) {
    const Param* p = &s->p[k];
    const int rows = p->nval / p->width;
    double sum = 0;
    int used = 0;
    for (int r = 0; r < rows; r++) {
      if (s->fixed[p->offset + r * p->width]) continue;
      used++;
      double dn = 0, tn = 0;
      for (int c = 0; c < p->width; c++) {
        const int j = p->offset + r * p->width + c;
        dn += (values[j] - s->truth[j]) * (values[j] - s->truth[j]);
        tn += s->truth[j] * s->truth[j];
      }
      sum += tn > 0 ? sqrt(dn / tn) : sqrt(dn);
    }
    are[k] = used ? sum / used : 0;
  }
  return 0;
}

int ds_sysid_field_errors(const dsSysid* s, int k, const double* values, double* rel_l2, double* region_are,
                          int* nregion) {
  if (!s || k < 0 || k >= s->np || !rel_l2) return DS_ERR_INVALID;
  if (!s->have_truth) return DS_ERR_STATE;
  if (!values) values = ds_sysid_best_values(s, NULL);
  const Param* p = &s->p[k];
  double dn = 0, tn = 0, sum[DS_SYSID_MAX_REGIONS] = {0};
  int cnt[DS_SYSID_MAX_REGIONS] = {0};
  for (int i = 0; i < p->nval; i++) {
    const int j = p->offset + i;
    if (s->fixed[j]) continue;
    const double d = values[j] - s->truth[j];
    dn += d * d;
    tn += s->truth[j] * s->truth[j];
    if (p->region && p->nval == p->count) {
      const int r = p->region[i / p->width];
      sum[r] += s->truth[j] != 0 ? fabs(d / s->truth[j]) : fabs(d);
      cnt[r]++;
    }
  }
  *rel_l2 = tn > 0 ? sqrt(dn / tn) : sqrt(dn);
  const int nr = p->region ? p->nregion : 0;
  for (int r = 0; r < nr && region_are; r++) region_are[r] = cnt[r] ? sum[r] / cnt[r] : 0;
  if (nregion) *nregion = nr;
  return 0;
}

int ds_sysid_field_region(const dsSysid* s, int k, const int** region, int* nelem) {
  if (!s || k < 0 || k >= s->np || !region) return DS_ERR_INVALID;
  *region = s->p[k].region;
  if (nelem) *nelem = s->p[k].nelem;
  return s->p[k].region ? s->p[k].nregion : 0;
}

int ds_sysid_stage(const dsSysid* s) { return s ? s->stage : -1; }

/* ---- groups: several objects evaluated together ---------------------------------
 * One lockstep batch of the objects' envs (dsim/batch.h) runs every
 * evaluation: each object's episode is one env (on the batched engine,
 * one instance of one engine with its tape), reset with the object's seed
 * and its values, stepped and gone back through with the others. An
 * object's own env (forward only, on the CPU) keeps what is not an
 * evaluation: its synthetic video, its image loss and the frames of
 * records. Gradient methods only: every object evaluates once per
 * iteration (and again, halved back, after a failed episode). */
struct dsSysidGroup {
  int n;
  dsSysid** s;
  dsBatch* b;
  uint64_t* seeds;
  dsReal *act, *img, *adj; /* n x adim, n x npix, n x nstep x npix */
  double* f;               /* n: losses of the last evaluation */
  int *rc, *status, *nev;
  int* dead;               /* n: the error that ended an object's identification (0: going on) */
  unsigned char* want;     /* n: objects that take the evaluation's result */
  dsErrBuf err;
};

void ds_sysid_group_destroy(dsSysidGroup* g) {
  if (!g) return;
  for (int i = 0; g->s && i < g->n; i++) ds_sysid_destroy(g->s[i]);
  ds_batch_destroy(g->b);
  void* bufs[] = {g->s, g->seeds, g->act, g->img, g->adj, g->f, g->rc, g->status, g->nev, g->dead, g->want};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) ds__free(bufs[i]);
  ds__free(g);
}

int ds_sysid_group_create(const dsEnvDef* env_def, const dsSysidDef* def, const int* objects, int n,
                          const dsSysidVideo* video, dsSysidGroup** out, char* err, size_t errlen) {
  if (err && errlen) err[0] = '\0';
  if (!env_def || !def || !objects || n < 1 || !out) return DS_ERR_INVALID;
  *out = NULL;
  if (def->optimizer == DS_SYSID_LBFGS)
    return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED,
                      "sysid group: optimizer lbfgs runs a line search of its own per object; identify the objects "
                      "together with adam or sgd, or one by one");
  dsSysidGroup* g = (dsSysidGroup*)ds__calloc(1, sizeof *g);
  if (!g) return DS_ERR_NOMEM;
  g->n = n;
  g->s = (dsSysid**)ds__calloc((size_t)n, sizeof(dsSysid*));
  if (!g->s) {
    ds_sysid_group_destroy(g);
    return DS_ERR_NOMEM;
  }
  char msg[DS_ERRMSG_LEN];
  for (int i = 0; i < n; i++) {
    /* an object already made (the same draws) lends its synthetic video:
       rendered once, and its true values stay known */
    int same = -1;
    for (int j = 0; j < i && same < 0 && !video; j++)
      if (objects[j] == objects[i]) same = j;
    int rc = sysid_create(env_def, def, objects[i], same >= 0 ? &g->s[same]->video : video, 1, &g->s[i], msg,
                          sizeof msg);
    if (!rc && same >= 0) g->s[i]->have_truth = 1;
    if (rc) {
      ds__puterr(err, errlen, rc, "object %d: %s", objects[i], msg);
      ds_sysid_group_destroy(g);
      return rc;
    }
  }
  const dsEnvDef ed = sysid_env_def(env_def);
  int rc = ds_batch_create_lockstep(&ed, n, &g->b, msg, sizeof msg);
  if (rc) {
    ds__puterr(err, errlen, rc, "sysid group of %d: %s", n, msg);
    ds_sysid_group_destroy(g);
    return rc;
  }
  const dsSysid* s0 = g->s[0];
  const size_t adim = (size_t)(s0->adim > 0 ? s0->adim : 1);
  g->seeds = (uint64_t*)ds__calloc((size_t)n, sizeof(uint64_t));
  g->act = (dsReal*)ds__calloc((size_t)n * adim, sizeof(dsReal));
  g->img = (dsReal*)ds__calloc((size_t)n * s0->npix, sizeof(dsReal));
  g->adj = (dsReal*)ds__calloc((size_t)n * (size_t)s0->nstep * s0->npix, sizeof(dsReal));
  g->f = (double*)ds__calloc((size_t)n, sizeof(double));
  g->rc = (int*)ds__calloc((size_t)n, sizeof(int));
  g->status = (int*)ds__calloc((size_t)n, sizeof(int));
  g->nev = (int*)ds__calloc((size_t)n, sizeof(int));
  g->want = (unsigned char*)ds__calloc((size_t)n, 1);
  g->dead = (int*)ds__calloc((size_t)n, sizeof(int));
  if (!g->seeds || !g->act || !g->img || !g->adj || !g->f || !g->rc || !g->status || !g->nev || !g->want ||
      !g->dead) {
    ds_sysid_group_destroy(g);
    return ds__puterr(err, errlen, DS_ERR_NOMEM, "sysid group: out of memory");
  }
  for (int i = 0; i < n; i++) {
    g->seeds[i] = g->s[i]->env_seed;
    if (g->s[i]->adim > 0) memcpy(g->act + (size_t)i * adim, g->s[i]->action, (size_t)g->s[i]->adim * sizeof(dsReal));
  }
  *out = g;
  return 0;
}

int ds_sysid_group_size(const dsSysidGroup* g) { return g ? g->n : 0; }
dsSysid* ds_sysid_group_object(dsSysidGroup* g, int i) { return g && i >= 0 && i < g->n ? g->s[i] : NULL; }
const char* ds_sysid_group_last_error(const dsSysidGroup* g) { return g ? ds__errmsg(&g->err) : ""; }

/* Every object's episode at its s->itx, forward and backward together; a
 * wanted object takes the outcome: its loss in g->f and dL/du in s->gu
 * (objective_of: a failed episode is a loss of +inf), or its error in
 * g->rc. The others' episodes run too (the batch steps all) and are left. */
static int group_eval(dsSysidGroup* g, int as_objective) {
  const int n = g->n;
  dsSysid* s0 = g->s[0];
  const size_t npix = s0->npix;
  int rc = ds_batch_reset(g->b, g->seeds, NULL, NULL, NULL, g->status);
  if (rc) return ds__seterr(&g->err, rc, "reset: %s", ds_batch_last_error(g->b));
  for (int i = 0; i < n; i++) {
    const int r = set_params_in(g->s[i], ds_batch_env(g->b, i), g->s[i]->itx);
    if (g->want[i]) g->rc[i] = r;
  }
  for (int k = 0; k < s0->nstep; k++) {
    ds_batch_step(g->b, g->act, NULL, g->img, NULL, NULL, g->status, 0);
    for (int i = 0; i < n; i++) {
      dsSysid* s = g->s[i];
      if (!g->want[i] || g->rc[i]) continue;
      if (g->status[i] < 0) {
        g->rc[i] = ds__seterr(&s->err, g->status[i], "step %d: %s", k, ds_env_last_error(ds_batch_env(g->b, i)));
        continue;
      }
      const int f = s->step_frame[k];
      if (f >= 0) memcpy(s->rendered + (size_t)f * npix, g->img + (size_t)i * npix, npix * sizeof(dsReal));
    }
  }
  for (int i = 0; i < n; i++) {
    dsReal* adj = g->adj + (size_t)i * s0->nstep * npix;
    if (!g->want[i] || g->rc[i])
      memset(adj, 0, (size_t)s0->nstep * npix * sizeof(dsReal));
    else
      g->rc[i] = video_loss(g->s[i], adj, &g->f[i]);
  }
  ds_batch_backward_adjoints(g->b, NULL, g->adj, NULL, NULL, g->status);
  for (int i = 0; i < n; i++) {
    dsSysid* s = g->s[i];
    if (!g->want[i]) continue;
    if (!g->rc[i] && g->status[i] < 0)
      g->rc[i] = ds__seterr(&s->err, g->status[i], "backward: %s", ds_env_last_error(ds_batch_env(g->b, i)));
    if (!g->rc[i]) g->rc[i] = read_grad(s, ds_batch_env(g->b, i), s->gx);
    if (as_objective) g->rc[i] = objective_of(s, g->rc[i], &g->f[i], s->gu);
  }
  return 0;
}

int ds_sysid_group_eval(dsSysidGroup* g, const double* values, double* losses, double* grads, int* status) {
  if (!g || !values || !losses) return DS_ERR_INVALID;
  ds__clearerr(&g->err);
  const int n = g->n, nv = g->s[0]->nval;
  for (int i = 0; i < n; i++) {
    dsSysid* s = g->s[i];
    ds__clearerr(&s->err);
    memcpy(s->itx, values + (size_t)i * nv, (size_t)nv * sizeof(double));
    g->want[i] = 1;
    g->rc[i] = 0;
  }
  int rc = group_eval(g, 0);
  if (rc) return rc;
  int first = 0;
  for (int i = 0; i < n; i++) {
    const int r = g->rc[i];
    losses[i] = r ? INFINITY : g->f[i];
    if (grads) {
      double* gi = grads + (size_t)i * nv;
      for (int j = 0; j < nv; j++) gi[j] = r ? 0 : g->s[i]->gx[j];
    }
    if (status) status[i] = r;
    if (r && !first) first = ds__seterr(&g->err, r, "evaluation %d: %s", i, ds__errmsg(&g->s[i]->err));
  }
  return first;
}

int ds_sysid_group_iterate(dsSysidGroup* g, dsSysidIter* its, int* status) {
  if (!g || !its) return DS_ERR_INVALID;
  ds__clearerr(&g->err);
  const int n = g->n;
  for (int i = 0; i < n; i++) {
    dsSysid* s = g->s[i];
    if (!g->dead[i]) ds__clearerr(&s->err);
    memset(&its[i], 0, sizeof its[i]);
    if (!g->dead[i]) stage_advance(s);
    its[i].iteration = s->iter;
    /* the point: the exact initial guess (of the stage) first, then the optimiser's */
    if (s->iter == s->stage_first)
      memcpy(s->itx, s->x, (size_t)s->nval * sizeof(double));
    else
      u_to_x(s, s->u, s->itx);
    g->want[i] = !g->dead[i];
    g->rc[i] = 0;
    g->nev[i] = 1;
  }
  int rc = group_eval(g, 1);
  if (rc) return rc;
  /* a step whose episode failed is halved back towards the previous iterate */
  for (int b = 0; b < 20; b++) {
    int any = 0;
    for (int i = 0; i < n; i++) {
      dsSysid* s = g->s[i];
      g->want[i] = !g->dead[i] && !g->rc[i] && !isfinite(g->f[i]) && s->iter > s->stage_first;
      if (!g->want[i]) continue;
      any = 1;
      for (int j = 0; j < s->nval; j++) s->u[j] = 0.5 * (s->u[j] + s->uprev[j]);
      u_to_x(s, s->u, s->itx);
      g->nev[i]++;
    }
    if (!any) break;
    if ((rc = group_eval(g, 1))) return rc;
  }
  int first = 0;
  for (int i = 0; i < n; i++) {
    dsSysid* s = g->s[i];
    if (g->dead[i]) { /* its evaluation ran with the others; nothing of it is kept */
      if (status) status[i] = g->dead[i];
      if (!first) first = ds__seterr(&g->err, g->dead[i], "object %d: %s", i, ds__errmsg(&s->err));
      continue;
    }
    int r = g->rc[i];
    if (!r && !isfinite(g->f[i]))
      r = ds__seterr(&s->err, DS_ERR_DIVERGED, "the episode diverged or inverted an element at the estimates");
    if (!r) {
      s->f = g->f[i];
      s->have_f = 1;
    }
    r = finish_iteration(s, &its[i], r, g->nev[i]);
    g->dead[i] = r;
    if (status) status[i] = r;
    if (r && !first) {
      first = r;
      ds__seterr(&g->err, r, "object %d: %s", i, ds__errmsg(&s->err));
    }
  }
  return first;
}
