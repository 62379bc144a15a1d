/* Strict config loading: a table of good and bad configs with the exact
 * error each must produce; defaults kept for absent keys; target untouched on
 * failure; files read with errors naming them. Sections: a table parsed
 * inside one top-level object (messages name "section.key"), the top-level
 * check of the section names, and one key set from text (a command-line
 * flag) checked exactly as in a file. */
#include "config.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/cfg.h"
#include "tests/dstest.h"

typedef struct Cfg {
  dsReal dt;
  int substeps;
  int ground;
  char name[16];
  int method;
  dsReal pos[3];
  dsReal weights[DS_KEY_MAX_REALS];
  int nweights;
  dsReal ke;
} Cfg;

static const dsConfigKey fields[] = {
    {"physics.dt", DS_KEY_REAL, offsetof(Cfg, dt), 1e-6, 0.1, NULL, 0, "substep, s"},
    {"physics.substeps", DS_KEY_INT, offsetof(Cfg, substeps), 1, 1000, NULL, 0, "substeps per step"},
    {"physics.ground", DS_KEY_BOOL, offsetof(Cfg, ground), 0, 1, NULL, 0, "ground plane on"},
    {"name", DS_KEY_STRING, offsetof(Cfg, name), 0, 16, NULL, 0, "scene name"},
    {"method", DS_KEY_ENUM, offsetof(Cfg, method), 0, 0, "image|state|random", 0, "loss"},
    {"start", DS_KEY_VEC3, offsetof(Cfg, pos), -100, 100, NULL, 0, "start position, m"},
    {"loss.weights", DS_KEY_REALS, offsetof(Cfg, weights), 0, 4, NULL, offsetof(Cfg, nweights), "weights"},
    {"contact.ke", DS_KEY_REAL, offsetof(Cfg, ke), 0, 1e12, NULL, 0, "N/m"},
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
    {"{\"method\": \"imag\"}", DS_ERR_CONFIG,
     "t.json: method: expected one of \"image,state,random\", got \"imag\" (did you mean \"image\"?)"},
    {"{\"start\": [1, 2]}", DS_ERR_CONFIG, "t.json: start: expected an array of 3 numbers, got an array"},
    {"{\"start\": [1, \"2\", 3]}", DS_ERR_CONFIG, "t.json: start[1]: expected a number, got \"2\""},
    {"{\"start\": [1, 2, 300]}", DS_ERR_CONFIG, "t.json: start[2]: expected a number in [-100, 100], got 300"},
    {"{\"loss\": {\"weights\": []}}", DS_ERR_CONFIG, "t.json: loss.weights: expected a number or an array of 1 to 4 numbers, got an array"},
    {"{\"loss\": {\"weights\": [1, -1]}}", DS_ERR_CONFIG, "t.json: loss.weights[1]: expected a number >= 0, got -1"},
    {"{\"loss\": {\"weights\": -1}}", DS_ERR_CONFIG, "t.json: loss.weights: expected a number >= 0, got -1"},
    {"{\"loss\": {\"weights\": \"1\"}}", DS_ERR_CONFIG,
     "t.json: loss.weights: expected a number or an array of 1 to 4 numbers, got \"1\""},
    {"{\"contact\": {\"ke\": 1, \"ke\": 2}}", DS_ERR_CONFIG, "t.json: key \"contact.ke\" appears twice"},
    {"[1, 2]", DS_ERR_CONFIG, "t.json: expected a JSON object at the top level, got an array"},
    {"{\n  \"physics\": {\n    \"dt\": 0.001,\n  }\n}", DS_ERR_PARSE, "t.json:4:4: invalid JSON near '}'"},
    {"{\"physics\": {\"dt\": 0.001}", DS_ERR_PARSE, "t.json:1:26: invalid JSON (unexpected end of file)"},
    {"", DS_ERR_PARSE, "t.json:1:1: invalid JSON (unexpected end of file)"},
    {"{} trailing", DS_ERR_PARSE, "t.json:1:4: invalid JSON near '{} trailing'"},
};

/* the same table inside the section "env" of a sectioned config */
static const Case bad_section[] = {
    {"{\"env\": {\"physics\": {\"dtt\": 0.001}}}", DS_ERR_CONFIG,
     "t.json: unknown key \"env.physics.dtt\" (did you mean \"env.physics.dt\"?)"},
    {"{\"env\": {\"contact\": {\"kee\": 5}}}", DS_ERR_CONFIG,
     "t.json: unknown key \"env.contact.kee\" (did you mean \"env.contact.ke\"?)"},
    {"{\"env\": {\"zzzzzzzzzz\": 1}}", DS_ERR_CONFIG, "t.json: unknown key \"env.zzzzzzzzzz\""},
    {"{\"env\": {\"physics\": {\"dt\": 5}}}", DS_ERR_CONFIG,
     "t.json: env.physics.dt: expected a number in [1e-06, 0.1], got 5"},
    {"{\"env\": {\"contact\": {\"ke\": -5}}}", DS_ERR_CONFIG,
     "t.json: env.contact.ke: expected a number in [0, 1e+12], got -5"},
    {"{\"env\": {\"physics\": {\"substeps\": 2.5}}}", DS_ERR_CONFIG,
     "t.json: env.physics.substeps: expected an integer, got 2.5"},
    {"{\"env\": {\"physics\": 3}}", DS_ERR_CONFIG, "t.json: env.physics: expected an object, got 3"},
    {"{\"env\": {\"method\": \"imag\"}}", DS_ERR_CONFIG,
     "t.json: env.method: expected one of \"image,state,random\", got \"imag\" (did you mean \"image\"?)"},
    {"{\"env\": {\"start\": [1, 2, 300]}}", DS_ERR_CONFIG,
     "t.json: env.start[2]: expected a number in [-100, 100], got 300"},
    {"{\"env\": {\"loss\": {\"weights\": [1, -1]}}}", DS_ERR_CONFIG,
     "t.json: env.loss.weights[1]: expected a number >= 0, got -1"},
    {"{\"env\": {\"name\": \"a name that is far too long\"}}", DS_ERR_CONFIG,
     "t.json: env.name: expected a string of at most 15 characters"},
    {"{\"env\": {\"contact\": {\"ke\": 1, \"ke\": 2}}}", DS_ERR_CONFIG,
     "t.json: key \"env.contact.ke\" appears twice"},
    {"{\"env\": 3}", DS_ERR_CONFIG, "t.json: env: expected an object, got 3"},
    {"{\"env\": [1]}", DS_ERR_CONFIG, "t.json: env: expected an object, got an array"},
    {"{\"env\": {\"physics\": {\"dt\": 0.001}}", DS_ERR_PARSE, "t.json:1:35: invalid JSON (unexpected end of file)"},
};

/* the top-level check: sections env, controller, run */
static const Case bad_top[] = {
    {"{\"env\": {}, \"controler\": {}}", DS_ERR_CONFIG,
     "t.json: unknown section \"controler\" (did you mean \"controller\"? sections: env,controller,run)"},
    {"{\"envv\": {}}", DS_ERR_CONFIG, "t.json: unknown section \"envv\" (did you mean \"env\"? sections: env,controller,run)"},
    {"{\"physics\": {\"dt\": 0.001}}", DS_ERR_CONFIG, "t.json: unknown section \"physics\" (sections: env,controller,run)"},
    {"[1, 2]", DS_ERR_CONFIG, "t.json: expected a JSON object at the top level, got an array"},
    {"{\"env\": {}", DS_ERR_PARSE, "t.json:1:11: invalid JSON (unexpected end of file)"},
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
    CHECK_INT_EQ(ds__cfg_parse("t.json", js, NULL, fields, &c, sizeof c, &eb), DS_OK);
    CHECK_STR_EQ(ds__errmsg(&eb), "");
    CHECK_CLOSE(c.dt, 0.0005, DS_SINGLE ? 1e-7 : 0, 0); /* dsReal */
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
    int rc = ds__cfg_parse("t.json", bad[i].json, NULL, fields, &c, sizeof c, &eb);
    CHECK_INT_EQ(rc, bad[i].code);
    CHECK_STR_EQ(ds__errmsg(&eb), bad[i].msg);
    CHECK(memcmp(&c, &ref, sizeof c) == 0);
  }
  /* a section: paths relative to it, the other top-level keys left alone,
   * an absent section keeps the defaults */
  {
    Cfg c = defaults();
    const char* js =
        "{\"controller\": {\"lr\": 0.1, \"anything\": [1]}, \"env\": {\"physics\": {\"dt\": 0.0005, \"ground\": false},"
        " \"name\": \"gear\", \"method\": \"random\", \"start\": [-4, 2, 0], \"loss\": {\"weights\": [1, 0.5]}},"
        " \"run\": {\"seed\": 3}}";
    ds__clearerr(&eb);
    CHECK_INT_EQ(ds__cfg_parse("t.json", js, "env", fields, &c, sizeof c, &eb), DS_OK);
    CHECK_STR_EQ(ds__errmsg(&eb), "");
    CHECK_CLOSE(c.dt, 0.0005, DS_SINGLE ? 1e-7 : 0, 0); /* dsReal */
    CHECK_INT_EQ(c.substeps, 32);
    CHECK_INT_EQ(c.ground, 0);
    CHECK_STR_EQ(c.name, "gear");
    CHECK_INT_EQ(c.method, 2);
    CHECK_CLOSE(c.pos[0], -4, 0, 0);
    CHECK_INT_EQ(c.nweights, 2);
    CHECK_CLOSE(c.ke, 1e4, 0, 0);
    /* a bare number is a list of one ("init": 1200 in a sysid config) */
    Cfg one = defaults();
    ds__clearerr(&eb);
    CHECK_INT_EQ(ds__cfg_parse("t.json", "{\"loss\": {\"weights\": 1200}}", NULL, fields, &one, sizeof one, &eb), DS_OK);
    CHECK(one.nweights == 1 && one.weights[0] == 1200);
    /* the same text at the top level: "controller" is no key of the table */
    Cfg d = defaults(), ref = defaults();
    CHECK_INT_EQ(ds__cfg_parse("t.json", js, NULL, fields, &d, sizeof d, &eb), DS_ERR_CONFIG);
    CHECK_STR_EQ(ds__errmsg(&eb), "t.json: unknown key \"controller\"");
    CHECK(memcmp(&d, &ref, sizeof d) == 0);
    /* absent section, or an empty one: the defaults */
    ds__clearerr(&eb);
    CHECK_INT_EQ(ds__cfg_parse("t.json", "{\"run\": {\"seed\": 1}}", "env", fields, &d, sizeof d, &eb), DS_OK);
    CHECK(memcmp(&d, &ref, sizeof d) == 0);
    CHECK_INT_EQ(ds__cfg_parse("t.json", "{\"env\": {}}", "env", fields, &d, sizeof d, &eb), DS_OK);
    CHECK(memcmp(&d, &ref, sizeof d) == 0);
    /* a key path that exists only at the top level is unknown in the section */
    CHECK_INT_EQ(ds__cfg_parse("t.json", "{\"env\": {\"env\": {\"physics\": {\"dt\": 0.001}}}}", "env", fields, &d,
                               sizeof d, &eb),
                 DS_ERR_CONFIG);
    CHECK_STR_CONTAINS(ds__errmsg(&eb), "unknown key \"env.env\"");
  }
  for (size_t i = 0; i < sizeof bad_section / sizeof bad_section[0]; i++) {
    Cfg c = defaults(), ref = defaults();
    ds__clearerr(&eb);
    int rc = ds__cfg_parse("t.json", bad_section[i].json, "env", fields, &c, sizeof c, &eb);
    CHECK_INT_EQ(rc, bad_section[i].code);
    CHECK_STR_EQ(ds__errmsg(&eb), bad_section[i].msg);
    CHECK(memcmp(&c, &ref, sizeof c) == 0);
  }
  /* the top-level check */
  ds__clearerr(&eb);
  CHECK_INT_EQ(ds__cfg_check_top("t.json", "{\"env\": {}, \"controller\": {\"x\": 1}, \"run\": 3}", "env|controller|run", &eb),
               DS_OK);
  CHECK_STR_EQ(ds__errmsg(&eb), "");
  CHECK_INT_EQ(ds__cfg_check_top("t.json", "{}", "env|controller|run", &eb), DS_OK);
  for (size_t i = 0; i < sizeof bad_top / sizeof bad_top[0]; i++) {
    ds__clearerr(&eb);
    CHECK_INT_EQ(ds__cfg_check_top("t.json", bad_top[i].json, "env|controller|run", &eb), bad_top[i].code);
    CHECK_STR_EQ(ds__errmsg(&eb), bad_top[i].msg);
  }
  /* one key from text: checked as in a file, message "SOURCE: section.key: ..." */
  {
    Cfg c = defaults();
    ds__clearerr(&eb);
    CHECK_INT_EQ(ds__cfg_set("--dt", "env", fields, &c, sizeof c, "physics.dt", "0.0005", &eb), DS_OK);
    /* the whole value must parse: trailing junk is an error, not ignored */
    CHECK_INT_EQ(ds__cfg_set("--dt", "env", fields, &c, sizeof c, "physics.dt", "0.05x", &eb), DS_ERR_CONFIG);
    CHECK_INT_EQ(ds__cfg_set("--dt", "env", fields, &c, sizeof c, "physics.dt", "3 4", &eb), DS_ERR_CONFIG);
    CHECK_STR_CONTAINS(ds__errmsg(&eb), "--dt: env.physics.dt: expected a number, got \"3 4\"");
    ds__clearerr(&eb);
    CHECK_CLOSE(c.dt, 0.0005, DS_SINGLE ? 1e-7 : 0, 0); /* dsReal */
    CHECK_INT_EQ(ds__cfg_set("--ground", "env", fields, &c, sizeof c, "physics.ground", "false", &eb), DS_OK);
    CHECK_INT_EQ(c.ground, 0);
    CHECK_INT_EQ(ds__cfg_set("--start", "env", fields, &c, sizeof c, "start", "[1, 2, 3]", &eb), DS_OK);
    CHECK(c.pos[0] == 1 && c.pos[1] == 2 && c.pos[2] == 3);
    CHECK_INT_EQ(ds__cfg_set("--weights", "env", fields, &c, sizeof c, "loss.weights", "[0.5, 2]", &eb), DS_OK);
    CHECK(c.nweights == 2 && c.weights[1] == 2);
    /* enum and string: a bare word or a JSON string */
    CHECK_INT_EQ(ds__cfg_set("--method", "env", fields, &c, sizeof c, "method", "random", &eb), DS_OK);
    CHECK_INT_EQ(c.method, 2);
    CHECK_INT_EQ(ds__cfg_set("--method", "env", fields, &c, sizeof c, "method", "\"state\"", &eb), DS_OK);
    CHECK_INT_EQ(c.method, 1);
    CHECK_INT_EQ(ds__cfg_set("--name", "env", fields, &c, sizeof c, "name", "gear", &eb), DS_OK);
    CHECK_STR_EQ(c.name, "gear");
    CHECK_INT_EQ(ds__cfg_set("--name", "env", fields, &c, sizeof c, "name", "true", &eb), DS_OK);
    CHECK_STR_EQ(c.name, "true");
    CHECK_STR_EQ(ds__errmsg(&eb), "");
    /* errors: the same words as a file's, the target untouched */
    const Cfg before = c;
    CHECK_INT_EQ(ds__cfg_set("--dt", "env", fields, &c, sizeof c, "physics.dt", "5", &eb), DS_ERR_CONFIG);
    CHECK_STR_EQ(ds__errmsg(&eb), "--dt: env.physics.dt: expected a number in [1e-06, 0.1], got 5");
    CHECK_INT_EQ(ds__cfg_set("--ke", "env", fields, &c, sizeof c, "contact.ke", "-5", &eb), DS_ERR_CONFIG);
    CHECK_STR_EQ(ds__errmsg(&eb), "--ke: env.contact.ke: expected a number in [0, 1e+12], got -5");
    CHECK_INT_EQ(ds__cfg_set("--dt", "env", fields, &c, sizeof c, "physics.dt", "fast", &eb), DS_ERR_CONFIG);
    CHECK_STR_EQ(ds__errmsg(&eb), "--dt: env.physics.dt: expected a number, got \"fast\"");
    CHECK_INT_EQ(ds__cfg_set("--substeps", "env", fields, &c, sizeof c, "physics.substeps", "2.5", &eb), DS_ERR_CONFIG);
    CHECK_STR_EQ(ds__errmsg(&eb), "--substeps: env.physics.substeps: expected an integer, got 2.5");
    CHECK_INT_EQ(ds__cfg_set("--ground", "env", fields, &c, sizeof c, "physics.ground", "1", &eb), DS_ERR_CONFIG);
    CHECK_STR_EQ(ds__errmsg(&eb), "--ground: env.physics.ground: expected true or false, got 1");
    CHECK_INT_EQ(ds__cfg_set("--method", "env", fields, &c, sizeof c, "method", "imag", &eb), DS_ERR_CONFIG);
    CHECK_STR_EQ(ds__errmsg(&eb),
                 "--method: env.method: expected one of \"image,state,random\", got \"imag\" (did you mean \"image\"?)");
    CHECK_INT_EQ(ds__cfg_set("--start", "env", fields, &c, sizeof c, "start", "[1, 2]", &eb), DS_ERR_CONFIG);
    CHECK_STR_EQ(ds__errmsg(&eb), "--start: env.start: expected an array of 3 numbers, got an array");
    CHECK_INT_EQ(ds__cfg_set("--name", "env", fields, &c, sizeof c, "name", "a name that is far too long", &eb),
                 DS_ERR_CONFIG);
    CHECK_STR_EQ(ds__errmsg(&eb), "--name: env.name: expected a string of at most 15 characters");
    CHECK_INT_EQ(ds__cfg_set("--set", "env", fields, &c, sizeof c, "contact.kee", "5", &eb), DS_ERR_CONFIG);
    CHECK_STR_EQ(ds__errmsg(&eb), "--set: unknown key \"env.contact.kee\" (did you mean \"env.contact.ke\"?)");
    CHECK_INT_EQ(ds__cfg_set("--set", "env", fields, &c, sizeof c, "physics", "{}", &eb), DS_ERR_CONFIG);
    CHECK(memcmp(&c, &before, sizeof c) == 0);
    /* no section: bare paths */
    CHECK_INT_EQ(ds__cfg_set("--dt", NULL, fields, &c, sizeof c, "physics.dt", "5", &eb), DS_ERR_CONFIG);
    CHECK_STR_EQ(ds__errmsg(&eb), "--dt: physics.dt: expected a number in [1e-06, 0.1], got 5");
    CHECK(memcmp(&c, &before, sizeof c) == 0);
  }
  /* files */
  {
    Cfg c = defaults();
    char* text = NULL;
    size_t len = 0;
    ds__clearerr(&eb);
    CHECK_INT_EQ(ds__read_text_file("/nonexistent-dir/x.json", &text, &len, &eb), DS_ERR_IO);
    CHECK_STR_EQ(ds__errmsg(&eb), "/nonexistent-dir/x.json: cannot open: No such file or directory");
    CHECK(text == NULL);
    const char* bdir = getenv("DS_BUILDDIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/test_config_tmp.json", bdir ? bdir : ".");
    FILE* fp = fopen(path, "w");
    CHECK(fp != NULL);
    if (fp) {
      static const char body[] = "{\n\"env\": {\"contact\": {\"ke\": 2e4}}\n}\n";
      fputs(body, fp);
      fclose(fp);
      ds__clearerr(&eb);
      CHECK_INT_EQ(ds__read_text_file(path, &text, &len, &eb), DS_OK);
      CHECK_INT_EQ((int)len, (int)strlen(body));
      if (text) {
        CHECK_STR_EQ(text, body);
        CHECK_INT_EQ(ds__cfg_parse(path, text, "env", fields, &c, sizeof c, &eb), DS_OK);
        CHECK_CLOSE(c.ke, 2e4, 0, 0);
        ds__free(text);
      }
      remove(path);
    }
    char s[16];
    CHECK_INT_EQ(ds__cfg_peek_string("{\"env\": {\"name\": \"walker\"}}", "env", "name", s, sizeof s), DS_OK);
    CHECK_STR_EQ(s, "walker");
    CHECK_INT_EQ(ds__cfg_peek_string("{\"env\": \"walker\"}", NULL, "env", s, sizeof s), DS_OK);
    CHECK_STR_EQ(s, "walker");
    CHECK_INT_EQ(ds__cfg_peek_string("{\"env\": {\"name\": 3}}", "env", "name", s, sizeof s), DS_ERR_RANGE);
    CHECK_INT_EQ(ds__cfg_peek_string("{\"env\": \"walker\"}", "env", "name", s, sizeof s), DS_ERR_NOTFOUND);
    CHECK_INT_EQ(ds__cfg_peek_string("{\"run\": {\"name\": \"x\"}}", "env", "name", s, sizeof s), DS_ERR_NOTFOUND);
    CHECK_INT_EQ(ds__cfg_peek_string("{\"env\": {\"name\": \"a name that is far too long\"}}", "env", "name", s,
                                     sizeof s),
                 DS_ERR_RANGE);
    CHECK_INT_EQ(ds__cfg_peek_string("{\"env\": ", "env", "name", s, sizeof s), DS_ERR_PARSE);
  }
  return DST_RESULT();
}
