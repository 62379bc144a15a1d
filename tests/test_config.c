/* Strict config loading: a table of good and bad configs with the exact
 * error each must produce; defaults kept for absent keys; target untouched on
 * failure; files read with errors naming them. */
#include "config.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/cfg.h"
#include "tests/dstest.h"

typedef struct Cfg {
  dsReal dt;
  int substeps;
  int ground;
  char name[16];
  int method;
  dsReal pos[3];
  dsReal weights[DS_CFG_MAX_REALS];
  int nweights;
  dsReal ke;
} Cfg;

static const dsCfgField fields[] = {
    {"physics.dt", DS_CFG_REAL, offsetof(Cfg, dt), 1e-6, 0.1, NULL, 0, "substep, s"},
    {"physics.substeps", DS_CFG_INT, offsetof(Cfg, substeps), 1, 1000, NULL, 0, "substeps per step"},
    {"physics.ground", DS_CFG_BOOL, offsetof(Cfg, ground), 0, 1, NULL, 0, "ground plane on"},
    {"name", DS_CFG_STRING, offsetof(Cfg, name), 0, 16, NULL, 0, "scene name"},
    {"method", DS_CFG_ENUM, offsetof(Cfg, method), 0, 0, "image|state|random", 0, "loss"},
    {"start", DS_CFG_VEC3, offsetof(Cfg, pos), -100, 100, NULL, 0, "start position, m"},
    {"loss.weights", DS_CFG_REALS, offsetof(Cfg, weights), 0, 4, NULL, offsetof(Cfg, nweights), "weights"},
    {"contact.ke", DS_CFG_REAL, offsetof(Cfg, ke), 0, 1e12, NULL, 0, "N/m"},
    {NULL, 0, 0, 0, 0, NULL, 0, NULL},
};

static Cfg defaults(void) {
  Cfg c;
  memset(&c, 0, sizeof c);
  c.dt = 0.001;
  c.substeps = 32;
  c.ground = 1;
  snprintf(c.name, sizeof c.name, "walker");
  c.method = 0;
  c.ke = 1e4;
  return c;
}

typedef struct Case {
  const char* json;
  int code;
  const char* msg; /* exact message */
} Case;

static const Case bad[] = {
    {"{\"physics\": {\"dtt\": 0.001}}", DS_ERR_CONFIG, "t.json: unknown key \"physics.dtt\" (did you mean \"physics.dt\"?)"},
    {"{\"zzzzzzzzzz\": 1}", DS_ERR_CONFIG, "t.json: unknown key \"zzzzzzzzzz\""},
    {"{\"physics\": {\"dt\": \"fast\"}}", DS_ERR_CONFIG, "t.json: physics.dt: expected a number, got \"fast\""},
    {"{\"physics\": {\"dt\": 5}}", DS_ERR_CONFIG, "t.json: physics.dt: expected a number in [1e-06, 0.1], got 5"},
    {"{\"physics\": {\"dt\": -0.001}}", DS_ERR_CONFIG, "t.json: physics.dt: expected a number in [1e-06, 0.1], got -0.001"},
    {"{\"physics\": {\"substeps\": 2.5}}", DS_ERR_CONFIG, "t.json: physics.substeps: expected an integer, got 2.5"},
    {"{\"physics\": {\"substeps\": 0}}", DS_ERR_CONFIG, "t.json: physics.substeps: expected an integer in [1, 1000], got 0"},
    {"{\"physics\": {\"ground\": 1}}", DS_ERR_CONFIG, "t.json: physics.ground: expected true or false, got 1"},
    {"{\"physics\": 3}", DS_ERR_CONFIG, "t.json: physics: expected an object, got 3"},
    {"{\"physics\": {\"dt\": {}}}", DS_ERR_CONFIG, "t.json: physics.dt: expected a number, got an object"},
    {"{\"name\": \"a name that is far too long\"}", DS_ERR_CONFIG, "t.json: name: expected a string of at most 15 characters"},
    {"{\"method\": \"imag\"}", DS_ERR_CONFIG, "t.json: method: expected one of \"image,state,random\", got \"imag\""},
    {"{\"start\": [1, 2]}", DS_ERR_CONFIG, "t.json: start: expected an array of 3 numbers, got an array"},
    {"{\"start\": [1, \"2\", 3]}", DS_ERR_CONFIG, "t.json: start[1]: expected a number, got \"2\""},
    {"{\"start\": [1, 2, 300]}", DS_ERR_CONFIG, "t.json: start[2]: expected a number in [-100, 100], got 300"},
    {"{\"loss\": {\"weights\": []}}", DS_ERR_CONFIG, "t.json: loss.weights: expected an array of 1 to 4 numbers, got an array"},
    {"{\"loss\": {\"weights\": [1, -1]}}", DS_ERR_CONFIG, "t.json: loss.weights[1]: expected a number >= 0, got -1"},
    {"{\"contact\": {\"ke\": 1, \"ke\": 2}}", DS_ERR_CONFIG, "t.json: key \"contact.ke\" appears twice"},
    {"[1, 2]", DS_ERR_CONFIG, "t.json: expected a JSON object at the top level, got an array"},
    {"{\n  \"physics\": {\n    \"dt\": 0.001,\n  }\n}", DS_ERR_PARSE, "t.json:4:4: invalid JSON near '}'"},
    {"{\"physics\": {\"dt\": 0.001}", DS_ERR_PARSE, "t.json:1:26: invalid JSON (unexpected end of file)"},
    {"", DS_ERR_PARSE, "t.json:1:1: invalid JSON (unexpected end of file)"},
    {"{} trailing", DS_ERR_PARSE, "t.json:1:4: invalid JSON near '{} trailing'"},
};

int main(void) {
  dsErrBuf eb;
  /* good config: every type, absent keys keep defaults */
  {
    Cfg c = defaults();
    const char* js =
        "{\"physics\": {\"dt\": 0.0005, \"ground\": false}, \"name\": \"gear\", \"method\": \"random\","
        " \"start\": [-4, 2, 0], \"loss\": {\"weights\": [1, 0.5, 0.25]}}";
    ds__clearerr(&eb);
    CHECK_INT_EQ(ds__cfg_parse("t.json", js, fields, &c, sizeof c, &eb), DS_OK);
    CHECK_STR_EQ(ds__errmsg(&eb), "");
    CHECK_CLOSE(c.dt, 0.0005, 0, 0);
    CHECK_INT_EQ(c.substeps, 32);
    CHECK_INT_EQ(c.ground, 0);
    CHECK_STR_EQ(c.name, "gear");
    CHECK_INT_EQ(c.method, 2);
    CHECK_CLOSE(c.pos[0], -4, 0, 0);
    CHECK_CLOSE(c.pos[1], 2, 0, 0);
    CHECK_INT_EQ(c.nweights, 3);
    CHECK_CLOSE(c.weights[2], 0.25, 0, 0);
    CHECK_CLOSE(c.ke, 1e4, 0, 0);
  }
  /* bad configs: exact messages, target untouched */
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    Cfg c = defaults(), ref = defaults();
    ds__clearerr(&eb);
    int rc = ds__cfg_parse("t.json", bad[i].json, fields, &c, sizeof c, &eb);
    CHECK_INT_EQ(rc, bad[i].code);
    CHECK_STR_EQ(ds__errmsg(&eb), bad[i].msg);
    CHECK(memcmp(&c, &ref, sizeof c) == 0);
  }
  /* files */
  {
    Cfg c = defaults();
    ds__clearerr(&eb);
    CHECK_INT_EQ(ds__cfg_load("/nonexistent-dir/x.json", fields, &c, sizeof c, &eb), DS_ERR_IO);
    CHECK_STR_EQ(ds__errmsg(&eb), "/nonexistent-dir/x.json: cannot open: No such file or directory");
    const char* bdir = getenv("DS_BUILDDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/test_config_tmp.json", bdir ? bdir : ".");
    FILE* fp = fopen(path, "w");
    CHECK(fp != NULL);
    if (fp) {
      fputs("{\n\"contact\": {\"ke\": 2e4}\n}\n", fp);
      fclose(fp);
      CHECK_INT_EQ(ds__cfg_load(path, fields, &c, sizeof c, &eb), DS_OK);
      CHECK_CLOSE(c.ke, 2e4, 0, 0);
      remove(path);
    }
    char s[16];
    CHECK_INT_EQ(ds__cfg_peek_string("{\"env\": \"walker\"}", "env", s, sizeof s), DS_OK);
    CHECK_STR_EQ(s, "walker");
    CHECK_INT_EQ(ds__cfg_peek_string("{\"env\": 3}", "env", s, sizeof s), DS_ERR_NOTFOUND);
    CHECK_INT_EQ(ds__cfg_peek_string("{\"env\": ", "env", s, sizeof s), DS_ERR_PARSE);
  }
  return DST_RESULT();
}
