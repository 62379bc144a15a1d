/* The ABI table (include/dsim/abi.h): every name unique and found by
 * ds_abi_lookup with its row's value; every error code of the error list
 * present with its value; spot values equal to what this compiler gives;
 * each mirrored field inside its struct, in increasing offset order; lookups
 * of an unknown name or NULL fail with the documented codes. */
#include "config.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dsim/dsim.h"
#include "tests/dstest.h"

static long long lookup(const char* name) {
  long long v = -999999;
  int rc = ds_abi_lookup(name, &v);
  if (rc) DST_FAIL_AT("ds_abi_lookup(\"%s\") = %d", name, rc);
  return v;
}

/* "offsetof:T.f" -> "T" into buf (the struct part), 0 when not a field row. */
static int struct_of(const char* name, const char* prefix, char* buf, size_t n) {
  size_t lp = strlen(prefix);
  if (strncmp(name, prefix, lp) != 0) return 0;
  const char* dot = strchr(name + lp, '.');
  if (!dot || (size_t)(dot - name - lp) >= n) return 0;
  memcpy(buf, name + lp, (size_t)(dot - name - lp));
  buf[dot - name - lp] = 0;
  return 1;
}

int main(void) {
  const char* const* names = ds_abi_names();
  CHECK(names != NULL);
  int n = 0;
  while (names[n]) n++;
  CHECK(n > 40);

  /* unique */
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (strcmp(names[i], names[j]) == 0) DST_FAIL_AT("\"%s\" listed twice (rows %d and %d)", names[i], i, j);

  /* every field row: its struct listed before it, offset + size within the
   * struct, offsets increasing in list order (the mirrors list fields in
   * declaration order) */
  char cur[64] = "";
  long long last_end = -1;
  for (int i = 0; i < n; i++) {
    const char* nm = names[i];
    char st[64], key[160];
    if (strncmp(nm, "sizeof:", 7) == 0 && !strchr(nm, '.')) {
      snprintf(cur, sizeof cur, "%s", nm + 7);
      last_end = 0;
      CHECK(lookup(nm) > 0);
      continue;
    }
    if (struct_of(nm, "offsetof:", st, sizeof st)) {
      if (strcmp(st, cur) != 0) {
        DST_FAIL_AT("%s: not listed under its struct (current struct %s)", nm, cur);
        continue;
      }
      long long off = lookup(nm);
      snprintf(key, sizeof key, "sizeof:%s", nm + 9);
      long long size = lookup(key);
      snprintf(key, sizeof key, "sizeof:%s", st);
      long long total = lookup(key);
      if (off < last_end) DST_FAIL_AT("%s = %lld overlaps the field before it (ends at %lld)", nm, off, last_end);
      if (size <= 0 || off + size > total) DST_FAIL_AT("%s + size %lld beyond sizeof %lld", nm, size, total);
      last_end = off + size;
    }
  }

  /* every error code of the list, with its value */
  int nerr = 0;
#define ERR_ROW(name_, val_, msg_)                          \
  do {                                                      \
    CHECK_INT_EQ(lookup("const:DS_ERR_" #name_), (val_));   \
    nerr++;                                                 \
  } while (0);
  DS_ERRNO_ERRORS(ERR_ROW)
#undef ERR_ROW
  CHECK_INT_EQ(nerr, DS_ERR_COUNT_ - 1);

  /* values as this compiler sees the headers */
  CHECK_INT_EQ(lookup("sizeof:dsReal"), sizeof(dsReal));
  CHECK_INT_EQ(lookup("sizeof:dsBuildInfo"), sizeof(dsBuildInfo));
  CHECK_INT_EQ(lookup("offsetof:dsBuildInfo.hdf5_version"), offsetof(dsBuildInfo, hdf5_version));
  CHECK_INT_EQ(lookup("sizeof:dsBuildInfo.hdf5_version"), 32);
  CHECK_INT_EQ(lookup("sizeof:dsConfigKey"), sizeof(dsConfigKey));
  CHECK_INT_EQ(lookup("offsetof:dsConfigKey.doc"), offsetof(dsConfigKey, doc));
  CHECK_INT_EQ(lookup("sizeof:dsEnvClass"), sizeof(dsEnvClass));
  CHECK_INT_EQ(lookup("offsetof:dsEnvClass.keys"), offsetof(dsEnvClass, keys));
  CHECK_INT_EQ(lookup("const:DS_OK"), DS_OK);
  CHECK_INT_EQ(lookup("const:DS_ACTION_INITIAL"), DS_ACTION_INITIAL);
  CHECK_INT_EQ(lookup("const:DS_BATCH_LOCKSTEP"), DS_BATCH_LOCKSTEP);
  CHECK_INT_EQ(lookup("const:DS_BATCH_AUTORESET"), DS_BATCH_AUTORESET);
  CHECK_INT_EQ(lookup("const:DS_BATCH_RESET"), DS_BATCH_RESET);

  /* failures */
  long long v = 42;
  CHECK_INT_EQ(ds_abi_lookup("sizeof:dsNoSuchThing", &v), DS_ERR_NOTFOUND);
  CHECK_INT_EQ(v, 42);
  CHECK_INT_EQ(ds_abi_lookup("sizeof:dsBuildInfo.", &v), DS_ERR_NOTFOUND);
  CHECK_INT_EQ(ds_abi_lookup(NULL, &v), DS_ERR_INVALID);
  CHECK_INT_EQ(ds_abi_lookup("sizeof:dsReal", NULL), DS_ERR_INVALID);
  return DST_RESULT();
}
