/* libFuzzer harness for the MJCF and URDF loaders (io/model_xml.c): each
 * input is read by both from memory (ds__artic_load_mjcf_mem / _urdf_mem:
 * the same parsing as from a file, without a file per input; a loader
 * refuses the other's root element at once); a model that loads takes two
 * steps and its adjoint, so the engine also sees every tree, mass and frame
 * the loaders let through. Built and run by scripts/fuzz-model-xml (clang,
 * -fsanitize=fuzzer,address,undefined) with the test models as seeds.
 *
 * A finding anywhere in dsim (the loaders, the builder, the engine) fails
 * the run; libxml2 is not instrumented. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsim/artic.h"
#include "dsim/base.h"
#include "io/model_xml.h"

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc;
  (void)argv;
  ds_set_memory_limit((size_t)256 << 20);
  return 0;
}

static void run(const dsArticModel* m) {
  enum { T = 2 };
  dsArticData* d = NULL;
  if (ds_artic_data_create(m, T, &d)) return;
  const int nu = ds_artic_nu(m), nq = ds_artic_nq(m), nv = ds_artic_nv(m), np = ds_artic_nparam(m);
  double* u = calloc((size_t)nu + 1, sizeof *u);
  double* gq = calloc((size_t)nq + 1, sizeof *gq);
  double* gp = calloc((size_t)np + 1, sizeof *gp);
  double* dq = calloc((size_t)(T + 1) * (size_t)nq + 1, sizeof *dq);
  if (u && gq && gp && dq && ds_artic_reset(m, d, NULL, NULL) == 0) {
    for (int i = 0; i < nu; i++) u[i] = 0.5;
    for (int i = 0; i < (T + 1) * nq; i++) dq[i] = 1;
    int t = 0;
    while (t < T && ds_artic_step(m, d, u) == 0) t++;
    dsArticGrad g = {gq, NULL, NULL, gp};
    (void)ds_artic_backward(m, d, dq, NULL, &g);
    (void)nv;
  }
  free(u), free(gq), free(gp), free(dq);
  ds_artic_data_free(d);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char err[1024];
  for (int urdf = 0; urdf < 2; urdf++) {
    dsArticModel* m = NULL;
    int rc = urdf ? ds__artic_load_urdf_mem((const char*)data, size, "fuzz", NULL, &m, err, sizeof err)
                  : ds__artic_load_mjcf_mem((const char*)data, size, "fuzz", NULL, &m, err, sizeof err);
    if (rc == 0) {
      run(m);
      ds_artic_model_free(m);
    } else {
      (void)strlen(err); /* the message is a terminated string */
    }
  }
  return 0;
}
