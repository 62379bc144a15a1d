/* libFuzzer harness for the mesh readers that configs reach (io/mesh_obj.c:
 * `obstacle.mesh`, scene meshes; io/mesh_tetgen.c: tet meshes) and what runs
 * on a mesh they accept. The first byte picks the reader:
 *   even: Wavefront OBJ, the rest of the input is the file;
 *   odd:  TetGen, the rest is the .node file, a NUL, then the .ele file.
 * The readers take paths, so each input is written to files in a private
 * temporary folder (made once). An accepted OBJ is voxelised on a 3-D and
 * a 2-D grid (engine/fluid_voxel.c, as `obstacle.mesh` does) and checked by
 * ds_mesh_validate; an accepted tet mesh gets its boundary, lumped masses
 * and bending edges (engine/mesh.c). Built and run by scripts/fuzz-mesh
 * (clang, -fsanitize=fuzzer,address,undefined) with the bundled meshes and
 * small hand-written files as seeds. A finding anywhere in dsim fails the
 * run. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dsim/base.h"
#include "dsim/fluid.h"
#include "dsim/mesh.h"

static char g_dir[64], g_obj[96], g_node[96], g_ele[96];

static void cleanup(void) {
  remove(g_obj);
  remove(g_node);
  remove(g_ele);
  rmdir(g_dir);
}

int LLVMFuzzerInitialize(int* argc, char*** argv) {
  (void)argc;
  (void)argv;
  ds_set_memory_limit((size_t)256 << 20);
  const char* tmp = getenv("TMPDIR");
  snprintf(g_dir, sizeof g_dir, "%s/dsim-fuzz-mesh-XXXXXX", tmp && strlen(tmp) < 32 ? tmp : "/tmp");
  if (!mkdtemp(g_dir)) abort();
  snprintf(g_obj, sizeof g_obj, "%s/m.obj", g_dir);
  snprintf(g_node, sizeof g_node, "%s/m.node", g_dir);
  snprintf(g_ele, sizeof g_ele, "%s/m.ele", g_dir);
  atexit(cleanup);
  return 0;
}

static int put(const char* path, const uint8_t* data, size_t size) {
  FILE* f = fopen(path, "wb");
  if (!f) return -1;
  const size_t w = size ? fwrite(data, 1, size, f) : 0;
  return fclose(f) == 0 && w == size ? 0 : -1;
}

static void voxelize(const dsMesh* m) {
  double* x = malloc(sizeof(double) * 3 * (size_t)m->nvert + 1);
  if (!x) return;
  for (size_t k = 0; k < 3 * (size_t)m->nvert; k++) x[k] = (double)m->x[k];
  static const int dims[2][3] = {{8, 8, 8}, {12, 12, 1}};
  for (int g = 0; g < 2; g++) {
    dsFluidDef def;
    memset(&def, 0, sizeof def);
    memcpy(def.n, dims[g], sizeof def.n);
    def.dx = 0.25;
    unsigned char solid[8 * 8 * 8];
    char err[512];
    memset(solid, 0, sizeof solid);
    if (ds_fluid_voxelize_mesh(&def, x, m->nvert, m->tri, m->ntri, solid, err, sizeof err)) (void)strlen(err);
  }
  free(x);
}

static void tets(dsMesh* m) {
  char err[512];
  if (ds_mesh_extract_boundary(m, err, sizeof err)) return;
  dsReal* mass = malloc(sizeof(dsReal) * (size_t)m->nvert + 1);
  if (mass) (void)ds_mesh_lumped_mass(m, 1000, mass);
  free(mass);
  int ne = 0, *edges = NULL;
  if (ds_mesh_bending_edges(m, &ne, &edges, err, sizeof err) == 0) ds_mesh_free_ints(edges);
  (void)ds_mesh_validate(m, err, sizeof err);
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  char err[1024];
  dsMesh m;
  memset(&m, 0, sizeof m);
  if (!(data[0] & 1)) {
    if (put(g_obj, data + 1, size - 1)) return 0;
    if (ds_mesh_read_obj(g_obj, &m, err, sizeof err) == 0) {
      (void)ds_mesh_validate(&m, err, sizeof err);
      voxelize(&m);
      ds_mesh_free(&m);
    } else {
      (void)strlen(err); /* the message is a terminated string */
    }
    return 0;
  }
  const uint8_t* body = data + 1;
  const size_t n = size - 1;
  const uint8_t* nul = memchr(body, 0, n);
  const size_t nn = nul ? (size_t)(nul - body) : n;
  if (put(g_node, body, nn) || put(g_ele, nul ? nul + 1 : body, nul ? n - nn - 1 : 0)) return 0;
  if (ds_mesh_read_tetgen(g_node, g_ele, &m, err, sizeof err) == 0) {
    tets(&m);
    ds_mesh_free(&m);
  } else {
    (void)strlen(err);
  }
  return 0;
}
