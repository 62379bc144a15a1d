/* `--plugin FILE.so`: environment classes (and anything else registered
 * through the public API) from a shared object. The object exports
 *   int dsim_plugin_init(void);
 * which registers its classes (ds_env_register) and returns 0 or a DS_ERR_*
 * code. Its ds_* references resolve to this program (linked with
 * -export-dynamic), so it registers into the same registry the config
 * parser, the trainer and the run use; it must not link libdsim itself.
 *
 * Every command that takes an env (run, sysid, landscape, config) reads the
 * option through ds__cli_plugin_option, so they all accept the same forms
 * (--plugin FILE, --plugin=FILE) with the same messages. Loading the same
 * object twice is a no-op: dlopen hands back the handle it already has, and
 * its classes are registered once. docs/plugins.md has a template. */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "dsim/dsim.h"

/* the objects loaded so far (their handles stay open until exit) and the
 * paths they were given as */
#define MAX_PLUGINS 64
static void* g_handles[MAX_PLUGINS];
static const char* g_paths[MAX_PLUGINS];
static int g_nplugins = 0;

int ds__cli_plugin_count(void) { return g_nplugins; }
const char* ds__cli_plugin_path(int i) { return i >= 0 && i < g_nplugins ? g_paths[i] : NULL; }

int ds__cli_load_plugin(const char* cmd, const char* path) {
  /* a bare name would make dlopen search the library path: "./" reads it here */
  char local[4096];
  const char* file = path;
  if (!strchr(path, '/') && (size_t)snprintf(local, sizeof local, "./%s", path) < sizeof local) file = local;
  void* h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dsim %s: --plugin %s: cannot load: %s\n", cmd, path, dlerror());
    return DS_EXIT_INPUT;
  }
  for (int i = 0; i < g_nplugins; i++)
    if (g_handles[i] == h) {
      dlclose(h); /* the count dlopen just raised */
      return DS_EXIT_OK;
    }
  if (g_nplugins == MAX_PLUGINS) {
    fprintf(stderr, "dsim %s: --plugin %s: more than %d plugins\n", cmd, path, MAX_PLUGINS);
    dlclose(h);
    return DS_EXIT_USAGE;
  }
  const int* abi = (const int*)dlsym(h, "dsim_plugin_abi");
  if (!abi || *abi != ds_plugin_abi()) {
    if (abi)
      fprintf(stderr, "dsim %s: --plugin %s: built against other dsim headers (ABI %d, this dsim %d); rebuild it\n", cmd,
              path, *abi, ds_plugin_abi());
    else
      fprintf(stderr, "dsim %s: --plugin %s: no dsim_plugin_abi (define it: const int dsim_plugin_abi = DS_PLUGIN_ABI;)\n",
              cmd, path);
    dlclose(h);
    return DS_EXIT_INPUT;
  }
  int (*init)(void) = NULL;
  *(void**)&init = dlsym(h, "dsim_plugin_init"); /* object to function pointer: POSIX's way */
  if (!init) {
    fprintf(stderr, "dsim %s: --plugin %s: no function dsim_plugin_init (the plugin's entry point)\n", cmd, path);
    dlclose(h);
    return DS_EXIT_INPUT;
  }
  const int rc = init();
  if (rc) {
    fprintf(stderr, "dsim %s: --plugin %s: dsim_plugin_init failed: %s (%s)\n", cmd, path, ds_strerror(rc),
            ds_err_name(rc));
    return DS_EXIT_INPUT;
  }
  g_handles[g_nplugins] = h;
  g_paths[g_nplugins++] = path; /* argv's: lives until exit */
  return DS_EXIT_OK; /* the handle stays open: its classes are in use until exit */
}

int ds__cli_plugin_option(const char* cmd, int argc, char** argv, int* i, int* rc) {
  const char* arg = argv[*i];
  const char* val = NULL;
  if (!strncmp(arg, "--plugin=", 9)) {
    val = arg + 9;
  } else if (!strcmp(arg, "--plugin")) {
    if (*i + 1 >= argc) {
      fprintf(stderr, "dsim %s: option '--plugin' needs a value (a shared object, e.g. ./myenv.so)\n", cmd);
      *rc = DS_EXIT_USAGE;
      return 1;
    }
    val = argv[++*i];
  } else {
    return 0;
  }
  if (!*val) {
    fprintf(stderr, "dsim %s: --plugin: expected a shared object, got ''\n", cmd);
    *rc = DS_EXIT_USAGE;
    return 1;
  }
  *rc = ds__cli_load_plugin(cmd, val);
  return 1;
}

void ds__cli_plugin_usage(FILE* out, int col) {
  fprintf(out,
          "  %-*sload a shared object whose dsim_plugin_init() registers env classes\n"
          "  %-*s(ds_env_register; docs/plugins.md); repeatable\n",
          col - 2, "--plugin FILE", col - 2, "");
}
