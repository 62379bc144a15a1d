/* Environment configs: the shipped configs/ files hold every key with its
 * default; a definition written as JSON reads back unchanged; a table of bad
 * configs with the exact error each must produce. */
#include "config.h"

#include <stddef.h>
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
    {"{\"env\": {\"name\": \"walker\", \"physics\": {\"dtt\": 0.001}}}", DS_ERR_CONFIG,
     "b.json: unknown key \"env.physics.dtt\" (did you mean \"env.physics.dt\"?)"},
    {"{\"env\": {\"name\": \"walker\", \"contact\": {\"kee\": 5}}}", DS_ERR_CONFIG,
     "b.json: unknown key \"env.contact.kee\" (did you mean \"env.contact.ke\"?)"},
    {"{\"env\": {\"name\": \"walker\", \"contact\": {\"ke\": -5}}}", DS_ERR_CONFIG,
     "b.json: env.contact.ke: expected a number in [0, 1e+12], got -5"},
    {"{\"env\": {\"name\": \"control-fem\", \"physics\": {\"substeps\": 2.5}}}", DS_ERR_CONFIG,
     "b.json: env.physics.substeps: expected an integer, got 2.5"},
    {"{\"env\": {\"name\": \"control-fem\", \"physics\": {\"ground\": 1}}}", DS_ERR_CONFIG,
     "b.json: env.physics.ground: expected true or false, got 1"},
    {"{\"env\": {\"name\": \"control-fem\", \"scene\": {\"start\": [1, 2]}}}", DS_ERR_CONFIG,
     "b.json: env.scene.start: expected an array of 3 numbers, got an array"},
    {"{\"env\": {\"name\": \"control-fem\", \"observation\": {\"state\": \"ful\"}}}", DS_ERR_CONFIG,
     "b.json: env.observation.state: expected one of \"none,full,com,joints\", got \"ful\" (did you mean \"full\"?)"},
    /* class keys: the gear is control-fem's, not the walker's */
    {"{\"env\": {\"name\": \"control-fem\", \"gear\": {\"teeth\": 2}}}", DS_ERR_CONFIG,
     "b.json: env.gear.teeth: expected an integer in [3, 256], got 2"},
    {"{\"env\": {\"name\": \"walker\", \"gear\": {\"teeth\": 8}}}", DS_ERR_CONFIG,
     "b.json: unknown key \"env.gear\""},
    {"{\"env\": {\"name\": \"walker\", \"material\": {\"density\": 8}}}", DS_ERR_CONFIG,
     "b.json: unknown key \"env.material.density\""},
    /* sections */
    {"{\"env\": {\"name\": \"walker\"}, \"gear\": {\"teeth\": 8}}", DS_ERR_CONFIG,
     "b.json: unknown section \"gear\" (did you mean \"env\"? sections: env,controller,run,sysid)"},
    {"{\"env\": {\"name\": \"walker\"}, \"controler\": {}}", DS_ERR_CONFIG,
     "b.json: unknown section \"controler\" (did you mean \"controller\"? sections: env,controller,run,sysid)"},
    {"{\"env\": {\"name\": \"walkr\"}}", DS_ERR_CONFIG,
     "b.json: env.name: unknown environment \"walkr\" (expected one of: walker, control-fem, control-cloth, "
     "walker-springs, rigid-toss, beam, pendulum, double-pendulum, runner, smoke-control, smoke-plume)"},
    {"{\"env\": {\"name\": 3}}", DS_ERR_CONFIG,
     "b.json: env.name: expected a string, one of: walker, control-fem, control-cloth, walker-springs, rigid-toss, beam, pendulum, double-pendulum, runner, smoke-control, smoke-plume"},
    {"{\"env\": {\"physics\": {\"dt\": 0.001}}}", DS_ERR_CONFIG,
     "b.json: missing key \"env.name\" (expected one of: walker, control-fem, control-cloth, walker-springs, rigid-toss, beam, pendulum, double-pendulum, runner, smoke-control, smoke-plume)"},
    {"{\"controller\": {\"lr\": 0.1}}", DS_ERR_CONFIG,
     "b.json: missing key \"env.name\" (expected one of: walker, control-fem, control-cloth, walker-springs, rigid-toss, beam, pendulum, double-pendulum, runner, smoke-control, smoke-plume)"},
    /* cross-field checks */
    {"{\"env\": {\"name\": \"control-cloth\", \"scene\": {\"size_min\": 10, \"size_max\": 9}}}", DS_ERR_CONFIG,
     "b.json: env.scene.size_max: must be >= env.scene.size_min (10), got 9"},
    {"{\"env\": {\"name\": \"control-fem\", \"goal\": {\"x_min\": 3, \"x_max\": 1}}}", DS_ERR_CONFIG,
     "b.json: env.goal.x_max: must be >= env.goal.x_min (3), got 1"},
    {"{\"env\": {\"name\": \"control-fem\", \"render\": {\"width\": 0}}}", DS_ERR_CONFIG,
     "b.json: env.render.width: expected an integer in [1, 8192], got 0"},
    {"{\"env\": {\"name\": \"walker\", \"loss\": {\"levels\": 9}}}", DS_ERR_CONFIG,
     "b.json: env.loss.levels: expected an integer in [1, 8], got 9"},
    {"{\"env\": {\"name\": \"control-fem\",\n  \"physics\": {\n    \"dt\": 0.001,\n  }\n}}", DS_ERR_PARSE,
     "b.json:4:4: invalid JSON near '}'"},
    {"{\"env\": {\"name\": \"control-fem\", \"physics\": {\"dt\": 0.001}}", DS_ERR_PARSE,
     "b.json:1:58: invalid JSON (unexpected end of file)"},
};

/* The classes come from the registry (envs/classes.h lists the bundled
 * ones): every class must have a name, a one-line doc and a shipped config
 * configs/NAME.json equal to its defaults. */
static const char* kNames[64];
static int nclass;

int main(void) {
  const char* src = getenv("DS_SRCDIR");
  char path[4096];
  nclass = ds_env_class_count();
  CHECK(nclass > 0 && nclass <= 64);
  for (int k = 0; k < nclass; k++) {
    const dsEnvClass* c = ds_env_class_at(k);
    CHECK(c != NULL);
    if (!c) return 1;
    kNames[k] = c->name;
    CHECK(c->name && c->name[0]);
    CHECK(c->doc && c->doc[0] && !strchr(c->doc, '\n'));
    CHECK(ds_env_class_find(kNames[k]) == c);
    dsEnvDef d = ds_default_env_def(kNames[k]);
    CHECK(d.cls == c);
  }
  CHECK(ds_env_class_at(nclass) == NULL);
  CHECK(ds_env_class_at(-1) == NULL);
  CHECK(ds_env_class_find("walkr") == NULL);
  CHECK(ds_env_class_find(NULL) == NULL);
  {
    dsEnvDef d = ds_default_env_def("walkr");
    CHECK(d.cls == NULL);
    dsEnv* env = NULL;
    char err[512];
    CHECK(ds_env_create(&d, &env, err, sizeof err) != 0);
    CHECK(env == NULL);
    CHECK(ds_env_def_to_json(&d, NULL, 0) < 0);
  }
  /* shipped configs == defaults, and they create envs */
  for (int k = 0; k < nclass; k++) {
    snprintf(path, sizeof path, "%s/configs/%s.json", src ? src : "..", kNames[k]);
    dsEnv* env = NULL;
    char err[512];
    int rc = ds_env_create_from_config(path, &env, err, sizeof err);
    if (rc) printf("%s: %s\n", path, err);
    CHECK_INT_EQ(rc, 0);
    if (!env) continue;
    CHECK_STR_EQ(ds_env_name(env), kNames[k]);
    dsEnvDef want = ds_default_env_def(kNames[k]);
    char* a = to_json(ds_env_def(env));
    char* b = to_json(&want);
    CHECK_STR_EQ(a, b);
    /* the kept text is the file's */
    CHECK(strlen(ds_env_config_text(env)) > 100);
    CHECK_STR_CONTAINS(ds_env_config_text(env), kNames[k]);
    free(a);
    free(b);
    ds_env_destroy(env);
    /* the same through the text API: every key equal (the JSON writes the
     * shortest exact form of each value) and the same class. Not memcmp of
     * the structs: padding (e.g. the tail of dsGearDef inside
     * dsControlFemParams) is not guaranteed to be equal. */
    char* text = NULL;
    CHECK_INT_EQ(ds_config_read_file(path, &text, err, sizeof err), 0);
    if (text) {
      dsEnvDef got;
      memset(&got, 0, sizeof got);
      CHECK_INT_EQ(ds_env_def_from_text(path, text, &got, err, sizeof err), 0);
      CHECK(got.cls == want.cls);
      char* g = to_json(&got);
      char* r = to_json(&want);
      CHECK_STR_EQ(g, r);
      free(g);
      free(r);
      ds_config_free_text(text);
    }
  }
  /* a definition written as JSON is one "env" section naming the class */
  {
    dsEnvDef d = ds_default_env_def("control-fem");
    char* j = to_json(&d);
    CHECK(!strncmp(j, "{\n  \"env\": {", 12));
    CHECK_STR_CONTAINS(j, "\"name\": \"control-fem\"");
    CHECK_STR_CONTAINS(j, "\"gear\": {");
    CHECK_STR_CONTAINS(j, "\"density\": ");
    free(j);
    dsEnvDef w = ds_default_env_def("walker");
    j = to_json(&w);
    CHECK(strstr(j, "\"gear\"") == NULL);
    free(j);
  }
  /* a modified definition round-trips through JSON */
  {
    dsEnvDef d = ds_default_env_def("control-cloth");
    dsControlClothParams* p = (dsControlClothParams*)ds_env_def_params(&d);
    d.dt = (dsReal)(1.0 / 3000.0);
    d.substeps = 77;
    d.obs_state = DS_OBS_STATE_FULL;
    d.loss_kind = DS_ENV_LOSS_COM;
    p->axis[2] = (dsReal)0.1234567890123;
    p->size_min = 3;
    p->size_max = 7;
    d.ground = 1;
    char* j = to_json(&d);
    dsEnvDef e;
    char err[512];
    CHECK_INT_EQ(ds_env_def_from_text("r.json", j, &e, err, sizeof err), 0);
    char* j2 = to_json(&e);
    CHECK_STR_EQ(j, j2);
    const dsControlClothParams* q = (const dsControlClothParams*)ds_env_def_params(&e);
    CHECK(e.cls == d.cls && e.dt == d.dt && q->axis[2] == p->axis[2] && e.substeps == 77);
    CHECK(q->size_min == 3 && q->size_max == 7);
    free(j);
    free(j2);
  }
  /* the other sections are not the env's: ignored by the env parser */
  {
    dsEnvDef e;
    char err[512];
    const char* t = "{\"env\": {\"name\": \"control-fem\", \"gear\": {\"teeth\": 5}},"
                    " \"controller\": {\"lr\": 0.5, \"whatever\": 1}, \"run\": {\"seed\": 3}}";
    CHECK_INT_EQ(ds_env_def_from_text("s.json", t, &e, err, sizeof err), 0);
    CHECK(e.cls == ds_env_class_find("control-fem"));
    CHECK_INT_EQ(((dsControlFemParams*)ds_env_def_params(&e))->gear.teeth, 5);
  }
  /* set by key: common and class keys, checked as in a config */
  {
    dsEnvDef d = ds_default_env_def("control-fem");
    char err[512];
    CHECK_INT_EQ(ds_env_def_set(&d, "gear.teeth", "4", err, sizeof err), 0);
    CHECK_INT_EQ(((dsControlFemParams*)ds_env_def_params(&d))->gear.teeth, 4);
    CHECK_INT_EQ(ds_env_def_set(&d, "material.k_mu", "1000", err, sizeof err), 0);
    CHECK(((dsControlFemParams*)ds_env_def_params(&d))->k_mu == 1000);
    CHECK_INT_EQ(ds_env_def_set(&d, "contact.ke", "123", err, sizeof err), 0);
    CHECK(d.contact_ke == 123);
    CHECK_INT_EQ(ds_env_def_set(&d, "observation.state", "full", err, sizeof err), 0);
    CHECK_INT_EQ(d.obs_state, DS_OBS_STATE_FULL);
    dsEnvDef before = d;
    CHECK_INT_EQ(ds_env_def_set(&d, "contact.ke", "-5", err, sizeof err), DS_ERR_CONFIG);
    CHECK_STR_CONTAINS(err, "env.contact.ke: expected a number in [0, 1e+12], got -5");
    CHECK_INT_EQ(ds_env_def_set(&d, "gear.teeth", "2", err, sizeof err), DS_ERR_CONFIG);
    CHECK_STR_CONTAINS(err, "env.gear.teeth: expected an integer in [3, 256], got 2");
    CHECK_INT_EQ(ds_env_def_set(&d, "contact.kee", "5", err, sizeof err), DS_ERR_CONFIG);
    CHECK_STR_CONTAINS(err, "unknown key \"env.contact.kee\" (did you mean \"env.contact.ke\"?)");
    CHECK(!memcmp(&d, &before, sizeof d));
    dsEnvDef w = ds_default_env_def("walker");
    CHECK_INT_EQ(ds_env_def_set(&w, "gear.teeth", "4", err, sizeof err), DS_ERR_CONFIG);
    CHECK_STR_CONTAINS(err, "env.gear");
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
    dsEnvDef d = ds_default_env_def("walker");
    ((dsWalkerParams*)ds_env_def_params(&d))->particle_mass = 0;
    dsEnv* env = NULL;
    char err[512];
    CHECK_INT_EQ(ds_env_create(&d, &env, err, sizeof err), DS_ERR_RANGE);
    CHECK_STR_EQ(err, "env.material.particle_mass: expected a number in [1e-09, 1e+12], got 0");
  }
  {
    dsEnvDef d = ds_default_env_def("control-fem");
    ((dsControlFemParams*)ds_env_def_params(&d))->density = -1;
    dsEnv* env = NULL;
    char err[512];
    CHECK_INT_EQ(ds_env_create(&d, &env, err, sizeof err), DS_ERR_RANGE);
    CHECK_STR_EQ(err, "env.material.density: expected a number in [1e-09, 1e+12], got -1");
  }
  return DST_RESULT();
}
