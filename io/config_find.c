/* Bundled configs (dsim/config_dirs.h: ds_run_config_dir, ds_run_find_config): where
 * configs/NAME.json is read from. The folders come from the place of the
 * code itself, found at run time, so that a build tree copied or moved
 * elsewhere reads its own configs and never those of the source path it was
 * compiled in:
 *
 *   1. $DSIM_CONFIG_DIR when set (not empty);
 *   2. next to the object this code is linked into (dladdr): the shared
 *      library, or the program that links the library statically (dsim).
 *      With D its folder: D/configs (the dsim program at the top of a build
 *      tree), D/../configs (.libs/libdsim.so in a build tree), and
 *      D/../share/dsim/configs (lib/ or bin/ of an install);
 *   3. the install's $(pkgdatadir)/configs compiled in (DS_CONFIGS_DATADIR).
 *
 * A build outside the source tree gets a `configs` link to the source's
 * folder from configure (AC_CONFIG_LINKS), so rule 2 covers it too. */
#define _GNU_SOURCE /* dladdr1, Dl_info (glibc declares them only for GNU) */
#include "config.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#if defined(__GLIBC__)
#  include <link.h>
#endif

#include "dsim/config_dirs.h"

#ifndef DS_CONFIGS_DATADIR
#  define DS_CONFIGS_DATADIR ""
#endif

/* the three layouts of rule 2: under the object's folder (up 0) or its
 * parent (up 1) */
static const struct {
  int up;
  const char* sub;
} near_object[] = {{0, "/configs"}, {1, "/configs"}, {1, "/share/dsim/configs"}};
enum { NEAR_OBJECT = sizeof near_object / sizeof near_object[0] };

static const char anchor = 0; /* an address inside this object, for dladdr */

/* The folder of the object this code is in (the library, or the program it
 * is linked into); 0, or -1 when the platform cannot say. */
static int object_dir(char* dir, size_t n) {
  char file[PATH_MAX] = "";
#if defined(__GLIBC__)
  Dl_info info;
  struct link_map* lm = NULL;
  if (dladdr1(&anchor, &info, (void**)&lm, RTLD_DL_LINKMAP) && lm && lm->l_name && lm->l_name[0]) {
    snprintf(file, sizeof file, "%s", lm->l_name);
  } else { /* the main program: its link map has no name (dladdr would give argv[0]) */
    ssize_t k = readlink("/proc/self/exe", file, sizeof file - 1);
    file[k > 0 ? k : 0] = 0;
  }
#else
  Dl_info info;
  if (dladdr(&anchor, &info) && info.dli_fname) snprintf(file, sizeof file, "%s", info.dli_fname);
#endif
  char real[PATH_MAX];
  if (!file[0] || !realpath(file, real)) return -1; /* symlinks resolved: an installed link finds the real tree */
  char* slash = strrchr(real, '/');
  if (!slash) return -1;
  *slash = 0;
  int k = snprintf(dir, n, "%s", real[0] ? real : "/");
  return k < 0 || (size_t)k >= n ? -1 : 0;
}

int ds_run_config_dir(int i, char* dir, size_t n) {
  if (i < 0 || !dir || !n) return DS_ERR_INVALID;
  const char* env = getenv("DSIM_CONFIG_DIR");
  const int have_env = env && *env;
  int k = -1;
  if (have_env && i == 0) {
    k = snprintf(dir, n, "%s", env);
  } else {
    i -= have_env;
    char obj[PATH_MAX];
    if (i < NEAR_OBJECT) {
      if (object_dir(obj, sizeof obj)) {
        dir[0] = 0; /* unknown here: an empty entry keeps the numbering */
        return 0;
      }
      if (near_object[i].up) { /* the parent folder, written out (no "..") */
        char* slash = strrchr(obj, '/');
        if (slash) *slash = 0;
      }
      k = snprintf(dir, n, "%s%s", obj, near_object[i].sub);
    } else if (i == NEAR_OBJECT && DS_CONFIGS_DATADIR[0]) {
      k = snprintf(dir, n, "%s", DS_CONFIGS_DATADIR);
    } else {
      return DS_ERR_NOTFOUND;
    }
  }
  return k < 0 || (size_t)k >= n ? DS_ERR_RANGE : 0;
}

static int is_file(const char* p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int ds_run_find_config(const char* name, char* path, size_t n, char* err, size_t errlen) {
  if (err && errlen) err[0] = 0;
  if (!name || !*name || strchr(name, '/') || !path || !n) {
    if (err && errlen) snprintf(err, errlen, "bundled config: expected an env or config name without '/', got '%s'",
                                name ? name : "(null)");
    return DS_ERR_INVALID;
  }
  char dir[PATH_MAX], tried[1024] = "";
  for (int i = 0; ds_run_config_dir(i, dir, sizeof dir) != DS_ERR_NOTFOUND; i++) {
    if (!dir[0]) continue;
    char file[PATH_MAX + 256];
    int k = snprintf(file, sizeof file, "%s/%s.json", dir, name);
    if (k < 0 || (size_t)k >= sizeof file) continue;
    if (is_file(file)) {
      k = snprintf(path, n, "%s", file);
      if (k < 0 || (size_t)k >= n) {
        if (err && errlen) snprintf(err, errlen, "bundled config %s: the path does not fit in %zu bytes", file, n);
        return DS_ERR_RANGE;
      }
      return 0;
    }
    const size_t t = strlen(tried);
    if (snprintf(tried + t, sizeof tried - t, "%s%s", t ? ", " : "", dir) < 0) break; /* truncated: fine */
  }
  if (err && errlen) snprintf(err, errlen, "no bundled config %s.json (searched %s)", name, tried[0] ? tried : "nothing");
  return DS_ERR_NOTFOUND;
}
