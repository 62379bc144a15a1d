/* Where the time of a training iteration goes, per environment: the
 * bundled config's episode (configs/NAME.json when found, else the class's
 * defaults: walker 9,600 substeps + 41 frames; control-fem 5,760 + 96;
 * control-cloth 1,440 + 25; walker-springs 1,920 + 21), 2 threads, medians
 * of the repetitions. Actions follow a fixed sinusoid so the bodies move.
 *
 * Columns (seconds):
 *   forward    reset and every step: the physics (frames are only taken)
 *   loss       ds_env_loss: the frames the loss needs, rendered
 *              (image_last: 1; image_sum: all)
 *   backward   the tape's adjoint and the image loss's
 *   iter       forward + loss + backward: what one training iteration costs
 *   allframes  what rendering every scheduled frame during the forward adds
 *              (the pipeline before frames were rendered on demand; measured
 *              as an image_sum forward with rewards minus the forward)
 *   record     re-simulating one episode for the run log with all its
 *              frames (dsim run records the first, the best, the last)
 *   log/it     logging per iteration of a 40-iteration run: 3 recordings
 *              and 40 appends to an HDF5 log, over 40 (the best is also
 *              recorded as it improves, within 10% of the run's time)
 * and a second line per environment, the tape: the engine data's bytes
 * (ds_data_bytes: state, tape, scratch) with every substep's state kept
 * (checkpoint_every 1) and with a checkpoint every K = ceil(sqrt(T))
 * substeps (the backward recomputes each segment), the iteration (forward +
 * loss + backward) with each, and what checkpointing costs in time.
 *
 *   bench_env [reps] [name ...]      (default 3 reps, every environment class
 *                                     and the bundled control-fem-implicit and
 *                                     control-cloth-implicit; a name is a class
 *                                     or a bundled config)
 *   environment: BENCH_THREADS=N (N threads instead of 2), BENCH_CLOCK=cpu
 *   (process CPU time instead of wall time), BENCH_ONLY=split|tape|pair
 *
 * BENCH_ONLY=pair with two names: their training iterations (forward +
 * loss + backward) alternated in one process, reps pairs (the order
 * swapped every pair), and the median of the per-pair ratios first /
 * second: on a shared machine whose speed drifts between runs, the two
 * halves of a pair see the same machine (issue 31, item 5). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dsim/controller.h"
#include "dsim/engine.h"
#include "dsim/env.h"
#include "dsim/runlog.h"
#include "bench/bench.h"

#ifndef DS_BENCH_SRCDIR
#  define DS_BENCH_SRCDIR "."
#endif

#define MAXREP 64
#define LOG_ITERS 40

/* CPU seconds of the process (all threads): steadier than wall time on a
 * shared machine. */
static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The clock of every figure: wall (default) or, with BENCH_CLOCK=cpu, the
 * process's CPU time (on one thread, what the machine's other load does not
 * inflate as much). */
static int g_cpu_clock = 0;
static int g_split = 1, g_tape = 1; /* BENCH_ONLY */
static double tick(void) { return g_cpu_clock ? cpu_now() : now(); }

/* Angular frequency of the sinusoid actions: the bundled configs'
 * controller.omega (walker, walker-springs 20 rad/s; otherwise 2.5). */
static double omega_of(const char* name) {
  return !strcmp(name, "walker") || !strcmp(name, "walker-springs") ? 20.0 : 2.5;
}

/* The bundled config's env definition, else the class's defaults. */
static dsEnvDef env_def(const char* name, const char** from) {
  dsEnvDef def = ds_default_env_def(name);
  const char* dirs[] = {getenv("DS_SRCDIR"), DS_BENCH_SRCDIR, "."};
  *from = "defaults";
  for (int i = 0; i < 3; i++) {
    if (!dirs[i]) continue;
    char path[1024], err[512];
    snprintf(path, sizeof path, "%s/configs/%s.json", dirs[i], name);
    char* text = NULL;
    if (ds_config_read_file(path, &text, err, sizeof err)) continue;
    dsEnvDef d;
    const int rc = ds_env_def_from_text(path, text, &d, err, sizeof err);
    ds_config_free_text(text);
    if (!rc && d.cls) {
      *from = "config";
      return d;
    }
  }
  return def;
}

/* One episode of the sinusoid actions (kept in act, S x A); with reward, the
 * step rewards are asked for (rendering the frames they need). */
static int episode(dsEnv* env, const dsEnvDef* def, dsReal* act, int with_reward) {
  int rc = ds_env_reset(env, 1, NULL, NULL);
  const int A = ds_env_action_size(env), initial = ds_env_action_kind(env) == DS_ACTION_INITIAL;
  const double omega = omega_of(ds_env_name(env));
  int done = 0;
  for (int k = 0; !rc && !done; k++) {
    dsReal* a = act + (size_t)k * (size_t)A;
    const double time = (double)k * def->control_interval * def->dt;
    for (int i = 0; i < A; i++) a[i] = initial ? (i == 0 ? 1 : 0) : (dsReal)(0.1 * sin(omega * time + 0.7 * i));
    dsReal r = 0;
    rc = ds_env_step(env, a, NULL, NULL, with_reward ? &r : NULL, &done);
  }
  return rc;
}

/* Seconds per iteration of logging: 3 recordings and LOG_ITERS appends of
 * nparams parameters, over LOG_ITERS. */
static double log_per_iteration(double record, int nparams) {
  double append = 0;
#ifdef DS_HAVE_HDF5
  char path[64], err[512];
  snprintf(path, sizeof path, "bench_env_tmp_%ld.h5", (long)time(NULL));
  dsRunLogDef ld = ds_default_runlog_def();
  ld.config_text = "{}";
  ld.env = "bench";
  ld.method = "image";
  ld.nparams = nparams;
  ld.overwrite = 1;
  dsRunLog* log = NULL;
  double* p = (double*)calloc((size_t)nparams + 1, sizeof(double));
  if (p && !ds_runlog_create(path, &ld, &log, err, sizeof err)) {
    const double t0 = tick();
    for (int i = 0; i < LOG_ITERS; i++) {
      dsRunIteration it = {1.0 / (i + 1), 0.5, tick() - t0, 1.0, p};
      p[0] = i;
      ds_runlog_append_iteration(log, &it);
    }
    append = tick() - t0;
    ds_runlog_close(log, "completed");
    remove(path);
  }
  free(p);
#else
  (void)nparams;
#endif
  return (3 * record + append) / LOG_ITERS;
}


/* One iteration's forward + loss + backward: wall seconds, and CPU seconds
 * into *cpu. */
static double iteration(dsEnv* env, const dsEnvDef* def, dsReal* act, dsReal* ga, int* rc, double* cpu) {
  const double t0 = now(), c0 = cpu_now();
  dsReal loss = 0;
  *rc = episode(env, def, act, 0);
  if (!*rc) *rc = ds_env_backward_loss(env, &loss, ga);
  *cpu = cpu_now() - c0;
  return now() - t0;
}

/* The tape line: bytes and iteration time with the full and the
 * checkpointed tape. */
static int tape(const char* name, const dsEnvDef* def, int reps) {
  dsEnvDef full = *def, ck = *def;
  int K = 1;
  while ((long)K * K < def->substeps) K++;
  full.checkpoint_every = 1;
  ck.checkpoint_every = K;
  dsEnv *ef = NULL, *ec = NULL;
  char err[512];
  int rc = ds_env_create(&full, &ef, err, sizeof err);
  if (!rc) rc = ds_env_create(&ck, &ec, err, sizeof err);
  if (rc) {
    printf("%s: tape: %s\n", name, err);
    ds_env_destroy(ef);
    return 1;
  }
  const int A = ds_env_action_size(ef), S = ds_env_num_steps(ef);
  dsReal* act = (dsReal*)calloc((size_t)S * A + 1, sizeof(dsReal));
  dsReal* ga = (dsReal*)calloc((size_t)S * A + 1, sizeof(dsReal));
  double tf[MAXREP], tc[MAXREP], cf[MAXREP], cc[MAXREP];
  for (int r = 0; !rc && r < reps; r++) {
    tf[r] = iteration(ef, &full, act, ga, &rc, &cf[r]);
    if (!rc) tc[r] = iteration(ec, &ck, act, ga, &rc, &cc[r]);
  }
  if (rc) {
    printf("%s: tape: %s\n", name, ds_env_last_error(ef));
  } else {
    /* after an episode: the segment buffers are sized at create, so these are the peak */
    const double bf = (double)ds_data_bytes(ds_env_model(ef), ds_env_data(ef));
    const double bc = (double)ds_data_bytes(ds_env_model(ec), ds_env_data(ec));
    const double f = median(tf, reps), c = median(tc, reps), fc = median(cf, reps), ccpu = median(cc, reps);
    printf("%-14s tape: full %8.1f MB  checkpoint every %3d %7.1f MB (%.1f%%) | iteration full %.3f s  "
           "checkpointed %.3f s  (%+.1f%%; CPU time %.3f s, %.3f s: %+.1f%%)\n",
           name, bf / 1e6, K, bc / 1e6, 100.0 * bc / bf, f, c, 100.0 * (c - f) / f, fc, ccpu,
           100.0 * (ccpu - fc) / fc);
  }
  free(act);
  free(ga);
  ds_env_destroy(ef);
  ds_env_destroy(ec);
  return rc ? 1 : 0;
}

/* def: name's definition, from env_def ("config" or "defaults" in from) */
static int run(const char* name, dsEnvDef def, const char* from, int reps) {
  if (!g_split) return tape(name, &def, reps);
  dsEnvDef all = def; /* every frame rendered as it is taken */
  if (!(def.cls && def.cls->sim)) /* a class with its own physics differentiates its last frame only */
    all.loss_kind = DS_ENV_LOSS_IMAGE_SUM;
  dsEnv *env = NULL, *env_all = NULL;
  char err[512];
  int rc = ds_env_create(&def, &env, err, sizeof err);
  if (!rc) rc = ds_env_create(&all, &env_all, err, sizeof err);
  if (rc) {
    printf("%s: create failed: %s\n", name, err);
    ds_env_destroy(env);
    return 1;
  }
  dsRecorder* rec = NULL;
  rc = ds_recorder_create(env, def.render_interval, &rec, err, sizeof err);
  if (rc) {
    printf("%s: recorder: %s\n", name, err);
    ds_env_destroy(env);
    ds_env_destroy(env_all);
    return 1;
  }
  const int A = ds_env_action_size(env), S = ds_env_num_steps(env);
  dsReal* act = (dsReal*)calloc((size_t)S * A + 1, sizeof(dsReal));
  dsReal* ga = (dsReal*)calloc((size_t)S * A + 1, sizeof(dsReal));
  double tf[MAXREP], tl[MAXREP], tb[MAXREP], ti[MAXREP], ta[MAXREP], tr[MAXREP];
  dsReal loss = 0;
  for (int r = 0; !rc && r < reps; r++) {
    const double t0 = tick();
    rc = episode(env, &def, act, 0);
    const double t1 = tick();
    if (!rc) rc = ds_env_loss(env, &loss);
    const double t2 = tick();
    if (!rc) rc = ds_env_backward_loss(env, NULL, ga);
    const double t3 = tick();
    if (rc) break;
    rc = episode(env_all, &all, act, 1);
    const double t4 = tick();
    if (rc) {
      snprintf(err, sizeof err, "%s", ds_env_last_error(env_all));
      break;
    }
    const dsEpisodeRecord* e = NULL;
    rc = ds_recorder_record(rec, 1, 0, act, &e);
    const double t5 = tick();
    if (rc) {
      snprintf(err, sizeof err, "%s", ds_recorder_last_error(rec));
      break;
    }
    tf[r] = t1 - t0;
    tl[r] = t2 - t1;
    tb[r] = t3 - t2;
    ti[r] = t3 - t0;
    ta[r] = (t4 - t3) - (t1 - t0);
    tr[r] = t5 - t4;
  }
  if (rc) {
    printf("%s: failed: %s\n", name, err[0] ? err : ds_env_last_error(env));
  } else {
    const int nframes = def.substeps / def.render_interval + (def.substeps % def.render_interval ? 1 : 0) +
                        (def.render_last ? 1 : 0);
    const double fwd = median(tf, reps), lo = median(tl, reps), bwd = median(tb, reps), it = median(ti, reps);
    const double allf = median(ta, reps), record = median(tr, reps);
    const int np = 8 * A; /* the sinusoid network's weights with the bundled 8 phases */
    const double lg = log_per_iteration(record, np < 65536 ? np : 65536);
    printf("%-14s %-8s %5d substeps %3d frames %5d particles | forward %.3f  loss %.3f  backward %.3f  iter %.3f | "
           "allframes +%.3f  record %.3f  log/it %.3f | before %.3f  now %.3f  (%.2fx)  loss %.6g\n",
           name, from, def.substeps, nframes, ds_env_num_particles(env), fwd, lo, bwd, it, allf, record, lg,
           it + allf + lg + 3.0 * allf / LOG_ITERS, it + lg, (it + allf + lg + 3.0 * allf / LOG_ITERS) / (it + lg),
           (double)loss);
  }
  free(act);
  free(ga);
  ds_recorder_destroy(rec);
  ds_env_destroy(env);
  ds_env_destroy(env_all);
  if (rc) return 1;
  return g_tape ? tape(name, &def, reps) : 0;
}

/* BENCH_ONLY=pair: a's and b's iterations alternated; per-pair ratios */
static int pair(const char* na, const char* nb, int reps) {
  const char *fa = NULL, *fb = NULL;
  const dsEnvDef da = env_def(na, &fa), db = env_def(nb, &fb);
  dsEnv *ea = NULL, *eb = NULL;
  char err[512];
  int rc = da.cls && db.cls ? 0 : 1;
  if (rc) snprintf(err, sizeof err, "unknown environment");
  if (!rc) rc = ds_env_create(&da, &ea, err, sizeof err);
  if (!rc) rc = ds_env_create(&db, &eb, err, sizeof err);
  const size_t na_ = ea ? (size_t)ds_env_num_steps(ea) * ds_env_action_size(ea) + 1 : 1;
  const size_t nb_ = eb ? (size_t)ds_env_num_steps(eb) * ds_env_action_size(eb) + 1 : 1;
  dsReal *acta = (dsReal*)calloc(na_, sizeof(dsReal)), *ga = (dsReal*)calloc(na_, sizeof(dsReal));
  dsReal *actb = (dsReal*)calloc(nb_, sizeof(dsReal)), *gb = (dsReal*)calloc(nb_, sizeof(dsReal));
  double ta[MAXREP], tb[MAXREP], q[MAXREP], cpu;
  if (!rc) { /* one of each first: caches, the models' first reset */
    iteration(ea, &da, acta, ga, &rc, &cpu);
    if (!rc) iteration(eb, &db, actb, gb, &rc, &cpu);
  }
  for (int r = 0; !rc && r < reps; r++) {
    for (int h = 0; h < 2 && !rc; h++) { /* a then b; b then a on odd pairs */
      const int is_a = (h == 0) == (r % 2 == 0);
      const double w = is_a ? iteration(ea, &da, acta, ga, &rc, &cpu) : iteration(eb, &db, actb, gb, &rc, &cpu);
      (is_a ? ta : tb)[r] = g_cpu_clock ? cpu : w;
    }
    q[r] = ta[r] / tb[r];
  }
  if (rc) {
    printf("pair %s / %s: failed: %s\n", na, nb, ea && eb ? ds_env_last_error(ea) : err);
  } else {
    double lo = q[0], hi = q[0];
    for (int r = 1; r < reps; r++) {
      lo = q[r] < lo ? q[r] : lo;
      hi = q[r] > hi ? q[r] : hi;
    }
    printf("pair  %s %.3f s  %s %.3f s  (medians of %d, %s time) | ratio per pair: median %.2fx (%.2f to %.2f)\n",
           na, median(ta, reps), nb, median(tb, reps), reps, g_cpu_clock ? "CPU" : "wall", median(q, reps), lo, hi);
  }
  free(acta);
  free(ga);
  free(actb);
  free(gb);
  ds_env_destroy(ea);
  ds_env_destroy(eb);
  return rc ? 1 : 0;
}

int main(int argc, char** argv) {
  int reps = argc > 1 ? atoi(argv[1]) : 3;
  if (reps < 1) reps = 1;
  if (reps > MAXREP) reps = MAXREP;
  const char* th = getenv("BENCH_THREADS"); /* default 2 */
  ds_set_num_threads(th && atoi(th) > 0 ? atoi(th) : 2);
  const char* ck = getenv("BENCH_CLOCK");
  g_cpu_clock = ck && !strcmp(ck, "cpu");
  const char* only = getenv("BENCH_ONLY"); /* "split", "tape" or "pair" */
  if (only && !strcmp(only, "pair")) {
    if (argc != 4) {
      printf("bench_env: BENCH_ONLY=pair takes two names\n");
      return 1;
    }
    printf("bench_env: %d threads, %s precision; training iterations alternated\n", ds_get_max_threads(),
           sizeof(dsReal) == 8 ? "double" : "single");
    return pair(argv[2], argv[3], reps);
  }
  g_split = !only || strcmp(only, "tape");
  g_tape = !only || strcmp(only, "split");
  printf("bench_env: %d threads, %s precision, median of %d, %s time; seconds per training iteration, split\n",
         ds_get_max_threads(), sizeof(dsReal) == 8 ? "double" : "single", reps, g_cpu_clock ? "CPU" : "wall");
  int fail = 0;
  if (argc > 2) {
    for (int a = 2; a < argc; a++) {
      const char* from = NULL;
      const dsEnvDef def = env_def(argv[a], &from); /* a class, or a bundled config's name */
      if (!ds_env_class_find(argv[a]) && !def.cls) {
        printf("%s: unknown environment (neither a class nor configs/%s.json)\n", argv[a], argv[a]);
        fail = 1;
        continue;
      }
      fail |= run(argv[a], def, from, reps);
    }
  } else {
    for (int k = 0; k < ds_env_class_count(); k++) {
      const char *name = ds_env_class_at(k)->name, *from = NULL;
      fail |= run(name, env_def(name, &from), from, reps);
    }
    /* and the implicit variants beside their classes' bundled configs (issue
     * 31's comparison: a training iteration at the large step against the
     * semi-implicit one above), when configs/ is found */
    static const char* const implicit_configs[] = {"control-fem-implicit", "control-cloth-implicit"};
    for (size_t k = 0; k < sizeof implicit_configs / sizeof *implicit_configs; k++) {
      const char* from = NULL;
      const dsEnvDef def = env_def(implicit_configs[k], &from);
      if (def.cls) fail |= run(implicit_configs[k], def, from, reps);
    }
  }
  return fail;
}
