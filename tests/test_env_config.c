/* Environment configs: the shipped configs/ files hold every key with its
 * default; a definition written as JSON reads back unchanged; a table of bad
 * configs with the exact error each must produce. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/env.h"
#include "tests/dstest.h"

static char* to_json(const dsEnvDef* d) {
  int n = ds_env_def_to_json(d, NULL, 0);
  CHECK(n > 0);
  char* b = (char*)malloc((size_t)n + 1);
  CHECK_INT_EQ(ds_env_def_to_json(d, b, (size_t)n + 1), n);
  return b;
}

typedef struct Bad {
  const char* json;
  int code;
  const char* msg;
} Bad;

static const Bad bad[] = {
    {"{\"env\": \"walker\", \"physics\": {\"dtt\": 0.001}}", DS_ERR_CONFIG,
     "b.json: unknown key \"physics.dtt\" (did you mean \"physics.dt\"?)"},
    {"{\"env\": \"walker\", \"contact\": {\"ke\": -5}}", DS_ERR_CONFIG,
     "b.json: contact.ke: expected a number in [0, 1e+12], got -5"},
    {"{\"env\": \"control-fem\", \"physics\": {\"substeps\": 2.5}}", DS_ERR_CONFIG,
     "b.json: physics.substeps: expected an integer, got 2.5"},
    {"{\"env\": \"control-fem\", \"physics\": {\"ground\": 1}}", DS_ERR_CONFIG,
     "b.json: physics.ground: expected true or false, got 1"},
    {"{\"env\": \"control-fem\", \"scene\": {\"start\": [1, 2]}}", DS_ERR_CONFIG,
     "b.json: scene.start: expected an array of 3 numbers, got an array"},
    {"{\"env\": \"control-fem\", \"observation\": {\"state\": \"ful\"}}", DS_ERR_CONFIG,
     "b.json: observation.state: expected one of \"none,full,com\", got \"ful\""},
    {"{\"env\": \"walker\", \"gear\": {\"teeth\": 8}}", DS_ERR_CONFIG, "b.json: unknown key \"gear\" (did you mean \"env\"?)"},
    {"{\"env\": \"walkr\"}", DS_ERR_CONFIG,
     "b.json: env: expected one of \"walker,control-fem,control-cloth,walker-springs\", got \"walkr\""},
    {"{\"env\": 3}", DS_ERR_CONFIG,
     "b.json: env: expected one of \"walker,control-fem,control-cloth,walker-springs\", got 3"},
    {"{\"physics\": {\"dt\": 0.001}}", DS_ERR_CONFIG,
     "b.json: missing key \"env\" (expected one of \"walker,control-fem,control-cloth,walker-springs\")"},
    {"{\"env\": \"control-cloth\", \"scene\": {\"size_min\": 10, \"size_max\": 9}}", DS_ERR_CONFIG,
     "b.json: scene.size_max: must be >= scene.size_min (10) >= 1, got 9"},
    {"{\"env\": \"control-fem\", \"goal\": {\"x_min\": 3, \"x_max\": 1}}", DS_ERR_CONFIG,
     "b.json: goal.x_max: must be >= goal.x_min (3), got 1"},
    {"{\"env\": \"control-fem\", \"render\": {\"width\": 0}}", DS_ERR_CONFIG,
     "b.json: render.width: expected an integer in [1, 8192], got 0"},
    {"{\"env\": \"walker\", \"loss\": {\"levels\": 9}}", DS_ERR_CONFIG,
     "b.json: loss.levels: expected an integer in [1, 8], got 9"},
    {"{\"env\": \"control-fem\",\n  \"physics\": {\n    \"dt\": 0.001,\n  }\n}", DS_ERR_PARSE,
     "b.json:4:4: invalid JSON near '}'"},
    {"{\"env\": \"control-fem\", \"physics\": {\"dt\": 0.001}", DS_ERR_PARSE,
     "b.json:1:48: invalid JSON (unexpected end of file)"},
};

int main(void) {
  const char* src = getenv("DS_SRCDIR");
  char path[4096];
  /* shipped configs == defaults, and they create envs */
  for (int k = 0; k < DS_ENV_KIND_COUNT; k++) {
    snprintf(path, sizeof path, "%s/configs/%s.json", src ? src : "..", ds_env_kind_name(k));
    dsEnv* env = NULL;
    char err[512];
    int rc = ds_env_create_from_config(path, &env, err, sizeof err);
    if (rc) printf("%s: %s\n", path, err);
    CHECK_INT_EQ(rc, 0);
    if (!env) continue;
    dsEnvDef want = ds_default_env_def(k);
    char* a = to_json(ds_env_def(env));
    char* b = to_json(&want);
    CHECK_STR_EQ(a, b);
    /* the kept text is the file's */
    CHECK(strlen(ds_env_config_text(env)) > 100);
    CHECK_STR_CONTAINS(ds_env_config_text(env), ds_env_kind_name(k));
    free(a);
    free(b);
    ds_env_destroy(env);
  }
  /* a modified definition round-trips through JSON */
  {
    dsEnvDef d = ds_default_env_def(DS_ENV_CONTROL_CLOTH);
    d.dt = (dsReal)(1.0 / 3000.0);
    d.substeps = 77;
    d.obs_state = DS_OBS_STATE_FULL;
    d.loss_kind = DS_ENV_LOSS_COM;
    d.axis[2] = (dsReal)0.1234567890123;
    d.ground = 1;
    char* j = to_json(&d);
    dsEnvDef e;
    char err[512];
    CHECK_INT_EQ(ds_env_def_from_text("r.json", j, &e, err, sizeof err), 0);
    char* j2 = to_json(&e);
    CHECK_STR_EQ(j, j2);
    CHECK(e.dt == d.dt && e.axis[2] == d.axis[2] && e.substeps == 77);
    free(j);
    free(j2);
  }
  /* bad configs: exact messages */
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    dsEnv* env = (dsEnv*)&env;
    char err[512];
    int rc = ds_env_create_from_text("b.json", bad[i].json, &env, err, sizeof err);
    CHECK_INT_EQ(rc, bad[i].code);
    CHECK_STR_EQ(err, bad[i].msg);
    CHECK(env == NULL);
  }
  /* missing file */
  {
    dsEnv* env = NULL;
    char err[512];
    CHECK_INT_EQ(ds_env_create_from_config("/nonexistent-dir/w.json", &env, err, sizeof err), DS_ERR_IO);
    CHECK_STR_EQ(err, "/nonexistent-dir/w.json: cannot open: No such file or directory");
  }
  /* definition errors at create */
  {
    dsEnvDef d = ds_default_env_def(DS_ENV_WALKER);
    d.particle_mass = 0;
    dsEnv* env = NULL;
    char err[512];
    CHECK_INT_EQ(ds_env_create(&d, &env, err, sizeof err), DS_ERR_RANGE);
    CHECK_STR_EQ(err, "material.particle_mass: must be > 0, got 0");
  }
  return DST_RESULT();
}
