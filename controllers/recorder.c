/* Episode recorder: replays an action sequence in a private env whose
 * control interval g = gcd(C, R, stride) divides the source's C, so that
 * repeating every action C/g times gives the source's trajectory while the
 * replay stops at every render substep and every stride-th substep to copy
 * positions, velocities and frames (see dsim/controller.h). */
#include "config.h"

#include <math.h>
#include <string.h>

#include "dsim/controller.h"
#include "base/internal.h"

struct dsRecorder {
  dsEnv* env;         /* replay env */
  dsErrBuf eb;
  int C, R, g, T, S, A, N, W, H, render_last, ssz;
  int capN, capS;     /* allocated particles and state values */
  dsEpisodeRecord rec;
  dsReal* img;        /* W x H x 4 */
  dsReal* state;      /* ssz */
};

static int gcd(int a, int b) {
  while (b) {
    int t = a % b;
    a = b;
    b = t;
  }
  return a;
}

void ds_recorder_destroy(dsRecorder* r) {
  if (!r) return;
  ds_env_destroy(r->env);
  ds__free(r->rec.positions);
  ds__free(r->rec.velocities);
  ds__free(r->rec.actions);
  ds__free(r->rec.frames);
  ds__free(r->rec.goal);
  ds__free(r->img);
  ds__free(r->state);
  ds__free(r);
}

const char* ds_recorder_last_error(const dsRecorder* r) { return r ? ds__errmsg(&r->eb) : ""; }

int ds_recorder_create(const dsEnv* src, int stride, dsRecorder** out, char* err, size_t errlen) {
  if (!src || !out) return ds__puterr(err, errlen, DS_ERR_INVALID, "recorder: NULL argument");
  *out = NULL;
  if (stride < 1) return ds__puterr(err, errlen, DS_ERR_RANGE, "recorder: stride %d (>= 1)", stride);
  dsEnvDef d = *ds_env_def(src);
  dsRecorder* r = (dsRecorder*)ds__calloc(1, sizeof *r);
  if (!r) return ds__puterr(err, errlen, DS_ERR_NOMEM, "recorder: out of memory");
  r->C = d.control_interval;
  r->R = d.render_interval;
  r->T = d.substeps;
  r->g = gcd(gcd(r->C, r->R), stride);
  r->render_last = d.render_last;
  r->S = ds_env_num_steps(src);
  r->A = ds_env_action_size(src);
  r->N = ds_env_num_particles(src);
  ds_env_image_size(src, &r->W, &r->H);
  d.control_interval = r->g;
  d.obs_state = DS_OBS_STATE_NONE;
  d.obs_image = 0;
  /* a replay needs no backward: no tape (the same forward, bit for bit) */
  d.gradients = 0;
  char e2[512];
  int rc = ds_env_create(&d, &r->env, e2, sizeof e2);
  if (rc) {
    ds_recorder_destroy(r);
    return ds__puterr(err, errlen, rc, "recorder: cannot create the replay env: %s", e2);
  }
  r->ssz = ds_env_state_size(r->env);
  int nf = 0;
  for (int s = 0; s < r->T; s += r->R) nf++;
  if (r->render_last) nf++;
  dsEpisodeRecord* q = &r->rec;
  q->dt = (double)d.dt;
  q->control_interval = r->C;
  q->render_interval = r->R;
  q->stride = stride;
  q->nsubsteps = r->T + 1;
  q->nparticles = r->N;
  q->nsteps = r->S;
  q->action_dim = r->A;
  q->nframes = nf;
  q->height = r->H;
  q->width = r->W;
  { /* the frames' camera, so that a log's footage describes itself: the env's
       look-at camera, eye = d (cos e sin a, sin e, -cos e cos a) (docs/scenes.md) */
    const double e = (double)d.cam_elevation * (3.14159265358979323846 / 180.0), a = (double)d.cam_azimuth * (3.14159265358979323846 / 180.0);
    q->cam_eye[0] = (double)d.cam_distance * cos(e) * sin(a) + (double)d.cam_look_at[0];
    q->cam_eye[1] = (double)d.cam_distance * sin(e) + (double)d.cam_look_at[1];
    q->cam_eye[2] = -(double)d.cam_distance * cos(e) * cos(a) + (double)d.cam_look_at[2];
    for (int k = 0; k < 3; k++) q->cam_look_at[k] = (double)d.cam_look_at[k];
    q->cam_fov = (double)d.cam_fov;
  }
  const size_t rows = (size_t)(r->T + 1) * (size_t)r->N * 3, px = (size_t)r->W * (size_t)r->H * 4;
  q->positions = (float*)ds__calloc(rows, sizeof(float));
  q->velocities = (float*)ds__calloc(rows, sizeof(float));
  q->actions = (float*)ds__calloc((size_t)r->S * (size_t)r->A, sizeof(float));
  q->frames = (uint8_t*)ds__calloc((size_t)nf * px, 1);
  q->goal = (uint8_t*)ds__calloc(px, 1);
  r->img = (dsReal*)ds__calloc(px, sizeof(dsReal));
  r->state = (dsReal*)ds__calloc((size_t)r->ssz, sizeof(dsReal));
  r->capN = r->N;
  r->capS = r->ssz;
  if (!q->positions || !q->velocities || !q->actions || !q->frames || !q->goal || !r->img || !r->state) {
    ds_recorder_destroy(r);
    return ds__puterr(err, errlen, DS_ERR_NOMEM, "recorder: out of memory");
  }
  *out = r;
  return DS_OK;
}

static uint8_t to_u8(dsReal v) {
  double x = (double)v;
  if (!(x > 0)) return 0;
  if (x >= 1) return 255;
  return (uint8_t)floor(x * 255.0 + 0.5);
}

static void rgba8(uint8_t* dst, const dsReal* src, size_t n) {
  for (size_t i = 0; i < n; i++) dst[i] = to_u8(src[i]);
}

/* copy substep s's positions and velocities into row s */
static int store_row(dsRecorder* r, int s) {
  int rc = ds_env_get_state(r->env, r->state, r->ssz);
  if (rc) return rc;
  const size_t n3 = (size_t)r->N * 3;
  float* px = r->rec.positions + (size_t)s * n3;
  float* pv = r->rec.velocities + (size_t)s * n3;
  for (size_t i = 0; i < n3; i++) {
    px[i] = (float)r->state[1 + i];
    pv[i] = (float)r->state[1 + n3 + i];
  }
  return DS_OK;
}

int ds_recorder_record(dsRecorder* r, uint64_t seed, int iteration, const dsReal* actions,
                       const dsEpisodeRecord** out) {
  if (!r || !actions || !out) return DS_ERR_INVALID;
  *out = NULL;
  dsEpisodeRecord* q = &r->rec;
  q->iteration = iteration;
  const size_t px = (size_t)r->W * (size_t)r->H * 4;
  int rc = ds_env_reset(r->env, seed, NULL, NULL);
  if (rc) return ds__seterr(&r->eb, rc, "recorder: reset: %s", ds_env_last_error(r->env));
  /* control-cloth draws its sheet size from the seed: grow the buffers once */
  const int N = ds_env_num_particles(r->env), ssz = ds_env_state_size(r->env);
  if (N > r->capN || ssz > r->capS) {
    const size_t rows = (size_t)(r->T + 1) * (size_t)N * 3;
    float* p = (float*)ds__realloc(q->positions, rows * sizeof(float));
    if (p) q->positions = p;
    float* v = p ? (float*)ds__realloc(q->velocities, rows * sizeof(float)) : NULL;
    if (v) q->velocities = v;
    dsReal* st = v ? (dsReal*)ds__realloc(r->state, (size_t)ssz * sizeof(dsReal)) : NULL;
    if (st) r->state = st;
    if (!st) return ds__seterr(&r->eb, DS_ERR_NOMEM, "recorder: out of memory for %d particles", N);
    r->capN = N;
    r->capS = ssz;
  }
  r->N = N;
  r->ssz = ssz;
  q->nparticles = N;
  const dsReal* goal = ds_env_goal_image(r->env);
  if (goal) rgba8(q->goal, goal, px);
  for (size_t i = 0; i < (size_t)r->S * (size_t)r->A; i++) q->actions[i] = (float)actions[i];
  memset(q->positions, 0, sizeof(float) * (size_t)(r->T + 1) * (size_t)r->N * 3);
  memset(q->velocities, 0, sizeof(float) * (size_t)(r->T + 1) * (size_t)r->N * 3);
  int f = 0, s = 0;
  if ((rc = store_row(r, 0))) goto fail;
  if (r->T > 0) {
    if ((rc = ds_env_render(r->env, r->img))) goto fail;
    rgba8(q->frames + (size_t)f++ * px, r->img, px);
  }
  while (s < r->T) {
    const dsReal* a = actions + (size_t)(s / r->C) * (size_t)r->A;
    int done = 0;
    if ((rc = ds_env_step(r->env, a, NULL, NULL, NULL, &done))) goto fail;
    s = s + r->g < r->T ? s + r->g : r->T;
    if (s % q->stride == 0 || s == r->T)
      if ((rc = store_row(r, s))) goto fail;
    const int frame = (s < r->T && s % r->R == 0) || (s == r->T && r->render_last);
    if (frame && f < q->nframes) {
      if ((rc = ds_env_render(r->env, r->img))) goto fail;
      rgba8(q->frames + (size_t)f++ * px, r->img, px);
    }
  }
  dsReal l = 0, m = 0;
  if ((rc = ds_env_loss(r->env, &l)) || (rc = ds_env_metric(r->env, &m))) goto fail;
  q->loss = (double)l;
  q->metric = (double)m;
  *out = q;
  return DS_OK;
fail:
  return ds__seterr(&r->eb, rc, "recorder: substep %d: %s", s, ds_env_last_error(r->env));
}
