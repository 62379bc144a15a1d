/* A `dsim run --plugin` shared object: registers the hanging-spring class
 * (hang_env.h beside it). Built against the public headers only (nothing of
 * the build tree's: no config.h, no internal include path), as a user's
 * plugin is (docs/plugins.md; tests/test_plugin_template.sh compiles it with
 * the documented command); its ds_* references resolve to the dsim program
 * that loads it. */
#include "hang_env.h"

/* The entry point dsim looks up: register the classes, return 0 or a code. */
DS_API extern const int dsim_plugin_abi;
DS_API const int dsim_plugin_abi = DS_PLUGIN_ABI; /* the headers it was built with */
DS_API int dsim_plugin_init(void);
DS_API int dsim_plugin_init(void) { return ds_env_register(&hang_class); }
