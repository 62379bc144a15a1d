/* dsim meshes: pure geometry on arrays, no physics. Readers (Wavefront OBJ,
 * TetGen .node/.ele), generators (cloth grid, tet box, gear, walker) and
 * topology helpers (boundary surface, lumped mass, bending edges). The
 * physics model is built from a dsMesh; nothing here knows about it.
 *
 * Every array of a dsMesh is allocated with the library allocator (see
 * ds_replace_allocator) and released with ds_mesh_free. Functions that fill
 * a dsMesh* out leave it untouched when they fail. */
#ifndef DSIM_MESH_H
#define DSIM_MESH_H

#include <stddef.h>

#include "dsim/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct dsMesh {
  int nvert;      /* vertices */
  dsReal* x;      /* nvert x 3 positions, m */
  int ntri;       /* triangles */
  int* tri;       /* ntri x 3 vertex indices; for closed surfaces counter-clockwise seen from outside */
  int ntet;       /* tetrahedra */
  int* tet;       /* ntet x 4 vertex indices with positive orientation: ((x1-x0)x(x2-x0)).(x3-x0) > 0 */
} dsMesh;

/* Frees the arrays (allocated with the library allocator) and zeroes *m. NULL-safe. */
DS_API void ds_mesh_free(dsMesh* m);
/* Allocate zero-filled x (nvert x 3), tri (ntri x 3) and tet (ntet x 4) into
 * *m (zero counts give NULL arrays) and set the counts: the start of a mesh
 * built in code. On failure frees what it allocated, leaves *m zeroed and
 * returns DS_ERR_NOMEM (DS_ERR_INVALID for negative counts or sizes that
 * overflow). */
DS_API int ds_mesh_alloc(dsMesh* m, int nvert, int ntri, int ntet);
/* Signed volume of the tet (a, b, c, d): ((b-a)x(c-a)).(d-a) / 6, in double
 * (positive for the orientation the engine expects). */
DS_API double ds_tet_signed_volume(const dsReal a[3], const dsReal b[3], const dsReal c[3], const dsReal d[3]);
/* Twice the area of the triangle (a, b, c): |(b-a)x(c-a)|, in double. */
DS_API double ds_tri_area2(const dsReal a[3], const dsReal b[3], const dsReal c[3]);
/* Squared diagonal of the bounding box of the nvert points x (0 when empty):
 * the scale against which degenerate elements are judged. */
DS_API double ds_bbox_diag2(const dsReal* x, int nvert);

/* Validation: counts >= 0 and arrays present, indices in range, no repeated
 * index inside an element, finite coordinates, no degenerate triangle
 * (area <= 1e-12 * bbox^2, bbox = diagonal of the bounding box) and no tet of
 * signed volume <= 0. On failure writes a message naming the element and its
 * value ("tet 12: signed volume -0.0417 <= 0") into err (errlen bytes; err
 * may be NULL) and returns DS_ERR_MESH (DS_ERR_INVALID for m == NULL). */
DS_API int ds_mesh_validate(const dsMesh* m, char* err, size_t errlen);

/* ---- readers ---------------------------------------------------------------
 * Errors name the file and line: "mesh.obj:12: face index 40 out of range
 * (1..38)". Missing/unreadable file: DS_ERR_IO; malformed content:
 * DS_ERR_PARSE; well-formed but invalid geometry (repeated vertex in an
 * element, degenerate triangle, inverted tet): DS_ERR_MESH; allocation
 * failure: DS_ERR_NOMEM. Nothing leaks on any path; *out is untouched on
 * failure. */

/* Wavefront OBJ: v and f lines (f with v, v/vt, v/vt/vn, v//vn; negative
 * (relative) indices; polygons fan-triangulated). Comments and vn/vt/vp/o/g/
 * s/usemtl/mtllib/l/p lines are ignored; any other statement is DS_ERR_PARSE.
 * A face may only refer to vertices defined above it. Fills x and tri
 * (ntet = 0). */
DS_API int ds_mesh_read_obj(const char* path, dsMesh* out, char* err, size_t errlen);

/* TetGen .node + .ele (0- or 1-based numbering as the first node of the
 * .node file says; node and tet numbers must then be consecutive; attributes
 * and boundary markers are checked for presence and ignored; '#' comments).
 * Validates counts, indices, dimension 3, nodes per tet 4; an inverted tet
 * (signed volume <= 0, see dsMesh) is reported by its line and number, never
 * flipped. The boundary surface is not computed here (ntri = 0; call
 * ds_mesh_extract_boundary). */
DS_API int ds_mesh_read_tetgen(const char* node_path, const char* ele_path, dsMesh* out, char* err,
                               size_t errlen);

/* ---- generators ------------------------------------------------------------ */

/* Cloth: nx x ny cells of size `cell` in the xy plane starting at the origin:
 * (nx+1)(ny+1) vertices, vertex (i, j) at index j*(nx+1) + i and position
 * (i*cell, j*cell, 0); 2*nx*ny triangles, cell (i, j) split along its
 * diagonal from (i, j) to (i+1, j+1), all counter-clockwise seen from +z
 * (normal +z). DS_ERR_INVALID for nx, ny < 1, cell <= 0 or a size overflow. */
DS_API int ds_mesh_cloth_grid(int nx, int ny, dsReal cell, dsMesh* out);

/* Box of nx*ny*nz hexahedral cells of size (hx,hy,hz) from the origin:
 * (nx+1)(ny+1)(nz+1) vertices, vertex (i,j,k) at index
 * (k*(ny+1) + j)*(nx+1) + i; each cell split into 6 tets around its main
 * diagonal (Kuhn/Freudenthal split: every cell is split the same way, so
 * the faces of neighbouring cells conform), all positively oriented:
 * 6*nx*ny*nz tets. tri = outward boundary (4*(nx*ny + ny*nz + nx*nz)
 * triangles). Beams are boxes. */
DS_API int ds_mesh_tet_grid(int nx, int ny, int nz, dsReal hx, dsReal hy, dsReal hz, dsMesh* out);

/* Replace m->tri with the boundary faces of m->tet (faces used by exactly
 * one tet), oriented outward (counter-clockwise seen from outside for
 * positively oriented tets). Order: by tet index, then by the local face
 * opposite vertex 0, 1, 2, 3. A face shared by 3 or more tets is
 * DS_ERR_MESH; m is unchanged on failure. A mesh is a plain struct with no
 * room for a message: as for every call without an object, the message
 * ("face (3, 7, 9) is shared by 3 tets") goes to the caller's err (errlen
 * bytes; err may be NULL). */
DS_API int ds_mesh_extract_boundary(dsMesh* m, char* err, size_t errlen);

/* mass[i] = density * sum over tets containing i of V/4 (lumped), V the
 * signed volume; mass has nvert entries (all written). DS_ERR_MESH when a
 * tet has V <= 0 or an index out of range, DS_ERR_INVALID for NULL. */
DS_API int ds_mesh_lumped_mass(const dsMesh* m, dsReal density, dsReal* mass);

/* Interior edges of the triangle surface m->tri, each as 4 indices
 * (x1, x2, x3, x4): x3-x4 the shared edge, x1 and x2 the opposite vertices of
 * its two triangles. With FORMULAS.md "Dihedral bending"
 *   n1 = (x3-x1)x(x4-x1), n2 = (x4-x2)x(x3-x2), e = x4-x3,
 *   theta = atan2((n2^ x n1^).e^, n1^.n2^),
 * theta of a flat sheet is 0 (x1 and x2 lie on opposite sides of the edge
 * in its plane, so n1 and n2 point the same way). Ordering: the triangle of
 * lower index is "triangle 1": x1 is its opposite vertex and x3 -> x4 the
 * direction in which it traverses the edge, so n1 is that triangle's own
 * normal (for a consistently oriented surface also triangle 2's). Then
 * theta > 0 when the surface folds towards its normal (x2 moves to the side
 * n1 points to), theta < 0 when it folds away.
 * Edges are listed in increasing order of (min vertex, max vertex) of x3-x4.
 * *edges (4 * *nedge ints) is allocated with the library allocator (free
 * with ds_mesh_free_ints); *edges = NULL when there are none. An edge shared
 * by 3+ triangles is DS_ERR_MESH naming it (in err, errlen bytes, may be
 * NULL); outputs untouched on failure. */
DS_API int ds_mesh_bending_edges(const dsMesh* m, int* nedge, int** edges, char* err, size_t errlen);
DS_API void ds_mesh_free_ints(int* p);

/* Rigid placement. Rotation is about the origin (apply it before
 * ds_mesh_translate to place a mesh built around the origin), by `angle`
 * (rad, right-handed) about `axis`, which is normalised inside (the docs/scenes.md
 * fix). DS_ERR_INVALID for a zero or non-finite axis. */
DS_API void ds_mesh_translate(dsMesh* m, const dsReal t[3]);
DS_API int ds_mesh_rotate(dsMesh* m, const dsReal axis[3], dsReal angle);
/* Mean of the vertices ((0,0,0) for an empty mesh). */
DS_API void ds_mesh_centroid(const dsMesh* m, dsReal c[3]);

#ifdef __cplusplus
}
#endif
#endif
