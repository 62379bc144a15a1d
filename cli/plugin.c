/* `--plugin FILE.so`: environment classes (and anything else registered
 * through the public API) from a shared object. The object exports
 *   int dsim_plugin_init(void);
 * which registers its classes (ds_env_register) and returns 0 or a DS_ERR_*
 * code. Its ds_* references resolve to this program (linked with
 * -export-dynamic), so it registers into the same registry the config
 * parser, the trainer and the run use; it must not link libdsim itself. */
#include "config.h"

#include <dlfcn.h>
#include <stdio.h>

#include "cli/cli.h"
#include "dsim/dsim.h"

int ds__cli_load_plugin(const char* cmd, const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dsim %s: --plugin %s: cannot load: %s\n", cmd, path, dlerror());
    return DS_EXIT_INPUT;
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
  return DS_EXIT_OK; /* the handle stays open: its classes are in use until exit */
}
