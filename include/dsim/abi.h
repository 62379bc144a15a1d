/* dsim ABI table: what a binding that mirrors the public structs and
 * constants by hand (python/dsim/_lib.py, a ctypes binding) needs to check
 * its copies against the library it has loaded. Each entry is a name and an
 * integer:
 *
 *   "sizeof:dsBuildInfo"             sizeof(dsBuildInfo)
 *   "offsetof:dsBuildInfo.real_bytes" offsetof(dsBuildInfo, real_bytes)
 *   "sizeof:dsBuildInfo.real_bytes"  sizeof of that field
 *   "sizeof:dsReal"                  sizeof(dsReal) (8, or 4 with --enable-single)
 *   "const:DS_ERR_NOMEM"             the value of a public constant
 *
 * The table lists the structs and fields the bindings mirror (not every
 * field of every public struct: dsEnvClass only up to its keys) and every
 * constant they copy. */
#ifndef DSIM_ABI_H
#define DSIM_ABI_H

#include "dsim/base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* *value = the entry `name`. DS_ERR_NOTFOUND (value untouched) for a name
 * not in the table, DS_ERR_INVALID for a NULL argument. */
DS_API int ds_abi_lookup(const char* name, long long* value);

/* Every name of the table, in table order (dsReal; each struct followed by
 * its fields; then the constants), ending with NULL. */
DS_API const char* const* ds_abi_names(void);

#ifdef __cplusplus
}
#endif

#endif
