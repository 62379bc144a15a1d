/* `dsim config [ENV-NAME|CONFIG]`: the complete run config (every key of
 * the env, controller and run sections with its value), from an env class's
 * defaults or a config file with its missing keys filled in; a starting
 * point for a new config, and a way to see what a config resolves to.
 * `dsim config --keys [ENV-NAME]`: every key with its type, range, default
 * and description, from the same key tables that check config files and
 * command-line flags. `dsim config --reference`: the same for every env
 * class and section as one Markdown page (docs/config.md is its output,
 * kept current by tests/test_config_reference.sh). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "dsim/dsim.h"
#include "controllers/sysid_field.h"

static void usage(FILE* out) {
  fprintf(out,
          "usage: dsim config [--plugin FILE.so] [ENV-NAME|CONFIG]\n"
          "       dsim config [--plugin FILE.so] --keys [ENV-NAME]\n"
          "       dsim config [--plugin FILE.so] --reference\n"
          "       dsim config --paths\n"
          "\n"
          "Print the complete run config (sections env, controller, run; every key with its\n"
          "value; a sysid config: env, sysid with its parameters, run): the defaults of ENV-NAME (default control-fem), or CONFIG with the keys it\n"
          "leaves out filled in. --keys lists every key with its type, range, default and\n"
          "meaning. --reference prints every env class's keys and the controller, run and\n"
          "sysid sections' as Markdown (docs/config.md). --paths prints the folders bundled\n"
          "configs are read from, in order ($DSIM_CONFIG_DIR first when set). Environments: ");
  for (int i = 0; i < ds_env_class_count(); i++) fprintf(out, "%s%s", i ? ", " : "", ds_env_class_at(i)->name);
  fprintf(out, ".\n");
}

/* "real in [0, 1e+12]" etc. */
static void describe_type(const dsConfigKey* k, char* buf, size_t n) {
  switch (k->type) {
    case DS_KEY_REAL:
    case DS_KEY_DOUBLE: snprintf(buf, n, "number in [%.10g, %.10g]", k->min, k->max); break;
    case DS_KEY_INT:
    case DS_KEY_U64: snprintf(buf, n, "integer in [%.10g, %.10g]", k->min, k->max); break;
    case DS_KEY_BOOL: snprintf(buf, n, "true|false"); break;
    case DS_KEY_STRING: snprintf(buf, n, "string (< %g characters)", k->max); break;
    case DS_KEY_ENUM: snprintf(buf, n, "%s", k->choices); break;
    case DS_KEY_VEC3:
    case DS_KEY_DVEC3: snprintf(buf, n, "[x, y, z], each in [%g, %g]", k->min, k->max); break;
    case DS_KEY_REALS: snprintf(buf, n, "a number or 1 to %g numbers >= %g", k->max, k->min); break;
  }
}

/* The value of one key of src as JSON text (through the section writer). */
static void value_text(const dsConfigKey* k, const void* src, char* buf, size_t n) {
  dsConfigKey one[2];
  one[0] = *k;
  one[0].path = "v";
  memset(&one[1], 0, sizeof one[1]);
  char tmp[512];
  ds_config_write_section(one, src, 0, tmp, sizeof tmp);
  const char* colon = strchr(tmp, ':');
  snprintf(buf, n, "%s", colon ? colon + 2 : tmp);
}

/* Key k's type text and its value in src, whose section starts at offset. */
static void key_texts(const dsConfigKey* k, const void* src, size_t offset, char* type, size_t tn, char* val,
                      size_t vn) {
  dsConfigKey shifted = *k;
  shifted.offset += offset;
  if (shifted.type == DS_KEY_REALS) shifted.aux_offset += offset;
  describe_type(k, type, tn);
  if (shifted.type == DS_KEY_REALS && *(const int*)((const char*)src + shifted.aux_offset) == 0)
    snprintf(val, vn, "none"); /* an empty list: the key left out */
  else
    value_text(&shifted, src, val, vn);
}

static void list_keys(const char* section, const dsConfigKey* keys, const void* src, size_t offset) {
  for (const dsConfigKey* k = keys; k && k->path; k++) {
    char type[128], val[512];
    key_texts(k, src, offset, type, sizeof type, val, sizeof val);
    char full[160];
    snprintf(full, sizeof full, "%s.%s", section, k->path);
    printf("%-34s %-38s default %-12s %s\n", full, type, val, k->doc ? k->doc : "");
  }
}

static int print_keys(const char* name) {
  dsEnvDef def = ds_default_env_def(name);
  if (!def.cls) {
    fprintf(stderr, "dsim config: unknown environment '%s'\n", name);
    return DS_EXIT_USAGE;
  }
  printf("# %s: %s\n", def.cls->name, def.cls->doc ? def.cls->doc : "");
  printf("%-34s %-38s default \"%s\"\n", "env.name", "environment class", def.cls->name);
  list_keys("env", ds_env_common_keys(), &def, 0);
  list_keys("env", def.cls->keys, &def, offsetof(dsEnvDef, params));
  const dsTrainerDef td = ds_default_trainer_def();
  list_keys("controller", ds_trainer_keys(), &td, 0);
  const dsRunDef rd = ds_default_run_def();
  list_keys("run", ds_run_keys(), &rd, 0);
  return DS_EXIT_OK;
}

/* ---- --reference: the key tables as Markdown ------------------------------
 * The page is regenerated and compared by tests/test_config_reference.sh, so
 * everything in it must come from the tables and the classes' defaults (no
 * dates, versions or build options). */

/* Text for a Markdown table cell: '|' would end the cell, so it is escaped. */
static void md_cell(const char* s) {
  for (; s && *s; s++) {
    if (*s == '|') fputc('\\', stdout);
    fputc(*s, stdout);
  }
}

/* One row per key: path, type and range, default, meaning. Keys of sysid's
 * param2 .. param8 repeat param1's and are left out (the page says so). */
static void md_keys(const char* section, const dsConfigKey* keys, const void* src, size_t offset) {
  for (const dsConfigKey* k = keys; k && k->path; k++) {
    if (!strncmp(k->path, "param", 5) && k->path[5] >= '2' && k->path[5] <= '9') continue;
    char type[128], val[512];
    key_texts(k, src, offset, type, sizeof type, val, sizeof val);
    printf("| `%s.%s` | ", section, k->path);
    md_cell(type);
    printf(" | `");
    md_cell(val);
    printf("` | ");
    md_cell(k->doc);
    printf(" |\n");
  }
}

static void md_table_head(void) {
  printf("| key | type and range | default | meaning |\n");
  printf("|---|---|---|---|\n");
}

static int print_reference(void) {
  printf("# Config reference\n\n");
  printf("<!-- Generated by `dsim config --reference` from the key tables; do not edit.\n"
         "     tests/test_config_reference.sh fails when this file is out of date. -->\n\n");
  printf("Every key a run config can hold, with its type and range, its default and its meaning: the\n"
         "tables that check config files, `--set SECTION.KEY=VALUE` and the command-line flags (an\n"
         "unknown key, a wrong type or a value out of range is an error naming the file and the key\n"
         "path). A run config has the sections `env`, `controller` and `run`; a `dsim sysid` config has\n"
         "`env`, `sysid` and `run`. A key left out takes its default. `dsim config --keys ENV` prints\n"
         "one env's table in the terminal and `dsim config ENV` a complete config with every default.\n"
         "The defaults here are the library's; the bundled configs in `configs/` set some of them\n"
         "otherwise (`dsim config FILE` shows a file with every key).\n\n");
  printf("- [Environments](#environments)\n");
  for (int i = 0; i < ds_env_class_count(); i++) {
    const char* name = ds_env_class_at(i)->name;
    printf("  - [`%s`](#env-", name);
    for (const char* c = name; *c; c++) fputc(*c == '_' ? '-' : *c, stdout);
    printf(")\n");
  }
  printf("- [Section `controller`](#section-controller)\n");
  printf("- [Section `run`](#section-run)\n");
  printf("- [Section `sysid`](#section-sysid)\n\n");

  printf("## Environments\n\n");
  printf("`env.name` picks the class; the keys every class shares come first in each table, then the\n"
         "class's own. Defaults are the class's (`ds_default_env_def(name)`).\n\n");
  for (int i = 0; i < ds_env_class_count(); i++) {
    const dsEnvClass* cls = ds_env_class_at(i);
    const dsEnvDef def = ds_default_env_def(cls->name);
    if (!def.cls) continue;
    printf("### env: %s\n\n", cls->name);
    if (cls->doc) printf("%s\n\n", cls->doc);
    md_table_head();
    printf("| `env.name` | environment class | `\"%s\"` | the class of this table |\n", cls->name);
    md_keys("env", ds_env_common_keys(), &def, 0);
    md_keys("env", cls->keys, &def, offsetof(dsEnvDef, params));
    printf("\n");
  }

  printf("## Section controller\n\n");
  printf("The sinusoid-network controller, its optimiser, MPC and CEM (`ds_default_trainer_def()`).\n\n");
  md_table_head();
  const dsTrainerDef td = ds_default_trainer_def();
  md_keys("controller", ds_trainer_keys(), &td, 0);

  printf("\n## Section run\n\n");
  printf("Seed, iterations, method, threads, device and log file (`ds_default_run_def()`).\n\n");
  md_table_head();
  const dsRunDef rd = ds_default_run_def();
  md_keys("run", ds_run_keys(), &rd, 0);

  printf("\n## Section sysid\n\n");
  printf("System identification (`dsim sysid`, `ds_default_sysid_def()`). `param2` ... `param8` take the\n"
         "same keys as `param1`; at least `param1.name` must be given, and the parameters are numbered\n"
         "without gaps.\n\n");
  md_table_head();
  const dsSysidDef sd = ds_default_sysid_def();
  md_keys("sysid", ds_sysid_keys(), &sd, 0);
  return DS_EXIT_OK;
}

/* A sysid config (sections env, sysid, run) as JSON: the sysid section holds
 * the parameters in use and the lists that are given (an empty list reads
 * as "absent" and is no valid value). */
static int print_sysid_config(const dsEnvDef* def, const dsSysidDef* sd, const dsRunDef* rd) {
  const dsConfigKey* all = ds_sysid_keys();
  int nk = 0;
  while (all[nk].path) nk++;
  dsConfigKey* keys = (dsConfigKey*)calloc((size_t)nk + 1, sizeof *keys);
  const int n = ds_env_def_to_json(def, NULL, 0);
  char* env = n > 0 ? (char*)malloc((size_t)n + 1) : NULL;
  if (!keys || !env) {
    free(keys);
    free(env);
    fprintf(stderr, "dsim config: out of memory\n");
    return DS_EXIT_FAILURE;
  }
  const int np = ds_sysid_num_params(sd);
  int m = 0;
  for (int i = 0; i < nk; i++) {
    int p = 0;
    if (sscanf(all[i].path, "param%d.", &p) == 1 && p > np) continue;
    if (all[i].type == DS_KEY_REALS && *(const int*)((const char*)sd + all[i].aux_offset) == 0) continue;
    keys[m++] = all[i];
  }
  ds_env_def_to_json(def, env, (size_t)n + 1);
  char* tail = strstr(env, "\n  }\n}\n"); /* continue the object after the env section */
  if (tail) tail[4] = '\0';
  const int ns = ds_config_write_section(keys, sd, 4, NULL, 0), nr = ds_config_write_section(ds_run_keys(), rd, 4, NULL, 0);
  char* sys = ns >= 0 ? (char*)malloc((size_t)ns + 1) : NULL;
  char* run = nr >= 0 ? (char*)malloc((size_t)nr + 1) : NULL;
  if (sys && run) {
    ds_config_write_section(keys, sd, 4, sys, (size_t)ns + 1);
    ds_config_write_section(ds_run_keys(), rd, 4, run, (size_t)nr + 1);
    printf("%s,\n  \"sysid\": {%s\n  },\n  \"run\": {%s\n  }\n}\n", env, sys, run);
  } else {
    fprintf(stderr, "dsim config: out of memory\n");
  }
  const int ok = sys && run;
  free(sys);
  free(run);
  free(env);
  free(keys);
  return ok ? DS_EXIT_OK : DS_EXIT_FAILURE;
}

/* 1 when text has a sysid section with keys (into *sd, checked), 0 when it
 * has none; a DS_EXIT_* code (message printed) when it is bad. */
static int sysid_section(const char* arg, const char* text, dsSysidDef* sd) {
  const dsSysidDef dflt = ds_default_sysid_def();
  *sd = dflt;
  char err[1024];
  int rc = ds__sysid_parse_section(arg, text, sd, err, sizeof err);
  if (!rc && !memcmp(sd, &dflt, sizeof dflt)) return 0;
  if (!rc) rc = ds_sysid_def_from_text(arg, text, sd, err, sizeof err);
  if (!rc) return 1;
  fprintf(stderr, "dsim config: %s\n", err);
  return -DS_EXIT_INPUT;
}

static int print_config(const char* arg) {
  char err[1024];
  dsEnvDef def;
  dsTrainerDef td = ds_default_trainer_def();
  dsRunDef rd = ds_default_run_def();
  struct stat st;
  if (stat(arg, &st) == 0 && S_ISREG(st.st_mode)) {
    char* text = NULL;
    dsSysidDef sd;
    int rc = ds_config_read_file(arg, &text, err, sizeof err);
    if (!rc) rc = ds_env_def_from_text(arg, text, &def, err, sizeof err);
    if (!rc && (rc = ds_run_def_from_text(arg, text, &rd, err, sizeof err)) == 0) {
      const int sys = sysid_section(arg, text, &sd);
      if (sys) {
        ds_config_free_text(text);
        return sys < 0 ? -sys : print_sysid_config(&def, &sd, &rd);
      }
    }
    if (!rc) rc = ds_trainer_def_from_text(arg, text, &td, err, sizeof err);
    ds_config_free_text(text);
    if (rc) {
      fprintf(stderr, "dsim config: %s\n", err);
      return DS_EXIT_INPUT;
    }
  } else {
    def = ds_default_env_def(arg);
    if (!def.cls) {
      fprintf(stderr, "dsim config: '%s' is neither a config file nor an environment\n", arg);
      return DS_EXIT_USAGE;
    }
  }
  char* json = ds_run_config_json(&def, &td, &rd);
  if (!json) {
    fprintf(stderr, "dsim config: out of memory\n");
    return DS_EXIT_FAILURE;
  }
  fputs(json, stdout);
  free(json);
  return DS_EXIT_OK;
}

/* The folders bundled configs are read from, in order (ds_run_config_dir),
 * each marked when it exists. */
static int print_paths(void) {
  char dir[4096];
  printf("bundled configs (NAME.json) are read from the first of these folders that has the file:\n");
  for (int i = 0; ds_run_config_dir(i, dir, sizeof dir) != DS_ERR_NOTFOUND; i++) {
    struct stat st;
    if (!dir[0]) continue;
    const int there = stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
    printf("  %s%s\n", dir, there ? "" : "  (absent)");
  }
  printf("($DSIM_CONFIG_DIR, when set, comes first.)\n");
  return DS_EXIT_OK;
}

int ds__cli_config(int argc, char** argv) {
  int keys = 0, reference = 0, rc = 0;
  const char* arg = NULL;
  for (int i = 1; i < argc; i++) {
    if (ds__cli_is_help(argv[i])) {
      usage(stdout);
      return DS_EXIT_OK;
    }
    if (!strcmp(argv[i], "--keys")) {
      keys = 1;
    } else if (!strcmp(argv[i], "--reference")) {
      reference = 1;
    } else if (!strcmp(argv[i], "--paths")) {
      return print_paths();
    } else if (ds__cli_plugin_option("config", argc, argv, &i, &rc)) {
      if (rc) return rc;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "dsim config: unknown option '%s'\nRun 'dsim config --help' for the options.\n", argv[i]);
      return DS_EXIT_USAGE;
    } else if (arg) {
      fprintf(stderr, "dsim config: unexpected argument '%s'\n", argv[i]);
      return DS_EXIT_USAGE;
    } else {
      arg = argv[i];
    }
  }
  if (reference) {
    if (keys || arg) {
      fprintf(stderr, "dsim config: --reference covers every environment and takes no other argument\n");
      return DS_EXIT_USAGE;
    }
    return print_reference();
  }
  if (!arg) arg = "control-fem";
  return keys ? print_keys(arg) : print_config(arg);
}
