/* `dsim sysid CONFIG [options]`: identify physical parameters of an env
 * from video (dsim/sysid.h) and log each object's identification
 * (dsim/runlog.h); `dsim sysid --collect LOG...` merges logs into one table.
 *
 * A sysid config has three sections: "env" (any registered env, as for
 * `dsim run`), "sysid" (ds_sysid_keys: the parameters, the optimiser, the
 * video, the frames used) and "run" (seed: object k draws from seed + k;
 * threads; out). Flags are keys of those sections, checked by the same key
 * tables (--lr is sysid.lr; --set SECTION.KEY=VALUE reaches any key).
 *
 * Video "frames": a folder of PNG frames (sorted by name) and a camera file
 * (JSON: times, position, look_at, fov or fx, fy, cx, cy). The frames set
 * env.render.width and height, the camera the env's view (any look-at
 * point), the times the episode (env.physics.render_interval = the greatest common divisor of the
 * frames' substeps, env.physics.substeps = the last one); a frame at time 0
 * is the initial state and left out of the loss. Every input is checked
 * before any simulation runs (ds_sysid_load_video; the reading is io's,
 * dsim/video.h).
 *
 * Batches: --objects N identifies objects 0..N-1 (each its own draws of the
 * true values and initial guesses, its own env and log), in parallel over
 * run.threads OpenMP threads; the engine inside runs single-threaded there,
 * and every result is independent of the thread count. --shard i/n keeps
 * the objects k with k mod n = i (a scheduler's job array: one process per
 * shard, each writing its own logs); --collect reads any set of logs and
 * prints one table (and --csv FILE). --group (the default on a GPU with
 * adam or sgd) evaluates the shard's objects together instead: every
 * iteration is one lockstep batch of their episodes (dsim/sysid.h groups),
 * on a GPU one engine for all; the logs are the same as one by one's.
 *
 * Logs: one per object, OUT (one object) or OUT-oK.h5 (OUT without ".h5";
 * default runs/sysid-ENV-sSEED). Per iteration: loss, metric (the mean
 * absolute relative error over the parameters when the true values are
 * known, else the loss), gradient norm (in the optimiser's variables) and
 * the estimates; episodes first/best/last hold the rendered frames (goal:
 * the video's last frame); /config holds the object's complete config with
 * the true values drawn ("true"). Never replaces a file without --force. */
#define _POSIX_C_SOURCE 200809L
#include "config.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#  include <omp.h>
#endif

#include "cli/cli.h"
#include "dsim/dsim.h"
#include "controllers/sysid_field.h"

#define MAX_SETS 64
#define MAX_COLLECT 100000

static volatile sig_atomic_t g_stop = 0;
static volatile sig_atomic_t g_signal = 0;
static void on_signal(int sig) {
  if (!g_stop) g_signal = sig;
  g_stop = 1;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct Set {
  const char* source;
  char section[16];
  char key[128];
  const char* value;
} Set;

typedef struct Args {
  const char* target;
  int objects, shard_i, shard_n, force, quiet, collect, group;
  const char* csv;
  char** logs;
  int nlogs;
  const char* field_png; /* --field-png: the first object's first field, true and recovered */
  Set sets[MAX_SETS];
  int nsets;
} Args;

static void usage(FILE* out) {
  fprintf(out,
          "usage: dsim sysid CONFIG [--objects N] [--group] [--shard I/N] [--iterations N] [--optimizer adam|sgd|lbfgs]\n"
          "                  [--lr X] [--frames all|first_last|last] [--seed S] [--threads T] [--out LOG]\n"
          "                  [--csv FILE] [--field-png FILE] [--force] [--quiet] [--set SECTION.KEY=VALUE]\n"
          "       dsim sysid --collect LOG... [--csv FILE] [--force]\n"
          "\n"
          "Identify physical parameters of an environment from video (gradSim's system\n"
          "identification) and log each object's run (HDF5). CONFIG is a JSON file with the\n"
          "sections env, sysid and run, or the name of a bundled config (sysid-rigid-mass,\n"
          "sysid-rigid-contact, sysid-mass, sysid-beam-mu, sysid-beam-lambda, sysid-beam,\n"
          "sysid-cloth). The video is synthetic (rendered with hidden true\n"
          "values) or a folder of PNG frames with a camera file (sysid.video \"frames\").\n"
          "\n"
          "options:\n"
          "  --objects N       identify N objects (draws from seed + k), in parallel over threads\n"
          "  --group           evaluate the objects together, every iteration one lockstep batch\n"
          "                    (on a GPU: one engine for all; the default there for adam and sgd)\n"
          "  --shard I/N       only objects k with k mod N = I (job arrays; one log per object)\n"
          "  --iterations N    sysid.iterations        --optimizer X  sysid.optimizer\n"
          "  --lr X            sysid.lr                --frames X     sysid.frames\n"
          "  --seed S          run.seed                --threads T    run.threads\n"
          "  --device D        run.device: cpu (default), cuda or cuda:N (the physics on that GPU)\n"
          "  --out LOG         run.out: the log (N > 1 objects: LOG without .h5, then -oK.h5)\n"
          "  --csv FILE        also write the result table as CSV\n"
          "  --field-png FILE  a picture of the first object's first per-element field: true and recovered\n"
          "  --force           replace existing outputs\n"
          "  --quiet           no per-iteration progress\n"
          "  --set S.K=V       any config key, e.g. --set env.render.width=32\n"
          "  --collect LOG...  merge the logs of earlier runs (shards) into one table\n");
  ds__cli_plugin_usage(out, 20);
  fprintf(out,
          "\n"
          "exit status: 0 success, 1 run-time failure, 2 usage error (including an output\n"
          "that exists), 3 bad input (config, frames, camera file, log), 128 + signal when stopped.\n");
}

static int usage_error(const char* msg, const char* a) {
  fprintf(stderr, "dsim sysid: %s%s\n", msg, a ? a : "");
  fprintf(stderr, "Run 'dsim sysid --help' for the options.\n");
  return DS_EXIT_USAGE;
}

static int add_set(Args* a, const char* source, const char* section, const char* key, const char* value) {
  if (a->nsets >= MAX_SETS) return usage_error("too many --set options", NULL);
  Set* s = &a->sets[a->nsets++];
  s->source = source;
  snprintf(s->section, sizeof s->section, "%s", section);
  snprintf(s->key, sizeof s->key, "%s", key);
  s->value = value;
  return 0;
}

static int parse_args(int argc, char** argv, Args* a) {
  memset(a, 0, sizeof *a);
  a->objects = 1;
  a->shard_n = 1;
  static const struct {
    const char* flag;
    const char* section;
    const char* key;
  } direct[] = {{"--iterations", "sysid", "iterations"}, {"--optimizer", "sysid", "optimizer"},
                {"--lr", "sysid", "lr"},                 {"--frames", "sysid", "frames"},
                {"--seed", "run", "seed"},               {"--threads", "run", "threads"},
                {"--out", "run", "out"},                 {"--device", "run", "device"}};
  for (int i = 1; i < argc; i++) {
    const char* f = argv[i];
    if (ds__cli_is_help(f)) {
      usage(stdout);
      return -1;
    }
    if (a->collect && f[0] != '-') {
      a->logs[a->nlogs++] = argv[i];
      continue;
    }
    int prc = 0;
    if (ds__cli_plugin_option("sysid", argc, argv, &i, &prc)) {
      if (prc) return prc;
      continue;
    }
    int done = 0;
    for (size_t d = 0; d < sizeof direct / sizeof direct[0] && !done; d++)
      if (!strcmp(f, direct[d].flag)) {
        if (i + 1 >= argc) return usage_error("missing value after ", f);
        int rc = add_set(a, f, direct[d].section, direct[d].key, argv[++i]);
        if (rc) return rc;
        done = 1;
      }
    if (done) continue;
    if (!strcmp(f, "--objects")) {
      if (i + 1 >= argc) return usage_error("missing value after ", f);
      char* end;
      long n = strtol(argv[++i], &end, 10);
      if (*end || n < 1 || n > 1000000) return usage_error("--objects: expected an integer in [1, 1000000], got ", argv[i]);
      a->objects = (int)n;
    } else if (!strcmp(f, "--shard")) {
      if (i + 1 >= argc) return usage_error("missing value after ", f);
      int si, sn;
      char extra;
      if (sscanf(argv[++i], "%d/%d%c", &si, &sn, &extra) != 2 || sn < 1 || si < 0 || si >= sn)
        return usage_error("--shard: expected I/N with 0 <= I < N (e.g. 0/4), got ", argv[i]);
      a->shard_i = si;
      a->shard_n = sn;
    } else if (!strcmp(f, "--csv") || !strcmp(f, "--field-png")) {
      if (i + 1 >= argc) return usage_error("missing value after ", f);
      *(f[2] == 'c' ? &a->csv : &a->field_png) = argv[++i];
    } else if (!strcmp(f, "--force")) {
      a->force = 1;
    } else if (!strcmp(f, "--quiet")) {
      a->quiet = 1;
    } else if (!strcmp(f, "--group")) {
      a->group = 1;
    } else if (!strcmp(f, "--collect")) {
      a->collect = 1;
      a->logs = (char**)calloc((size_t)argc, sizeof(char*));
      if (!a->logs) return usage_error("out of memory", NULL);
    } else if (!strcmp(f, "--set")) {
      if (i + 1 >= argc) return usage_error("missing value after ", f);
      const char* kv = argv[++i];
      const char* dot = strchr(kv, '.');
      const char* eq = strchr(kv, '=');
      if (!dot || !eq || dot > eq || dot == kv) return usage_error("--set: expected SECTION.KEY=VALUE, got ", kv);
      char section[16], key[128];
      snprintf(section, sizeof section, "%.*s", (int)(dot - kv), kv);
      snprintf(key, sizeof key, "%.*s", (int)(eq - dot - 1), dot + 1);
      if (strcmp(section, "env") && strcmp(section, "sysid") && strcmp(section, "run"))
        return usage_error("--set: the section is env, sysid or run, got ", kv);
      int rc = add_set(a, "--set", section, key, eq + 1);
      if (rc) return rc;
    } else if (f[0] == '-') {
      return usage_error("unknown option ", f);
    } else if (!a->target) {
      a->target = f;
    } else {
      return usage_error("more than one config: ", f);
    }
  }
  if (a->collect && a->nlogs == 0) return usage_error("--collect: give the logs to merge", NULL);
  if (!a->collect && !a->target) return usage_error("give a config (e.g. dsim sysid sysid-beam)", NULL);
  return 0;
}

/* ---- one object ----------------------------------------------------------------- */
typedef struct Obj {
  int k;
  dsSysid* s;
  dsRunLog* log;
  char out[4096];
  char* config;        /* the object's complete config (stored in its log) */
  int its, failed, best_it, last_it, stage; /* stage: of sysid.stages, whose own best is kept */
  double wall, are[DS_SYSID_MAX_PARAMS], first_loss, best_loss;
  char err[1024];
} Obj;

typedef struct Ctx {
  Args* a;
  char path[4096];
  dsEnvDef def;
  dsSysidDef sd;
  dsRunDef rd;
  dsSysidVideo video; /* footage (ds_sysid_load_video) */
  int have_video, nthreads, nobj;
  Obj* obj;
  dsSysidGroup* group; /* --group: owns the objects' dsSysid */
} Ctx;

static void append(char** buf, size_t* len, size_t* cap, const char* fmt, ...) __attribute__((format(printf, 4, 5)));
static void append(char** buf, size_t* len, size_t* cap, const char* fmt, ...) {
  va_list ap;
  for (;;) {
    if (!*buf) return;
    va_start(ap, fmt);
    int n = vsnprintf(*buf + *len, *cap - *len, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (*len + (size_t)n < *cap) {
      *len += (size_t)n;
      return;
    }
    char* nb = (char*)realloc(*buf, *cap * 2 + (size_t)n);
    if (!nb) {
      free(*buf);
      *buf = NULL;
      return;
    }
    *buf = nb;
    *cap = *cap * 2 + (size_t)n;
  }
}

static void append_reals(char** b, size_t* l, size_t* c, const char* key, const dsReal* v, int n) {
  append(b, l, c, ",\n      \"%s\": [", key);
  for (int i = 0; i < n; i++) append(b, l, c, "%s%.17g", i ? ", " : "", (double)v[i]);
  append(b, l, c, "]");
}

/* ",\n    \"KEY\": VALUE" for the sysid key at path, through the section writer (a
 * string escaped as JSON: a folder name may hold quotes or backslashes) */
static void append_key(char** b, size_t* l, size_t* c, const char* path, const dsSysidDef* sd) {
  dsConfigKey one[2];
  memset(one, 0, sizeof one);
  for (const dsConfigKey* k = ds_sysid_keys(); k->path; k++)
    if (!strcmp(k->path, path)) one[0] = *k;
  const int n = one[0].path ? ds_config_write_section(one, sd, 4, NULL, 0) : -1;
  char* t = n > 0 ? (char*)malloc((size_t)n + 1) : NULL;
  if (t && ds_config_write_section(one, sd, 4, t, (size_t)n + 1) == n) append(b, l, c, ",%s", t);
  free(t);
}

/* The sysid.camsim keys, written together (one "camsim" object). */
static void append_camsim(char** b, size_t* l, size_t* c, const dsSysidDef* sd) {
  dsConfigKey keys[32];
  int n = 0;
  for (const dsConfigKey* k = ds_sysid_keys(); k->path && n < 31; k++)
    if (!strncmp(k->path, "camsim.", 7)) keys[n++] = *k;
  memset(&keys[n], 0, sizeof keys[n]);
  const int len = ds_config_write_section(keys, sd, 4, NULL, 0);
  char* t = len > 0 ? (char*)malloc((size_t)len + 1) : NULL;
  if (t && ds_config_write_section(keys, sd, 4, t, (size_t)len + 1) == len) append(b, l, c, ",%s", t);
  free(t);
}

/* A true field with its drawn values: region r's value is that of its
 * first element (every element of a region has it). */
static void append_field(char** b, size_t* l, size_t* c, const dsSysid* s, int p, const dsSysidField* f) {
  static const char* const kind[] = {"none", "layers", "band"};
  const int* region = NULL;
  int nelem = 0;
  const int nr = ds_sysid_field_region(s, p, &region, &nelem);
  int off = 0;
  while (off < ds_sysid_num_values(s) && ds_sysid_value_param(s, off) != p) off++;
  dsReal v[DS_SYSID_MAX_REGIONS] = {0};
  for (int r = 0; r < nr; r++)
    for (int e = nelem - 1; e >= 0; e--)
      if (region[e] == r && !ds_sysid_value_fixed(s, off + e)) v[r] = (dsReal)ds_sysid_truth(s)[off + e];
  append(b, l, c, ",\n      \"true_field\": {\"kind\": \"%s\", \"axis\": \"%c\"", kind[f->kind], "xyz"[f->axis]);
  append_reals(b, l, c, "values", v, nr);
  if (f->nband) append_reals(b, l, c, "band", f->band, f->nband);
  append(b, l, c, "}");
}

/* sysid.stages as the config gives them */
static void append_stages(char** b, size_t* l, size_t* c, const dsSysidDef* sd) {
  static const char* const lossn[] = {"env", "mse", "l1", "dssim", "l2_dssim"};
  if (!sd->nstages) return;
  append(b, l, c, ",\n    \"stages\": [");
  for (int st = 0; st < sd->nstages; st++) {
    const dsSysidStage* g = &sd->stages[st];
    append(b, l, c, "%s\n      {\"params\": [", st ? "," : "");
    for (int k = 0, first = 1; k < DS_SYSID_MAX_PARAMS; k++)
      if (g->free_mask >> k & 1u) {
        append(b, l, c, "%s%d", first ? "" : ", ", k + 1);
        first = 0;
      }
    append(b, l, c, "], \"iterations\": %d, \"loss\": \"%s\"", g->iterations, lossn[g->loss]);
    if (g->lr > 0) append(b, l, c, ", \"lr\": %.17g", g->lr);
    append(b, l, c, "}");
  }
  append(b, l, c, "\n    ]");
}

/* sysid.cameras, the views of a synthetic video (controllers/sysid_views.c) */
static void append_cameras(char** b, size_t* l, size_t* c, const dsSysidDef* sd) {
  if (!sd->nviews) return;
  append(b, l, c, ",\n    \"cameras\": [");
  for (int v = 0; v < sd->nviews; v++) {
    const dsSysidView* w = &sd->views[v];
    append(b, l, c, "%s\n      {\"position\": [%.17g, %.17g, %.17g], \"look_at\": [%.17g, %.17g, %.17g], ", v ? "," : "",
           w->position[0], w->position[1], w->position[2], w->look_at[0], w->look_at[1], w->look_at[2]);
    if (w->fx > 0)
      append(b, l, c, "\"fx\": %.17g, \"fy\": %.17g, \"cx\": %.17g, \"cy\": %.17g}", w->fx, w->fy, w->cx, w->cy);
    else
      append(b, l, c, "\"fov\": %.17g}", w->fov);
  }
  append(b, l, c, "\n    ]");
}

/* The object's complete config: env (every key), sysid (the used keys, with
 * the drawn true values), run (seed of the object). */
static char* object_config(const Ctx* c, const dsSysid* s, int k) {
  const int n = ds_env_def_to_json(&c->def, NULL, 0);
  if (n < 0) return NULL;
  size_t cap = (size_t)n + 8192, len = 0;
  char* buf = (char*)malloc(cap);
  if (!buf) return NULL;
  ds_env_def_to_json(&c->def, buf, cap);
  char* tail = strstr(buf, "\n  }\n}\n");
  if (!tail) {
    free(buf);
    return NULL;
  }
  len = (size_t)(tail - buf) + 4;
  buf[len] = '\0';
  static const char* const optn[] = {"adam", "sgd", "lbfgs"};
  static const char* const vidn[] = {"synthetic", "frames", "camsim"};
  static const char* const frn[] = {"all", "first_last", "last"};
  const dsSysidDef* sd = &c->sd;
  append(&buf, &len, &cap, ",\n  \"sysid\": {");
  const double* truth = ds_sysid_truth(s);
  for (int p = 0; p < ds_sysid_num_params(sd); p++) {
    const dsSysidParam* q = &sd->params[p];
    append(&buf, &len, &cap, "%s\n    \"param%d\": {\n      \"name\": \"%s\",\n      \"per_element\": %s,\n"
           "      \"lower\": %.17g,\n      \"upper\": %.17g", p ? "," : "", p + 1, q->name,
           q->per_element ? "true" : "false", (double)q->lower, (double)q->upper);
    if (q->ninit) append_reals(&buf, &len, &cap, "init", q->init, q->ninit);
    if (q->ninit_range) append_reals(&buf, &len, &cap, "init_range", q->init_range, q->ninit_range);
    if (q->init_each) append(&buf, &len, &cap, ",\n      \"init_each\": true");
    if (q->tv > 0 || q->laplacian > 0)
      append(&buf, &len, &cap, ",\n      \"tv\": %.17g,\n      \"tv_eps\": %.17g,\n      \"laplacian\": %.17g",
             q->tv, q->tv_eps, q->laplacian);
    if (truth && q->true_field.kind) {
      append_field(&buf, &len, &cap, s, p, &q->true_field);
      append(&buf, &len, &cap, "\n    }");
      continue;
    }
    if (truth) { /* the drawn value: the first row of the parameter's values not held at 0 */
      int first = -1, w = 0;
      for (int i = 0; i < ds_sysid_num_values(s); i++)
        if (ds_sysid_value_param(s, i) == p) {
          if (first < 0 && !ds_sysid_value_fixed(s, i)) first = i;
          w++;
        }
      if (first < 0) first = 0;
      dsReal t[DS_SYSID_MAX_VEC];
      const int width = ds_sysid_param_width(s, p);
      for (int j = 0; j < width; j++) t[j] = (dsReal)truth[first + j];
      append_reals(&buf, &len, &cap, "true", t, width);
    }
    if (q->ntruth_range) append_reals(&buf, &len, &cap, "true_range", q->truth_range, q->ntruth_range);
    append(&buf, &len, &cap, "\n    }");
  }
  append(&buf, &len, &cap,
         ",\n    \"optimizer\": \"%s\",\n    \"lr\": %.17g,\n    \"momentum\": %.17g,\n    \"lbfgs_memory\": %d,\n"
         "    \"iterations\": %d,\n    \"video\": \"%s\",\n    \"frames\": \"%s\"",
         optn[sd->optimizer], sd->lr, sd->momentum, sd->lbfgs_memory, sd->iterations, vidn[sd->video], frn[sd->frames]);
  if (sd->video == DS_SYSID_FRAMES) {
    append_key(&buf, &len, &cap, "frames_dir", sd);
    append_key(&buf, &len, &cap, "camera", sd);
  }
  if (sd->video == DS_SYSID_CAMSIM) append_camsim(&buf, &len, &cap, sd);
  append_stages(&buf, &len, &cap, sd);
  append_cameras(&buf, &len, &cap, sd);
  if (sd->naction) {
    append(&buf, &len, &cap, ",\n    \"action\": [");
    for (int i = 0; i < sd->naction; i++) append(&buf, &len, &cap, "%s%.17g", i ? ", " : "", (double)sd->action[i]);
    append(&buf, &len, &cap, "]");
  }
  append(&buf, &len, &cap, "\n  },\n  \"run\": {\n    \"seed\": %llu,\n    \"threads\": 1\n  }\n}\n",
         (unsigned long long)(sd->seed + (uint64_t)k));
  return buf;
}

static void to_u8(const dsReal* src, int n, int w, int h, uint8_t* dst) {
  for (int f = 0; f < n; f++) ds_image_to_u8(src + (size_t)f * 4 * w * h, w, h, dst + (size_t)f * 4 * w * h);
}

/* The run's cameras at the values just rendered, into ep: the intrinsics,
 * the views (several), and view 0's estimate when a camera is identified. */
static void record_views(const dsSysid* s, dsEpisodeRecord* ep, double* views) {
  const int nv = ds_sysid_num_views(s) < 8 ? ds_sysid_num_views(s) : 8;
  int identified = 0;
  for (int p = 0; p < ds_sysid_nparams(s); p++) identified |= !strncmp(ds_sysid_param_name(s, p), "camera", 6);
  for (int k = 0; k < nv; k++) {
    dsSysidView w;
    if (ds_sysid_view(s, k, &w)) return;
    double* a = views + 11 * k;
    for (int i = 0; i < 3; i++) a[i] = w.position[i], a[3 + i] = w.look_at[i];
    a[6] = w.fov, a[7] = w.fx, a[8] = w.fy, a[9] = w.cx, a[10] = w.cy;
  }
  if (nv < 1) return;
  for (int i = 0; i < 4; i++) ep->cam_intr[i] = views[7] > 0 ? views[7 + i] : 0;
  if (nv > 1 || identified) {
    for (int i = 0; i < 3; i++) ep->cam_eye[i] = views[i], ep->cam_look_at[i] = views[3 + i];
    if (views[6] > 0) ep->cam_fov = views[6];
  }
  if (nv > 1) {
    ep->cam_nviews = nv;
    ep->cam_views = views;
  }
}

/* The frames rendered with values, as an episode of the log: the initial
 * state (time 0) first, then the video's frames, each with its substep and
 * the camera, so that exported frames describe themselves. */
static int write_frames(Obj* o, const char* which, int iteration, const double* values, double metric) {
  double loss = 0;
  int rc = ds_sysid_eval(o->s, values, &loss, NULL);
  if (rc) return rc;
  const dsSysidVideo* v = ds_sysid_video(o->s);
  const size_t fb = 4 * (size_t)v->width * (size_t)v->height;
  const int nf = v->nframes + 1;
  uint8_t* frames = (uint8_t*)malloc((size_t)nf * fb);
  uint8_t* goal = (uint8_t*)malloc(fb);
  dsReal* img0 = (dsReal*)malloc(fb * sizeof(dsReal));
  int* sub = (int*)malloc(sizeof(int) * (size_t)nf);
  if (!frames || !goal || !img0 || !sub) rc = DS_ERR_NOMEM;
  if (!rc) { /* the rendered frames first: the initial render resets the env */
    to_u8(ds_sysid_rendered(o->s), v->nframes, v->width, v->height, frames + fb);
    rc = ds_sysid_render_initial(o->s, values, img0);
  }
  if (rc) {
    free(frames);
    free(goal);
    free(img0);
    free(sub);
    return rc;
  }
  to_u8(img0, 1, v->width, v->height, frames);
  to_u8(v->rgba + (size_t)(v->nframes - 1) * fb, 1, v->width, v->height, goal);
  sub[0] = 0;
  for (int f = 0; f < v->nframes; f++) sub[f + 1] = v->substep[f];
  const dsEnvDef* d = ds_env_def(ds_sysid_env(o->s));
  dsEpisodeRecord ep;
  memset(&ep, 0, sizeof ep);
  ep.iteration = iteration;
  ep.loss = loss;
  ep.metric = metric;
  ep.dt = (double)d->dt;
  ep.control_interval = d->control_interval;
  ep.render_interval = d->control_interval;
  ep.stride = 1;
  ep.nsubsteps = d->substeps + 1;
  ep.nframes = nf;
  ep.height = v->height;
  ep.width = v->width;
  ep.frames = frames;
  ep.goal = goal;
  ep.frame_substep = sub;
  dsCamera cam;
  if (ds_camera_look_at(&cam, d->cam_distance, d->cam_elevation, d->cam_azimuth) == DS_OK) {
    for (int i = 0; i < 3; i++) {
      ep.cam_eye[i] = (double)cam.eye[i] + (double)d->cam_look_at[i];
      ep.cam_look_at[i] = (double)d->cam_look_at[i];
    }
    ep.cam_fov = (double)d->cam_fov;
  }
  double views[8 * 11];
  record_views(o->s, &ep, views);
#pragma omp critical(dsim_sysid_hdf5)
  rc = ds_runlog_write_episode(o->log, which, &ep);
  free(frames);
  free(goal);
  free(img0);
  free(sub);
  return rc;
}

static double mean_are(const Obj* o, const double* values) {
  double are[DS_SYSID_MAX_PARAMS];
  if (ds_sysid_errors(o->s, values, are)) return NAN;
  double m = 0;
  for (int p = 0; p < ds_sysid_nparams(o->s); p++) m += are[p];
  return m / ds_sysid_nparams(o->s);
}

/* The object's log opened (its sysid made first unless a group made it);
 * 0, or the object has failed. */
static int object_begin(Ctx* c, Obj* o) {
  char err[1024];
  int rc = 0;
  if (!o->s) {
    rc = ds_sysid_create(&c->def, &c->sd, o->k, c->have_video ? &c->video : NULL, &o->s, err,
                         sizeof err);
    if (rc) {
      snprintf(o->err, sizeof o->err, "%s", err);
      o->failed = 1;
      return -1;
    }
  }
  if (!o->config) o->config = object_config(c, o->s, o->k);
  dsRunLogDef ld = ds_default_runlog_def();
  ld.config_text = o->config ? o->config : "{}";
  ld.env = c->def.cls->name;
  ld.method = "sysid";
  ld.seed = c->sd.seed + (uint64_t)o->k;
  ld.threads = 1;
  ld.nparams = ds_sysid_num_values(o->s);
  ld.overwrite = c->a->force;
#pragma omp critical(dsim_sysid_hdf5)
  rc = ds_runlog_create(o->out, &ld, &o->log, err, sizeof err);
  if (rc && rc != DS_ERR_UNSUPPORTED) {
    snprintf(o->err, sizeof o->err, "%s", err);
    o->failed = 1;
    return -1;
  }
  o->best_loss = INFINITY;
  return 0;
}

/* Iteration i's outcome (rc, it) into the object's record and log. */
static void object_iteration(Ctx* c, Obj* o, int i, int rc, const dsSysidIter* it, double t0, int show) {
  if (rc) {
    snprintf(o->err, sizeof o->err, "iteration %d: %s", i, ds_sysid_last_error(o->s));
    o->failed = 1;
    return;
  }
  const int truth = ds_sysid_truth(o->s) != NULL;
  const int n = c->sd.iterations;
  const double metric = truth ? mean_are(o, it->values) : it->loss;
  if (i == 0) o->first_loss = it->loss;
  if (ds_sysid_stage(o->s) != o->stage) { /* a new stage: its losses need not compare with the last */
    o->stage = ds_sysid_stage(o->s);
    o->best_loss = INFINITY;
  }
  if (it->loss < o->best_loss) {
    o->best_loss = it->loss;
    o->best_it = i;
  }
  o->last_it = i;
  o->its = i + 1;
  dsRunIteration ri = {it->loss, metric, now_s() - t0, it->grad_norm, it->values};
  if (o->log) {
#pragma omp critical(dsim_sysid_hdf5)
    rc = ds_runlog_append_iteration(o->log, &ri);
  }
  if (show) {
    /* iterations numbered from 0 as in the log; the mean error only where the truth is known */
    char err[32] = "";
    if (isatty(STDOUT_FILENO)) {
      if (truth) snprintf(err, sizeof err, "  error %.3g", metric);
      printf("\r%5d/%d iteration %d loss %.4g  grad %.3g%s  %.2f s   ", i + 1, n, i, it->loss, it->grad_norm, err,
             now_s() - t0);
    } else {
      if (truth) snprintf(err, sizeof err, " error %.4g", metric);
      printf("iteration %d (%d of %d) loss %.6g grad_norm %.4g%s evaluations %d time %.2f s\n", i, i + 1, n,
             it->loss, it->grad_norm, err, it->evaluations, now_s() - t0);
    }
    fflush(stdout);
  }
}

/* The object's results: errors, the first/best/last records, the log closed. */
static void object_end(Obj* o, double t0, int show) {
  const int truth = ds_sysid_truth(o->s) != NULL;
  if (show && isatty(STDOUT_FILENO)) printf("\n");
  o->wall = now_s() - t0;
  if (truth) ds_sysid_errors(o->s, NULL, o->are);
  if (o->log && o->its > 0) {
    double bl = 0;
    const double* best = ds_sysid_best_values(o->s, &bl);
    const double* first = ds_sysid_initial_values(o->s);
    const double* last = ds_sysid_values(o->s);
    if (!write_frames(o, "first", 0, first, truth ? mean_are(o, first) : o->first_loss))
      if (!write_frames(o, "best", o->best_it, best, truth ? mean_are(o, best) : bl))
        write_frames(o, "last", o->last_it, last, truth ? mean_are(o, last) : 0);
  }
  if (o->log) {
    char status[1200];
    snprintf(status, sizeof status, "%s", o->failed ? "failed: " : g_stop ? "interrupted" : "completed");
    if (o->failed) snprintf(status + 8, sizeof status - 8, "%.1000s", o->err);
#pragma omp critical(dsim_sysid_hdf5)
    ds_runlog_close(o->log, status);
    o->log = NULL;
  }
}

static void run_object(Ctx* c, Obj* o, int show) {
  const double t0 = now_s();
  if (object_begin(c, o)) return;
  for (int i = 0; i < c->sd.iterations && !g_stop && !o->failed; i++) {
    dsSysidIter it;
    const int rc = ds_sysid_iterate(o->s, &it);
    object_iteration(c, o, i, rc, &it, t0, show);
    const char* why = ds_sysid_stop_reason(o->s);
    if (*why && !o->failed) { /* L-BFGS has nothing left to find: later iterations would repeat this one */
      if (show) printf("%sstopped after iteration %d: %s\n", isatty(STDOUT_FILENO) ? "\n" : "", i, why);
      break;
    }
  }
  object_end(o, t0, show);
}

/* Every object of the shard together (ds_sysid_group_*): one lockstep batch
 * evaluates them all each iteration; the logs as run_object writes them. */
static int run_group(Ctx* c) {
  const double t0 = now_s();
  int* ks = (int*)calloc((size_t)c->nobj, sizeof(int));
  dsSysidIter* its = (dsSysidIter*)calloc((size_t)c->nobj, sizeof(dsSysidIter));
  int* status = (int*)calloc((size_t)c->nobj, sizeof(int));
  if (!ks || !its || !status) {
    free(ks);
    free(its);
    free(status);
    return DS_ERR_NOMEM;
  }
  for (int i = 0; i < c->nobj; i++) ks[i] = c->obj[i].k;
  char err[1024];
  dsSysidGroup* g = NULL;
  int rc = ds_sysid_group_create(&c->def, &c->sd, ks, c->nobj, c->have_video ? &c->video : NULL,
                                 &g, err, sizeof err);
  if (rc) {
    for (int i = 0; i < c->nobj; i++) {
      snprintf(c->obj[i].err, sizeof c->obj[i].err, "%s", err);
      c->obj[i].failed = 1;
    }
  } else {
    for (int i = 0; i < c->nobj; i++) {
      ds_sysid_destroy(c->obj[i].s); /* the group's own object instead */
      c->obj[i].s = ds_sysid_group_object(g, i);
      object_begin(c, &c->obj[i]);
    }
    for (int it = 0; it < c->sd.iterations && !g_stop; it++) {
      ds_sysid_group_iterate(g, its, status);
      int going = 0;
      for (int i = 0; i < c->nobj; i++) {
        Obj* o = &c->obj[i];
        if (o->failed) continue;
        object_iteration(c, o, it, status[i], &its[i], t0, 0);
        going += !o->failed;
      }
      if (!c->a->quiet) {
        printf("iteration %d (%d of %d): %d of %d objects going, %.2f s\n", it, it + 1, c->sd.iterations, going,
               c->nobj, now_s() - t0);
        fflush(stdout);
      }
      if (!going) break;
    }
    /* the records re-simulate on each object's own CPU env: across threads */
#pragma omp parallel for schedule(dynamic, 1) num_threads(c->nthreads)
    for (int i = 0; i < c->nobj; i++)
      if (c->obj[i].s) object_end(&c->obj[i], t0, 0);
    c->group = g; /* owns the objects' dsSysid: the table below reads them */
  }
  free(ks);
  free(its);
  free(status);
  return 0;
}

/* --field-png: the first object's first per-element parameter with a truth */
static int field_png(Ctx* c, const char* path, int force) {
  const Obj* o = &c->obj[0];
  int rc = ds__cli_check_output("sysid", path, NULL, force);
  if (rc || !o->s || o->failed) return rc ? rc : DS_EXIT_FAILURE;
  char err[1024] = "no per-element parameter with a known truth";
  for (int p = 0; p < ds_sysid_nparams(o->s); p++)
    if (!ds__cli_field_png(o->s, p, path, err, sizeof err)) {
      printf("field picture: %s\n", path);
      return DS_EXIT_OK;
    }
  fprintf(stderr, "dsim sysid: --field-png %s: %s\n", path, err);
  return DS_EXIT_FAILURE;
}

/* ---- the table -------------------------------------------------------------- */
typedef struct Row {
  int object;
  char param[DS_SYSID_NAME_MAX];
  double truth, estimate, are, wall;
  int iterations;
  int field;                          /* a per-element parameter with a truth: the field error below */
  double l2;                          /* relative L2 error over its elements */
  double region[DS_SYSID_MAX_REGIONS]; /* mean ARE per true region */
  int nregion;
} Row;

/* Per-element parameters with a truth: the field error (relative L2 over
 * the elements, mean over objects) and the mean ARE per true region, one
 * line each (never 5 fields, which reproduce-sysid reads as table rows). */
static void print_fields(const Row* rows, int n) {
  for (int i = 0; i < n; i++) {
    if (!rows[i].field) continue;
    int seen = 0;
    for (int j = 0; j < i; j++) seen |= rows[j].field && !strcmp(rows[j].param, rows[i].param);
    if (seen) continue;
    double l2 = 0, reg[DS_SYSID_MAX_REGIONS] = {0};
    int m = 0;
    for (int j = 0; j < n; j++)
      if (rows[j].field && !strcmp(rows[j].param, rows[i].param)) {
        l2 += rows[j].l2;
        for (int r = 0; r < rows[i].nregion; r++) reg[r] += rows[j].region[r];
        m++;
      }
    printf("field %s objects %d relative L2 %.4g", rows[i].param, m, l2 / m);
    if (rows[i].nregion) printf(" region ARE");
    for (int r = 0; r < rows[i].nregion; r++) printf(" %.4g", reg[r] / m);
    printf("\n");
  }
}

/* v as fmt in b, or "-" where it is not a number (footage without true values) */
static const char* num(char* b, size_t len, const char* fmt, double v) __attribute__((format(printf, 3, 0)));
static const char* num(char* b, size_t len, const char* fmt, double v) {
  if (isfinite(v))
    snprintf(b, len, fmt, v);
  else
    snprintf(b, len, "-");
  return b;
}

static void print_table(const Row* rows, int n, FILE* csv) {
  printf("\n%-7s %-18s %14s %14s %12s %8s %6s\n", "seed", "parameter", "true", "estimate", "abs.rel.err", "time s",
         "iters");
  for (int i = 0; i < n; i++) {
    char tv[32], ae[32];
    printf("%-7d %-18s %14s %14.6g %12s %8.2f %6d\n", rows[i].object, rows[i].param,
           num(tv, sizeof tv, "%.6g", rows[i].truth), rows[i].estimate, num(ae, sizeof ae, "%.4g", rows[i].are),
           rows[i].wall, rows[i].iterations);
  }
  /* per parameter: mean and median absolute relative error over objects */
  printf("\n%-18s %8s %12s %12s %12s\n", "parameter", "objects", "mean ARE", "median ARE", "mean time s");
  for (int i = 0; i < n; i++) {
    int seen = 0;
    for (int j = 0; j < i; j++) seen |= !strcmp(rows[j].param, rows[i].param);
    if (seen) continue;
    double* v = (double*)malloc(sizeof(double) * (size_t)n);
    int m = 0;
    double sum = 0, tsum = 0;
    for (int j = 0; j < n; j++)
      if (!strcmp(rows[j].param, rows[i].param)) {
        if (v) v[m] = rows[j].are;
        m++;
        sum += rows[j].are;
        tsum += rows[j].wall;
      }
    double med = NAN;
    if (v) {
      for (int a = 1; a < m; a++)
        for (int b = a; b > 0 && v[b - 1] > v[b]; b--) {
          double t = v[b];
          v[b] = v[b - 1];
          v[b - 1] = t;
        }
      med = m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
    }
    free(v);
    char mean[32], median[32];
    printf("%-18s %8d %12s %12s %12.2f\n", rows[i].param, m, num(mean, sizeof mean, "%.4g", sum / m),
           num(median, sizeof median, "%.4g", med), tsum / m);
  }
  print_fields(rows, n);
  if (csv) {
    fprintf(csv, "seed,parameter,true,estimate,abs_rel_error,time_s,iterations\n");
    for (int i = 0; i < n; i++)
      fprintf(csv, "%d,%s,%.17g,%.17g,%.17g,%.6f,%d\n", rows[i].object, rows[i].param, rows[i].truth,
              rows[i].estimate, rows[i].are, rows[i].wall, rows[i].iterations);
  }
  fflush(stdout);
}

/* Rows of one object: shared scalars show their value; vectors and
 * per-element parameters show the mean of their values. */
static int object_rows(const dsSysid* s, int object, const double* values, const double* truth, const double* are,
                       double wall, int its, Row* rows) {
  const int np = ds_sysid_nparams(s);
  for (int p = 0; p < np; p++) {
    Row* r = &rows[p];
    memset(r, 0, sizeof *r);
    r->object = object; /* its seed: run.seed + k */
    snprintf(r->param, sizeof r->param, "%s", ds_sysid_param_name(s, p));
    int m = 0;
    for (int i = 0; i < ds_sysid_num_values(s); i++)
      if (ds_sysid_value_param(s, i) == p && !ds_sysid_value_fixed(s, i)) {
        r->estimate += values[i];
        r->truth += truth ? truth[i] : NAN;
        m++;
      }
    r->estimate /= m;
    r->truth /= m;
    r->are = are ? are[p] : NAN;
    r->field = truth && m > ds_sysid_param_width(s, p) &&
               !ds_sysid_field_errors(s, p, values, &r->l2, r->region, &r->nregion);
    r->wall = wall;
    r->iterations = its;
  }
  return np;
}

static int open_csv(const char* cmd, const char* path, int force, FILE** out, char* tmp, size_t n) {
  *out = NULL;
  if (!path) return DS_EXIT_OK;
  int rc = ds__cli_check_output(cmd, path, NULL, force);
  if (rc) return rc;
  int fd = ds__cli_temp_for(cmd, path, tmp, n);
  if (fd < 0) return DS_EXIT_FAILURE;
  *out = fdopen(fd, "w");
  if (!*out) {
    close(fd);
    unlink(tmp);
    fprintf(stderr, "dsim %s: %s: %s\n", cmd, tmp, strerror(errno));
    return DS_EXIT_FAILURE;
  }
  return DS_EXIT_OK;
}

static int close_csv(const char* cmd, FILE* f, const char* tmp, const char* path, int force) {
  if (!f) return DS_EXIT_OK;
  if (fclose(f) != 0) {
    unlink(tmp);
    fprintf(stderr, "dsim %s: cannot write %s\n", cmd, path);
    return DS_EXIT_FAILURE;
  }
  int rc = ds__cli_commit_temp(cmd, tmp, path, force);
  if (!rc) printf("table: %s\n", path);
  return rc;
}

/* ---- --collect ----------------------------------------------------------------- */
static int collect(Args* a) {
  Row* rows = (Row*)calloc((size_t)a->nlogs * DS_SYSID_MAX_PARAMS, sizeof(Row));
  if (!rows) return DS_EXIT_FAILURE;
  int nrows = 0, exitc = DS_EXIT_OK;
  for (int i = 0; i < a->nlogs && !exitc; i++) {
    const char* path = a->logs[i];
    char err[1024];
    exitc = ds__cli_probe_runlog("sysid", path, NULL);
    if (exitc) break;
    dsRunSummary sum;
    char* text = NULL;
    double* params = NULL;
    double* loss = NULL;
    double* wall = NULL;
    int n = 0, np = 0, nl = 0;
    int rc = ds_runlog_read_summary(path, &sum, err, sizeof err);
    if (!rc && strcmp(sum.method, "sysid")) {
      snprintf(err, sizeof err, "%s: a log of `dsim run` (method %s), not of `dsim sysid`", path, sum.method);
      rc = DS_ERR_FORMAT;
    }
    if (!rc) rc = ds_runlog_read_config(path, &text, err, sizeof err);
    if (!rc) rc = ds_runlog_read_params(path, &n, &np, &params, err, sizeof err);
    if (!rc) rc = ds_runlog_read_iterations(path, &nl, &loss, NULL, &wall, NULL, err, sizeof err);
    /* the object again, from its config (no iterations): the layout and the truth */
    dsEnvDef def;
    dsSysidDef sd = ds_default_sysid_def();
    dsRunDef rd = ds_default_run_def();
    dsSysid* s = NULL;
    if (!rc) rc = ds_env_def_from_text(path, text, &def, err, sizeof err);
    if (!rc) rc = ds_sysid_def_from_text(path, text, &sd, err, sizeof err);
    if (!rc) rc = ds_run_def_from_text(path, text, &rd, err, sizeof err);
    if (!rc) {
      sd.seed = rd.seed;
      /* the stored "true" values are the drawn ones: use them as given */
      for (int p = 0; p < ds_sysid_num_params(&sd); p++) sd.params[p].ntruth_range = 0;
      sd.iterations = 1;
      rc = ds_sysid_create(&def, &sd, 0, NULL, &s, err, sizeof err);
    }
    if (!rc && (np != ds_sysid_num_values(s) || n < 1 || nl < n)) {
      snprintf(err, sizeof err, "%s: %d iterations of %d values, expected %d values per iteration", path, n, np,
               s ? ds_sysid_num_values(s) : 0);
      rc = DS_ERR_FORMAT;
    }
    if (rc) {
      fprintf(stderr, "dsim sysid: --collect: %s\n", err);
      exitc = ds__cli_exit_code(rc, DS_CLI_RUNLOG);
    } else {
      /* with stages the best is the last stage's (the losses of stages need not compare): its
         iterations are the log's last ones (fewer when it stopped early) */
      const int from = sd.nstages && n > sd.stages[sd.nstages - 1].iterations ? n - sd.stages[sd.nstages - 1].iterations : 0;
      int best = from;
      for (int k = from + 1; k < n; k++)
        if (loss[k] < loss[best]) best = k;
      const double* v = params + (size_t)best * np;
      double are[DS_SYSID_MAX_PARAMS];
      const int known = sd.video != DS_SYSID_FRAMES; /* footage: no true values; camsim: the config's */
      ds_sysid_errors(s, v, are);
      nrows += object_rows(s, (int)rd.seed, v, known ? ds_sysid_truth(s) : NULL, known ? are : NULL, wall[n - 1], n,
                           rows + nrows);
    }
    ds_sysid_destroy(s);
    ds_runlog_free(text);
    ds_runlog_free(params);
    ds_runlog_free(loss);
    ds_runlog_free(wall);
  }
  if (!exitc) {
    FILE* csv = NULL;
    char tmp[4096];
    exitc = open_csv("sysid", a->csv, a->force, &csv, tmp, sizeof tmp);
    if (!exitc) {
      printf("collected %d log%s\n", a->nlogs, a->nlogs == 1 ? "" : "s");
      print_table(rows, nrows, csv);
      exitc = close_csv("sysid", csv, tmp, a->csv, a->force);
    }
  }
  free(rows);
  return exitc;
}

/* ---- setup ------------------------------------------------------------------------ */
static int setup(Ctx* c) {
  Args* a = c->a;
  int exitc = ds__cli_locate_config("sysid", a->target, c->path, sizeof c->path);
  if (exitc) return exitc;
  char* text = NULL;
  char err[2048];
  int rc = ds_config_read_file(c->path, &text, err, sizeof err);
  if (!rc) rc = ds_env_def_from_text(c->path, text, &c->def, err, sizeof err);
  c->sd = ds_default_sysid_def();
  c->rd = ds_default_run_def();
  if (!rc) rc = ds__sysid_parse_section(c->path, text, &c->sd, err, sizeof err);
  if (!rc) rc = ds_run_def_from_text(c->path, text, &c->rd, err, sizeof err);
  ds_config_free_text(text);
  if (rc) {
    fprintf(stderr, "dsim sysid: %s\n", err);
    return ds__cli_exit_code(rc, DS_CLI_INPUT);
  }
  for (int i = 0; i < a->nsets; i++) {
    const Set* s = &a->sets[i];
    if (!strcmp(s->section, "env"))
      rc = ds_env_def_set(&c->def, s->key, s->value, err, sizeof err);
    else if (!strcmp(s->section, "sysid"))
      rc = ds_config_set(s->source, "sysid", ds_sysid_keys(), &c->sd, sizeof c->sd, s->key, s->value, err, sizeof err);
    else
      rc = ds_config_set(s->source, "run", ds_run_keys(), &c->rd, sizeof c->rd, s->key, s->value, err, sizeof err);
    if (rc) {
      if (!strcmp(s->section, "env"))
        fprintf(stderr, "dsim sysid: %s: %s\n", s->source, err); /* the env's messages name no source */
      else
        fprintf(stderr, "dsim sysid: %s\n", err);
      return DS_EXIT_USAGE;
    }
  }
  rc = ds_sysid_def_validate(&c->sd, err, sizeof err);
  if (rc) {
    fprintf(stderr, "dsim sysid: %s: %s\n", c->path, err);
    return ds__cli_exit_code(rc, DS_CLI_INPUT);
  }
  if (a->group && c->sd.optimizer == DS_SYSID_LBFGS) {
    fprintf(stderr,
            "dsim sysid: --group: optimizer lbfgs runs a line search of its own per object; use adam or sgd "
            "(sysid.optimizer), or leave out --group\n");
    return DS_EXIT_USAGE;
  }
  c->sd.seed = c->rd.seed;
  if (c->sd.video == DS_SYSID_FRAMES) {
    if ((rc = ds_sysid_load_video(&c->sd, &c->def, &c->video, err, sizeof err))) {
      fprintf(stderr, "dsim sysid: %s\n", err);
      return ds__cli_exit_code(rc, DS_CLI_INPUT);
    }
    c->have_video = 1;
  }
  {
    const char* what = "run.device";
    for (int i = 0; i < a->nsets; i++)
      if (!strcmp(a->sets[i].section, "run") && !strcmp(a->sets[i].key, "device")) what = strncmp(a->sets[i].source, "--device", 8) ? "run.device" : "--device";
    if ((exitc = ds__cli_check_device("sysid", what, c->rd.device, &c->def.device))) return exitc;
  }
  c->nthreads = c->rd.threads > 0 ? c->rd.threads : ds_get_max_threads();
  /* the shard's objects and their logs */
  c->obj = (Obj*)calloc((size_t)a->objects, sizeof(Obj));
  if (!c->obj) return DS_EXIT_FAILURE;
  char base[3072];
  if (c->rd.out[0]) {
    snprintf(base, sizeof base, "%s", c->rd.out);
    const size_t L = strlen(base);
    if (a->objects > 1 && L > 3 && !strcmp(base + L - 3, ".h5")) base[L - 3] = '\0';
  } else {
    snprintf(base, sizeof base, "runs/sysid-%s-s%llu", c->def.cls->name, (unsigned long long)c->rd.seed);
  }
  for (int k = 0; k < a->objects; k++) {
    if (k % a->shard_n != a->shard_i) continue;
    Obj* o = &c->obj[c->nobj++];
    o->k = k;
    if (a->objects == 1 && c->rd.out[0])
      snprintf(o->out, sizeof o->out, "%s", base);
    else if (a->objects == 1)
      snprintf(o->out, sizeof o->out, "%s.h5", base);
    else
      snprintf(o->out, sizeof o->out, "%s-o%d.h5", base, k);
    if (ds_make_parent_dirs(o->out)) {
      fprintf(stderr, "dsim sysid: cannot create the directory of %s: %s\n", o->out, strerror(errno));
      return DS_EXIT_FAILURE;
    }
    exitc = ds__cli_check_output("sysid", o->out, c->path, a->force);
    if (exitc) return exitc;
  }
  if (c->nobj == 0) {
    fprintf(stderr, "dsim sysid: shard %d/%d of %d object%s has no objects\n", a->shard_i, a->shard_n, a->objects,
            a->objects == 1 ? "" : "s");
    return DS_EXIT_USAGE;
  }
  /* the first object checks every parameter before anything runs */
  rc = ds_sysid_create(&c->def, &c->sd, c->obj[0].k, c->have_video ? &c->video : NULL,
                       &c->obj[0].s, err, sizeof err);
  if (rc) {
    fprintf(stderr, "dsim sysid: %s: %s\n", c->path, err);
    return ds__cli_exit_code(rc, DS_CLI_INPUT);
  }
  return DS_EXIT_OK;
}

int ds__cli_sysid(int argc, char** argv) {
  static Args args;
  int rc = parse_args(argc, argv, &args);
  if (rc) return rc < 0 ? DS_EXIT_OK : rc;
  if (args.collect) {
    rc = collect(&args);
    free(args.logs);
    return rc;
  }
  Ctx c;
  memset(&c, 0, sizeof c);
  c.a = &args;
  int exitc = setup(&c);
  if (exitc == DS_EXIT_OK) {
    const int np = ds_sysid_num_params(&c.sd);
    static const char* const optn[] = {"adam", "sgd", "lbfgs"};
    printf("dsim sysid: %s (%s), %d parameter%s (%d values), %s lr %g, %d iterations, %d object%s", c.def.cls->name,
           c.path, np, np == 1 ? "" : "s", ds_sysid_num_values(c.obj[0].s), optn[c.sd.optimizer], c.sd.lr,
           c.sd.iterations, c.nobj, c.nobj == 1 ? "" : "s");
    if (args.shard_n > 1) printf(" (shard %d/%d of %d)", args.shard_i, args.shard_n, args.objects);
    printf(", %d thread%s, video %s (%d frames)\n", c.nthreads, c.nthreads == 1 ? "" : "s",
           c.have_video                     ? c.sd.frames_dir
           : c.sd.video == DS_SYSID_CAMSIM ? "camsim"
                                             : "synthetic",
           ds_sysid_video(c.obj[0].s)->nframes);
    printf("run log%s: %s%s\n", c.nobj == 1 ? "" : "s", c.obj[0].out, c.nobj == 1 ? "" : " ...");
    fflush(stdout);
    static const int sigs[3] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa, old[3];
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &sa, &old[i]);
    const double t0 = now_s();
    const int group = args.group || (c.def.device.kind == DS_DEVICE_CUDA && c.nobj > 1 && c.sd.optimizer != DS_SYSID_LBFGS);
    if (group) {
      ds_set_num_threads(c.nthreads);
      if (!args.quiet) printf("objects evaluated together (one lockstep batch%s)\n",
                              c.def.device.kind == DS_DEVICE_CUDA ? ", one engine on the GPU" : "");
      if (run_group(&c)) {
        fprintf(stderr, "dsim sysid: out of memory\n");
        exitc = DS_EXIT_FAILURE;
      }
    } else if (c.nobj == 1) {
      ds_set_num_threads(c.nthreads);
      run_object(&c, &c.obj[0], !args.quiet);
    } else {
      /* objects in parallel; the engine and renderer inside are serial
         (no nested parallelism), so each result is that of one thread */
      ds_set_num_threads(1);
      int done = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(c.nthreads)
      for (int i = 0; i < c.nobj; i++) {
        run_object(&c, &c.obj[i], 0);
#pragma omp critical(dsim_sysid_print)
        {
          done++;
          const Obj* o = &c.obj[i];
          if (!args.quiet) {
            if (o->failed)
              printf("[%d/%d] object %d failed: %s\n", done, c.nobj, o->k, o->err);
            else
              printf("[%d/%d] object %d: %d iterations, loss %.4g -> %.4g, %.2f s\n", done, c.nobj, o->k, o->its,
                     o->first_loss, o->best_loss, o->wall);
            fflush(stdout);
          }
        }
      }
    }
    const double wall = now_s() - t0;
    for (int i = 0; i < 3; i++) sigaction(sigs[i], &old[i], NULL);
    /* the table */
    Row* rows = (Row*)calloc((size_t)c.nobj * DS_SYSID_MAX_PARAMS, sizeof(Row));
    int nrows = 0, failed = 0;
    for (int i = 0; i < c.nobj; i++) {
      const Obj* o = &c.obj[i];
      if (o->failed) {
        if (c.nobj == 1) fprintf(stderr, "dsim sysid: object %d: %s\n", o->k, o->err);
        failed++;
        continue;
      }
      if (rows && o->s)
        nrows += object_rows(o->s, (int)(c.sd.seed + (uint64_t)o->k), ds_sysid_best_values(o->s, NULL), ds_sysid_truth(o->s),
                             ds_sysid_truth(o->s) ? o->are : NULL, o->wall, o->its, rows + nrows);
    }
    FILE* csv = NULL;
    char tmp[4096];
    int ce = open_csv("sysid", args.csv, args.force, &csv, tmp, sizeof tmp);
    if (rows) print_table(rows, nrows, csv);
    if (!ce) ce = close_csv("sysid", csv, tmp, args.csv, args.force);
    if (!ce && args.field_png) ce = field_png(&c, args.field_png, args.force);
    printf("wall time %.2f s for %d object%s (%.2f s per object)%s\n", wall, c.nobj, c.nobj == 1 ? "" : "s",
           wall / c.nobj, g_stop ? ", interrupted" : "");
    free(rows);
    exitc = g_stop ? 128 + (g_signal ? (int)g_signal : SIGINT) : failed ? DS_EXIT_FAILURE : ce;
  }
  for (int i = 0; i < c.nobj; i++) {
    if (!c.group) ds_sysid_destroy(c.obj[i].s);
    free(c.obj[i].config);
  }
  ds_sysid_group_destroy(c.group);
  free(c.obj);
  ds_sysid_video_free(&c.video);
  return exitc;
}
