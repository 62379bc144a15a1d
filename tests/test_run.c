/* The run object (dsim/run.h): a short walker run through the C API gives
 * the same final loss, bit for bit, as the same config through `dsim run`
 * ($DSIM, when set and built with HDF5); a stop request lets the current
 * iteration finish and closes the log "interrupted" (a second one skips the
 * episodes); bad configs and overrides are errors that name the key; calls
 * out of order are DS_ERR_STATE. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dsim/run.h"
#include "dsim/runlog.h"
#include "tests/dstest.h"

static const char kConfig[] =
    "{ \"env\": { \"name\": \"walker\",\n"
    "    \"physics\": {\"substeps\": 256, \"control_interval\": 16, \"render_interval\": 64, \"render_last\": true},\n"
    "    \"render\": {\"width\": 24, \"height\": 24, \"supersample\": 1, \"sigma\": 1e-4} },\n"
    "  \"controller\": {\"lr\": 0.05, \"phases\": 4},\n"
    "  \"run\": {\"seed\": 3, \"iterations\": 3, \"threads\": 1} }\n";

static char g_dir[2048];

static const char* tmp_path(const char* name) {
  static char buf[4][2300];
  static int k = 0;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "%s/%s", g_dir, name);
  return buf[k];
}

static int have_hdf5(void) {
#ifdef DS_HAVE_HDF5
  return 1;
#else
  return 0;
#endif
}

/* The losses of a run log (NULL when it cannot be read). */
static double* log_losses(const char* path, int* n) {
  double *loss = NULL, *metric = NULL, *wall = NULL, *gn = NULL;
  char err[1024];
  *n = 0;
  if (ds_runlog_read_iterations(path, n, &loss, &metric, &wall, &gn, err, sizeof err)) {
    fprintf(stderr, "%s\n", err);
    return NULL;
  }
  ds_runlog_free(metric);
  ds_runlog_free(wall);
  ds_runlog_free(gn);
  return loss;
}

static void test_api_run(double* final_loss) {
  char err[1024], out_kv[2400];
  snprintf(out_kv, sizeof out_kv, "run.out=%s", tmp_path("api.h5"));
  const char* ov[1] = {out_kv};
  dsRun* run = NULL;
  CHECK_INT_EQ(ds_run_create_from_text("walker.json", kConfig, ov, 1, NULL, &run, err, sizeof err), 0);
  if (!run) {
    fprintf(stderr, "%s\n", err);
    return;
  }
  CHECK_STR_EQ(ds_run_method_name(run), "image");
  CHECK_INT_EQ(ds_run_done(run), 0);
  CHECK_INT_EQ(ds_run_execute(run), 0);
  CHECK_INT_EQ(ds_run_done(run), 1);
  dsTrainerIter it;
  CHECK_INT_EQ(ds_run_step(run, &it), DS_ERR_STATE);
  CHECK_INT_EQ(ds_run_finish(run), DS_ERR_STATE);
  dsRunResult res;
  CHECK_INT_EQ(ds_run_result(run, &res), 0);
  CHECK_INT_EQ(res.iterations, 3);
  CHECK_INT_EQ(res.planned, 3);
  CHECK_INT_EQ(res.interrupted, 0);
  CHECK_STR_EQ(res.status, "completed");
  CHECK(isfinite(res.last_loss) && res.last_loss > 0);
  CHECK(res.best_iteration >= 0 && res.best_iteration < 3);
  CHECK(res.low_loss <= res.first_loss && res.low_loss <= res.last_loss);
  *final_loss = res.last_loss;
  if (have_hdf5()) {
    int n = 0;
    double* loss = log_losses(tmp_path("api.h5"), &n);
    CHECK_INT_EQ(n, 3);
    if (loss && n == 3) CHECK(memcmp(&loss[2], &res.last_loss, sizeof(double)) == 0);
    ds_runlog_free(loss);
    dsRunSummary s;
    CHECK_INT_EQ(ds_runlog_read_summary(tmp_path("api.h5"), &s, err, sizeof err), 0);
    CHECK_STR_EQ(s.status, "completed");
    CHECK_STR_EQ(s.method, "image");
  }
  ds_run_destroy(run);
}

/* The same config through `dsim run`: the same loss bits in its log. */
static void test_cli_run(double final_loss) {
  const char* dsim = getenv("DSIM");
  if (!dsim || !*dsim || !have_hdf5()) {
    fprintf(stderr, "test_run: no $DSIM or no HDF5: the CLI comparison is skipped\n");
    return;
  }
  FILE* f = fopen(tmp_path("walker.json"), "w");
  CHECK(f != NULL);
  if (!f) return;
  fputs(kConfig, f);
  fclose(f);
  char cmd[8000];
  snprintf(cmd, sizeof cmd, "'%s' run '%s' --out '%s' >'%s' 2>&1", dsim, tmp_path("walker.json"), tmp_path("cli.h5"),
           tmp_path("cli.txt"));
  CHECK_INT_EQ(system(cmd), 0);
  int n = 0;
  double* loss = log_losses(tmp_path("cli.h5"), &n);
  CHECK_INT_EQ(n, 3);
  if (loss && n == 3) {
    if (memcmp(&loss[2], &final_loss, sizeof(double)) != 0)
      fprintf(stderr, "final loss: CLI %.17g, API %.17g\n", loss[2], final_loss);
    CHECK(memcmp(&loss[2], &final_loss, sizeof(double)) == 0);
  }
  ds_runlog_free(loss);
}

/* A stop request before the first step: that iteration runs, then the run
 * is done and interrupted; nstops = 2 also skips the episodes. */
static void test_stop(int nstops) {
  char err[1024], out_kv[2400];
  const char* name = nstops == 1 ? "stop1.h5" : "stop2.h5";
  snprintf(out_kv, sizeof out_kv, "run.out=%s", tmp_path(name));
  const char* ov[2] = {out_kv, "run.iterations=5"};
  dsRun* run = NULL;
  CHECK_INT_EQ(ds_run_create_from_text("walker.json", kConfig, ov, 2, NULL, &run, err, sizeof err), 0);
  if (!run) return;
  for (int i = 0; i < nstops; i++) ds_run_request_stop(run);
  CHECK_INT_EQ(ds_run_done(run), 0); /* the first iteration always runs */
  CHECK_INT_EQ(ds_run_step(run, NULL), 0);
  CHECK_INT_EQ(ds_run_done(run), 1);
  CHECK_INT_EQ(ds_run_execute(run), DS_ERR_INTERRUPTED);
  dsRunResult res;
  ds_run_result(run, &res);
  CHECK_INT_EQ(res.iterations, 1);
  CHECK_INT_EQ(res.interrupted, 1);
  CHECK_STR_EQ(res.status, "interrupted");
  ds_run_destroy(run);
  if (!have_hdf5()) return;
  dsRunSummary s;
  CHECK_INT_EQ(ds_runlog_read_summary(tmp_path(name), &s, err, sizeof err), 0);
  CHECK_STR_EQ(s.status, "interrupted");
  int nf = 0, h = 0, w = 0;
  uint8_t* rgba = NULL;
  const int rc = ds_runlog_read_frames(tmp_path(name), "last", &nf, &h, &w, &rgba, err, sizeof err);
  CHECK_INT_EQ(rc, nstops == 1 ? 0 : DS_ERR_NOTFOUND);
  ds_runlog_free(rgba);
}

static void test_errors(void) {
  char err[1024];
  dsRun* run = (dsRun*)1;
  dsRunOptions opt = ds_default_run_options();
  opt.log = 0;
  CHECK(ds_run_create_from_text("bad.json", "{ \"env\": {\"name\": \"walker\", \"physics\": {\"substeps\": \"many\"}} }",
                                NULL, 0, &opt, &run, err, sizeof err) < 0);
  CHECK(run == NULL);
  CHECK_STR_CONTAINS(err, "bad.json");
  CHECK_STR_CONTAINS(err, "env.physics.substeps");
  CHECK(ds_run_create_from_text("bad.json", "{ \"env\": {\"name\": \"walker\"}, \"controler\": {} }", NULL, 0, &opt,
                                &run, err, sizeof err) < 0);
  CHECK_STR_CONTAINS(err, "controler");
  CHECK(ds_run_create_from_text("bad.json", "{ not json", NULL, 0, &opt, &run, err, sizeof err) < 0);
  const char* lr[1] = {"controller.lr=-1"};
  CHECK(ds_run_create_from_text("w.json", kConfig, lr, 1, &opt, &run, err, sizeof err) < 0);
  CHECK_STR_CONTAINS(err, "controller.lr");
  const char* sec[1] = {"ctrl.lr=1"};
  CHECK_INT_EQ(ds_run_create_from_text("w.json", kConfig, sec, 1, &opt, &run, err, sizeof err), DS_ERR_CONFIG);
  CHECK_STR_CONTAINS(err, "env, controller or run");
  const char* noeq[1] = {"controller.lr"};
  CHECK_INT_EQ(ds_run_create_from_text("w.json", kConfig, noeq, 1, &opt, &run, err, sizeof err), DS_ERR_CONFIG);
  const char* mpc[2] = {"controller.mpc=true", "run.method=cem"};
  CHECK(ds_run_create_from_text("w.json", kConfig, mpc, 2, &opt, &run, err, sizeof err) < 0);
  CHECK_STR_CONTAINS(err, "MPC");
  CHECK_INT_EQ(ds_run_create(NULL, NULL, NULL, NULL, &run, err, sizeof err), DS_ERR_INVALID);
  /* without a log: runs, and the log is opened only before the first iteration */
  CHECK_INT_EQ(ds_run_create_from_text("w.json", kConfig, NULL, 0, &opt, &run, err, sizeof err), 0);
  if (run) {
    CHECK_STR_EQ(ds_run_log_path(run), "");
    CHECK_INT_EQ(ds_run_step(run, NULL), 0);
    CHECK_INT_EQ(ds_run_open_log(run, tmp_path("late.h5"), 0), DS_ERR_STATE);
    CHECK_INT_EQ(ds_run_execute(run), 0);
    ds_run_destroy(run);
  }
  ds_run_destroy(NULL);
}

int main(void) {
  const char* base = getenv("DS_BUILDDIR");
  snprintf(g_dir, sizeof g_dir, "%s/test_run.XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp(g_dir)) {
    snprintf(g_dir, sizeof g_dir, "/tmp/test_run.XXXXXX");
    if (!mkdtemp(g_dir)) return 99;
  }
  double final_loss = NAN;
  test_api_run(&final_loss);
  test_cli_run(final_loss);
  test_stop(1);
  test_stop(2);
  test_errors();
  char cmd[2400];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
  if (system(cmd) != 0) fprintf(stderr, "test_run: could not remove %s\n", g_dir);
  return DST_RESULT();
}
