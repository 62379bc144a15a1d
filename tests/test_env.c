/* Environment API round trips on shortened episodes of every kind: sizes,
 * reset with the same seed reproduces an episode bitwise, state save/restore
 * reproduces the rest of a trajectory bitwise, done/reward semantics
 * (rewards sum to minus the loss), errors on misuse, and bitwise-identical
 * results for 1 and 2 threads. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/engine.h"
#include "dsim/env.h"
#include "tests/dstest.h"

/* counting allocator: step and backward must allocate nothing */
static long n_alloc;
static void* c_malloc(size_t n) {
  n_alloc++;
  return malloc(n);
}
static void* c_realloc(void* p, size_t n) {
  n_alloc++;
  return realloc(p, n);
}
static void* c_calloc(size_t c, size_t n) {
  n_alloc++;
  return calloc(c, n);
}
static void c_free(void* p) { free(p); }

static const char* const kNames[] = {"walker", "control-fem", "control-cloth", "walker-springs", "rigid-toss"};
#define NKIND ((int)(sizeof kNames / sizeof kNames[0]))

static dsEnvDef short_def(const char* name) {
  dsEnvDef d = ds_default_env_def(name);
  CHECK(d.cls != NULL);
  d.substeps = 96;
  d.control_interval = 16;
  d.render_interval = 32;
  d.render_last = 1;
  d.width = d.height = 16;
  d.supersample = 1;
  d.sigma = 3e-3;
  d.gamma = 1e-2;
  d.obs_state = DS_OBS_STATE_FULL;
  d.obs_image = 1;
  d.loss_kind = DS_ENV_LOSS_IMAGE_SUM;
  if (!strcmp(name, "control-fem")) {
    dsControlFemParams* p = (dsControlFemParams*)ds_env_def_params(&d);
    p->gear.teeth = 4;
    p->gear.layers = 1;
  }
  if (!strcmp(name, "control-cloth")) {
    /* fixed size: a random size changes the particle count at reset */
    dsControlClothParams* p = (dsControlClothParams*)ds_env_def_params(&d);
    p->size_min = p->size_max = 4;
  }
  return d;
}

/* One episode: trajectory of positions at every step end, rewards, the
 * action gradient. Returns the number of steps. */
typedef struct Episode {
  dsReal *x, *rew, *ga, *img;
  dsReal loss;
} Episode;

static void episode(dsEnv* env, uint64_t seed, Episode* ep) {
  const int S = ds_env_num_steps(env), A = ds_env_action_size(env), O = ds_env_obs_size(env);
  int w, h;
  ds_env_image_size(env, &w, &h);
  dsReal* obs = (dsReal*)calloc((size_t)O, sizeof(dsReal));
  dsReal* act = (dsReal*)calloc((size_t)A, sizeof(dsReal));
  CHECK_INT_EQ(ds_env_reset(env, seed, obs, ep->img), 0);
  const int n3 = 3 * ds_env_num_particles(env);
  int done = 0;
  for (int k = 0; k < S; k++) {
    CHECK(!done);
    for (int i = 0; i < A; i++) act[i] = (dsReal)(0.2 * sin(0.3 * k + 0.1 * i));
    CHECK_INT_EQ(ds_env_step(env, act, obs, ep->img + (size_t)(k + 1) * 4 * w * h, ep->rew + k, &done), 0);
    memcpy(ep->x + (size_t)k * n3, obs, (size_t)n3 * sizeof(dsReal));
  }
  CHECK(done);
  CHECK_INT_EQ(ds_env_backward_loss(env, &ep->loss, ep->ga), 0);
  free(obs);
  free(act);
}

/* episode() without CHECK (the test counters are not thread-safe) */
static int episode_quiet(dsEnv* env, uint64_t seed, Episode* ep) {
  const int S = ds_env_num_steps(env), A = ds_env_action_size(env), O = ds_env_obs_size(env);
  int w, h, rc, done = 0;
  ds_env_image_size(env, &w, &h);
  dsReal* obs = (dsReal*)calloc((size_t)O, sizeof(dsReal));
  dsReal* act = (dsReal*)calloc((size_t)A, sizeof(dsReal));
  const int n3 = 3 * ds_env_num_particles(env);
  rc = ds_env_reset(env, seed, obs, ep->img);
  for (int k = 0; k < S && !rc; k++) {
    for (int i = 0; i < A; i++) act[i] = (dsReal)(0.2 * sin(0.3 * k + 0.1 * i));
    rc = ds_env_step(env, act, obs, ep->img + (size_t)(k + 1) * 4 * w * h, ep->rew + k, &done);
    memcpy(ep->x + (size_t)k * n3, obs, (size_t)n3 * sizeof(dsReal));
  }
  if (!rc) rc = ds_env_backward_loss(env, &ep->loss, ep->ga);
  free(obs);
  free(act);
  return rc;
}

static Episode alloc_ep(dsEnv* env) {
  Episode ep;
  int w, h;
  ds_env_image_size(env, &w, &h);
  const int S = ds_env_num_steps(env);
  ep.x = (dsReal*)calloc((size_t)S * 3 * ds_env_num_particles(env), sizeof(dsReal));
  ep.rew = (dsReal*)calloc((size_t)S, sizeof(dsReal));
  ep.ga = (dsReal*)calloc((size_t)S * ds_env_action_size(env), sizeof(dsReal));
  ep.img = (dsReal*)calloc((size_t)(S + 1) * 4 * w * h, sizeof(dsReal));
  ep.loss = 0;
  return ep;
}

static void free_ep(Episode* ep) {
  free(ep->x);
  free(ep->rew);
  free(ep->ga);
  free(ep->img);
}

static int same_ep(dsEnv* env, const Episode* a, const Episode* b) {
  int w, h;
  ds_env_image_size(env, &w, &h);
  const size_t S = (size_t)ds_env_num_steps(env), n3 = 3 * (size_t)ds_env_num_particles(env);
  return !memcmp(a->x, b->x, S * n3 * sizeof(dsReal)) && !memcmp(a->rew, b->rew, S * sizeof(dsReal)) &&
         !memcmp(a->ga, b->ga, S * (size_t)ds_env_action_size(env) * sizeof(dsReal)) &&
         !memcmp(a->img, b->img, (S + 1) * 4 * w * h * sizeof(dsReal)) && a->loss == b->loss;
}

/* physics.gradients false: the same forward, bit for bit, without a tape;
 * the backward refused with a message; rewinding with set_state still works. */
static void forward_only(const char* name) {
  char err[512];
  dsEnvDef d = short_def(name), d0 = short_def(name);
  d0.gradients = 0;
  dsEnv *a = NULL, *b = NULL;
  CHECK_INT_EQ(ds_env_create(&d, &a, err, sizeof err), 0);
  CHECK_INT_EQ(ds_env_create(&d0, &b, err, sizeof err), 0);
  if (!a || !b) return;
  const int S = ds_env_num_steps(a), A = ds_env_action_size(a), O = ds_env_obs_size(a), n = ds_env_state_size(a);
  dsReal* act = (dsReal*)calloc((size_t)A, sizeof(dsReal));
  dsReal* oa = (dsReal*)calloc((size_t)O, sizeof(dsReal));
  dsReal* ob = (dsReal*)calloc((size_t)O, sizeof(dsReal));
  dsReal* st = (dsReal*)calloc((size_t)n, sizeof(dsReal));
  dsReal ra = 0, rb = 0, la = 0, lb = 0;
  int da = 0, db = 0, same = 1;
  CHECK_INT_EQ(ds_env_reset(a, 2, oa, NULL), 0);
  CHECK_INT_EQ(ds_env_reset(b, 2, ob, NULL), 0);
  for (int k = 0; k < S; k++) {
    for (int i = 0; i < A; i++) act[i] = (dsReal)(0.2 * sin(0.3 * k + 0.1 * i));
    CHECK_INT_EQ(ds_env_step(a, act, oa, NULL, &ra, &da), 0);
    CHECK_INT_EQ(ds_env_step(b, act, ob, NULL, &rb, &db), 0);
    same &= !memcmp(oa, ob, (size_t)O * sizeof(dsReal)) && ra == rb && da == db;
    if (k == 2) CHECK_INT_EQ(ds_env_get_state(b, st, n), 0);
  }
  CHECK(same);
  CHECK_INT_EQ(ds_env_loss(a, &la), 0);
  CHECK_INT_EQ(ds_env_loss(b, &lb), 0);
  CHECK(la == lb);
  CHECK_INT_EQ(ds_env_backward_loss(b, NULL, NULL), DS_ERR_STATE);
  CHECK_STR_CONTAINS(ds_env_last_error(b), "forward only (env.physics.gradients false)");
  /* rewind to the end of step 2 and replay: the same last observation */
  CHECK_INT_EQ(ds_env_set_state(b, st, n), 0);
  for (int k = 3; k < S; k++) {
    for (int i = 0; i < A; i++) act[i] = (dsReal)(0.2 * sin(0.3 * k + 0.1 * i));
    CHECK_INT_EQ(ds_env_step(b, act, ob, NULL, &rb, &db), 0);
  }
  CHECK(!memcmp(oa, ob, (size_t)O * sizeof(dsReal)));
  free(act);
  free(oa);
  free(ob);
  free(st);
  ds_env_destroy(a);
  ds_env_destroy(b);
}

int main(void) {
  for (int kind = 0; kind < NKIND; kind++) forward_only(kNames[kind]);
  CHECK_INT_EQ(ds_replace_allocator(c_malloc, c_realloc, c_calloc, c_free), 0);
  for (int kind = 0; kind < NKIND; kind++) {
    const char* name = kNames[kind];
    dsEnvDef d = short_def(name);
    dsEnv* env = NULL;
    char err[512];
    CHECK_INT_EQ(ds_env_create(&d, &env, err, sizeof err), 0);
    if (!env) continue;
    CHECK_STR_EQ(ds_env_name(env), name);
    /* sizes */
    CHECK_INT_EQ(ds_env_num_steps(env), 6);
    const int np = ds_env_num_particles(env);
    CHECK_INT_EQ(ds_env_obs_size(env), 6 * np);
    CHECK_INT_EQ(ds_env_state_size(env), 1 + 6 * np + 13 * ds_env_model(env)->nbody);
    int w, h;
    ds_env_image_size(env, &w, &h);
    CHECK(w == 16 && h == 16);
    if (!strcmp(name, "walker")) CHECK_INT_EQ(ds_env_action_size(env), 104);
    if (!strcmp(name, "control-cloth")) CHECK_INT_EQ(ds_env_action_size(env), 3);
    CHECK(ds_env_action_size(env) > 0);
    /* misuse */
    dsReal dummy[2048] = {0};
    CHECK_INT_EQ(ds_env_step(env, dummy, NULL, NULL, NULL, NULL), DS_ERR_STATE);
    CHECK_STR_CONTAINS(ds_env_last_error(env), "reset");

    /* no allocation in reset (same size), step or backward */
    {
      dsReal* act = (dsReal*)calloc((size_t)ds_env_action_size(env), sizeof(dsReal));
      dsReal* obs = (dsReal*)calloc((size_t)ds_env_obs_size(env), sizeof(dsReal));
      dsReal* img = (dsReal*)calloc((size_t)4 * 16 * 16, sizeof(dsReal));
      dsReal* ga = (dsReal*)calloc((size_t)6 * ds_env_action_size(env), sizeof(dsReal));
      dsReal* ao = (dsReal*)calloc((size_t)6 * ds_env_obs_size(env), sizeof(dsReal));
      dsReal ar[6] = {1, 1, 1, 1, 1, 1}, r, l;
      int done = 0;
      CHECK_INT_EQ(ds_env_reset(env, 1, obs, img), 0);
      const long before = n_alloc;
      CHECK_INT_EQ(ds_env_reset(env, 1, obs, img), 0);
      while (!done) CHECK_INT_EQ(ds_env_step(env, act, obs, img, &r, &done), 0);
      CHECK_INT_EQ(ds_env_backward_loss(env, &l, ga), 0);
      CHECK_INT_EQ(ds_env_backward_adjoints(env, ao, NULL, ar, ga), 0);
      CHECK_INT_EQ(n_alloc - before, 0);
      free(act);
      free(obs);
      free(img);
      free(ga);
      free(ao);
    }
    Episode a = alloc_ep(env), b = alloc_ep(env);
    episode(env, 11, &a);
    CHECK_INT_EQ(ds_env_steps_taken(env), 6);
    CHECK_INT_EQ(ds_env_step(env, dummy, NULL, NULL, NULL, NULL), DS_ERR_STATE);
    dsReal one = 1;
    CHECK_INT_EQ(ds_env_set_param(env, "contact.mu", &one, 1), DS_ERR_STATE);
    /* rewards: image_sum, the sum is minus the loss without frame 0 */
    {
      dsReal r0 = 0, sum = 0;
      dsReal* obs0 = (dsReal*)calloc((size_t)6 * np, sizeof(dsReal));
      int S = ds_env_num_steps(env);
      for (int k = 0; k < S; k++) sum += a.rew[k];
      CHECK_INT_EQ(ds_env_reset(env, 11, obs0, NULL), 0);
      CHECK_INT_EQ(ds_env_loss(env, &r0), 0);
      CHECK_CLOSE(sum, -(a.loss - r0), DS_SINGLE ? 1e-5 : 1e-12, DS_SINGLE ? 1e-6 : 1e-14);
      CHECK(r0 > 0);
      free(obs0);
    }
    /* same seed, same episode (bitwise); another seed, another goal */
    episode(env, 11, &b);
    CHECK(same_ep(env, &a, &b));
    {
      dsReal t11[3], t12[3];
      ds_env_reset(env, 11, NULL, NULL);
      ds_env_target(env, t11);
      ds_env_reset(env, 12345, NULL, NULL);
      ds_env_target(env, t12);
      if (!strcmp(name, "control-fem") || !strcmp(name, "control-cloth")) CHECK(t11[0] != t12[0]);
    }
    /* state save at step 2, run on, restore, replay: bitwise */
    {
      const int S = ds_env_num_steps(env), A = ds_env_action_size(env), ns = ds_env_state_size(env);
      dsReal* st = (dsReal*)calloc((size_t)ns, sizeof(dsReal));
      dsReal* act = (dsReal*)calloc((size_t)A, sizeof(dsReal));
      dsReal* o1 = (dsReal*)calloc((size_t)S * 6 * np, sizeof(dsReal));
      dsReal* o2 = (dsReal*)calloc((size_t)S * 6 * np, sizeof(dsReal));
      dsReal r1[8], r2[8];
      int done;
      ds_env_reset(env, 11, NULL, NULL);
      for (int k = 0; k < S; k++) {
        for (int i = 0; i < A; i++) act[i] = (dsReal)(0.2 * cos(0.5 * k + 0.2 * i));
        if (k == 2) CHECK_INT_EQ(ds_env_get_state(env, st, ns), 0);
        CHECK_INT_EQ(ds_env_step(env, act, o1 + (size_t)k * 6 * np, NULL, r1 + k, &done), 0);
      }
      dsReal g1 = 0, g2 = 0;
      dsReal* ga = (dsReal*)calloc((size_t)S * A, sizeof(dsReal));
      CHECK_INT_EQ(ds_env_backward_loss(env, &g1, ga), 0);
      dsReal ga1 = ga[2 * A];
      CHECK_INT_EQ(st[0], 32);
      CHECK_INT_EQ(ds_env_set_state(env, st, ns), 0);
      CHECK_INT_EQ(ds_env_steps_taken(env), 2);
      for (int k = 2; k < S; k++) {
        for (int i = 0; i < A; i++) act[i] = (dsReal)(0.2 * cos(0.5 * k + 0.2 * i));
        CHECK_INT_EQ(ds_env_step(env, act, o2 + (size_t)k * 6 * np, NULL, r2 + k, &done), 0);
      }
      CHECK(!memcmp(o1 + 2 * 6 * np, o2 + 2 * 6 * np, (size_t)(S - 2) * 6 * np * sizeof(dsReal)));
      CHECK(!memcmp(r1 + 2, r2 + 2, (size_t)(S - 2) * sizeof(dsReal)));
      CHECK_INT_EQ(ds_env_backward_loss(env, &g2, ga), 0);
      CHECK(g1 == g2 && ga[2 * A] == ga1);
      st[0] = 17; /* not a step boundary */
      CHECK_INT_EQ(ds_env_set_state(env, st, ns), DS_ERR_RANGE);
      CHECK_INT_EQ(ds_env_set_state(env, st, ns - 1), DS_ERR_RANGE);
      free(st);
      free(act);
      free(o1);
      free(o2);
      free(ga);
    }
    /* windowed backward: rows from the window's first step equal the whole
     * backward's bit for bit, earlier rows are 0; the built-in loss and the
     * adjoint form, for every first step */
    {
      const int S = ds_env_num_steps(env), A = ds_env_action_size(env), O = ds_env_obs_size(env);
      dsReal* full = (dsReal*)calloc((size_t)S * A, sizeof(dsReal));
      dsReal* win = (dsReal*)calloc((size_t)S * A, sizeof(dsReal));
      dsReal* adj = (dsReal*)calloc((size_t)S * O, sizeof(dsReal));
      for (int i = 0; i < S * O; i++) adj[i] = (dsReal)cos(0.7 * i);
      episode(env, 4, &a);
      dsReal lf, lw;
      for (int form = 0; form < 2; form++) {
        CHECK_INT_EQ(form ? ds_env_backward_adjoints(env, adj, NULL, NULL, full) : ds_env_backward_loss(env, &lf, full), 0);
        for (int first = 0; first <= S; first++) {
          CHECK_INT_EQ(form ? ds_env_backward_adjoints_from(env, first, adj, NULL, NULL, win)
                            : ds_env_backward_loss_from(env, first, &lw, win), 0);
          if (!form) CHECK(lw == lf);
          int zero = 1;
          for (int i = 0; i < first * A && i < S * A; i++) zero &= win[i] == 0;
          CHECK(zero);
          /* control-cloth's action enters at substep 0 only */
          if (strcmp(name, "control-cloth") && first < S)
            CHECK(!memcmp(win + (size_t)first * A, full + (size_t)first * A, (size_t)(S - first) * A * sizeof(dsReal)));
        }
      }
      CHECK_INT_EQ(ds_env_backward_loss_from(env, S + 1, &lw, win), DS_ERR_RANGE);
      CHECK_INT_EQ(ds_env_backward_loss_from(env, -1, &lw, win), DS_ERR_RANGE);
      free(full);
      free(win);
      free(adj);
    }
    /* threads: 1 vs 2, bitwise */
    ds_set_num_threads(1);
    episode(env, 3, &a);
    ds_set_num_threads(2);
    episode(env, 3, &b);
    CHECK(same_ep(env, &a, &b));
    /* parameters by name; metric and render */
    {
      const dsReal* p;
      int n;
      CHECK_INT_EQ(ds_env_param(env, "particle.mass", &p, &n), 0);
      CHECK_INT_EQ(n, np);
      CHECK_INT_EQ(ds_env_param(env, "no.such", &p, &n), DS_ERR_NOTFOUND);
      const dsReal* g;
      CHECK_INT_EQ(ds_env_param_grad(env, "initial_velocity", &g, &n), 0);
      CHECK_INT_EQ(n, 3 * np);
      dsReal m, tg[3], c[3] = {0, 0, 0};
      CHECK_INT_EQ(ds_env_metric(env, &m), 0);
      CHECK(isfinite(m));
      if (!strcmp(name, "control-fem") || !strcmp(name, "control-cloth")) {
        /* the metric: mean over x, y, z of the squared centre-of-mass error */
        const dsReal* x = ds_env_positions(env);
        double mt = 0;
        CHECK_INT_EQ(ds_env_target(env, tg), 0);
        for (int i = 0; i < np; i++) {
          mt += p[i];
          for (int k = 0; k < 3; k++) c[k] += p[i] * x[3 * i + k];
        }
        double e2 = 0;
        for (int k = 0; k < 3; k++) e2 += (c[k] / mt - tg[k]) * (c[k] / mt - tg[k]);
        CHECK_CLOSE(m, e2 / 3, DS_SINGLE ? 1e-4 : 1e-10, 1e-12);
      }
      dsReal* img = (dsReal*)calloc((size_t)4 * w * h, sizeof(dsReal));
      CHECK_INT_EQ(ds_env_render(env, img), 0);
      CHECK(ds_env_goal_image(env) != NULL);
      free(img);
    }
    free_ep(&a);
    free_ep(&b);
    ds_env_destroy(env);
  }
  /* distinct envs on distinct threads at once: the same bits as alone */
  {
    dsEnvDef d = short_def("walker");
    dsEnv* ev[2] = {NULL, NULL};
    CHECK_INT_EQ(ds_env_create(&d, &ev[0], NULL, 0), 0);
    CHECK_INT_EQ(ds_env_create(&d, &ev[1], NULL, 0), 0);
    if (ev[0] && ev[1]) {
      Episode ref = alloc_ep(ev[0]), par[2] = {alloc_ep(ev[0]), alloc_ep(ev[1])};
      int rcs[2] = {-1, -1};
      episode(ev[0], 4, &ref);
#pragma omp parallel for num_threads(2) schedule(static)
      for (int i = 0; i < 2; i++) rcs[i] = episode_quiet(ev[i], 4, &par[i]);
      CHECK(rcs[0] == 0 && rcs[1] == 0);
      CHECK(same_ep(ev[0], &ref, &par[0]));
      CHECK(same_ep(ev[1], &ref, &par[1]));
      free_ep(&ref);
      free_ep(&par[0]);
      free_ep(&par[1]);
    }
    ds_env_destroy(ev[0]);
    ds_env_destroy(ev[1]);
  }
  /* checkpointed tape (every 5th state, recomputed in backward): same bits */
  for (int kind = 0; kind < NKIND; kind++) {
    dsEnvDef d = short_def(kNames[kind]);
    dsEnv *e1 = NULL, *e5 = NULL;
    CHECK_INT_EQ(ds_env_create(&d, &e1, NULL, 0), 0);
    d.checkpoint_every = 5;
    CHECK_INT_EQ(ds_env_create(&d, &e5, NULL, 0), 0);
    if (e1 && e5) {
      Episode a = alloc_ep(e1), b = alloc_ep(e5);
      episode(e1, 9, &a);
      episode(e5, 9, &b);
      CHECK(same_ep(e1, &a, &b));
      free_ep(&a);
      free_ep(&b);
    }
    ds_env_destroy(e1);
    ds_env_destroy(e5);
  }
  /* control-cloth with a random size: the model follows the seed */
  {
    dsEnvDef d = short_def("control-cloth");
    dsControlClothParams* cp = (dsControlClothParams*)ds_env_def_params(&d);
    cp->size_min = 3;
    cp->size_max = 5;
    d.obs_state = DS_OBS_STATE_COM;
    dsEnv* env = NULL;
    CHECK_INT_EQ(ds_env_create(&d, &env, NULL, 0), 0);
    if (env) {
      int seen[6] = {0};
      for (uint64_t seed = 0; seed < 12; seed++) {
        dsReal obs[6], act[3] = {1, 0, 0}, l;
        int done = 0;
        CHECK_INT_EQ(ds_env_reset(env, seed, obs, NULL), 0);
        const int np = ds_env_num_particles(env);
        int D = (int)lround(sqrt((double)np)) - 1;
        CHECK((D + 1) * (D + 1) == np && D >= 3 && D <= 5);
        if (D >= 3 && D <= 5) seen[D] = 1;
        CHECK_INT_EQ(ds_env_step(env, act, obs, NULL, NULL, &done), 0);
        CHECK_INT_EQ(ds_env_backward_loss(env, &l, NULL), 0);
      }
      CHECK(seen[3] + seen[4] + seen[5] >= 2);
      ds_env_destroy(env);
    }
  }
  /* image_last rewards: zero except in the step that renders the last frame */
  {
    dsEnvDef d = short_def("walker");
    d.loss_kind = DS_ENV_LOSS_IMAGE_LAST;
    dsEnv* env = NULL;
    CHECK_INT_EQ(ds_env_create(&d, &env, NULL, 0), 0);
    if (env) {
      Episode a = alloc_ep(env);
      episode(env, 5, &a);
      for (int k = 0; k + 1 < 6; k++) CHECK(a.rew[k] == 0);
      CHECK(a.rew[5] == -a.loss);
      free_ep(&a);
      ds_env_destroy(env);
    }
  }
  return DST_RESULT();
}
