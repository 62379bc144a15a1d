/* Material fields in sysid (controllers/sysid_field.c): the element graph
 * of a per-element parameter, the regions of a true field, the smoothness
 * regulariser and the field error. Internal to controllers/. */
#ifndef DSIM_CONTROLLERS_SYSID_FIELD_H
#define DSIM_CONTROLLERS_SYSID_FIELD_H

#include <stddef.h>

#include "dsim/env.h"
#include "dsim/sysid.h"

/* The elements of engine array `name` (tet.*, tri.*, spring.*, particle.*)
 * that share a face (tets), an edge (triangles), a particle (springs), or a
 * spring, triangle or tet edge (particles): *edges (2 x *nedge, i < j, each
 * pair once; free with ds__free). DS_ERR_CONFIG naming `key` for other
 * arrays. */
int ds__sysid_field_graph(const dsEnv* env, const char* name, const char* key, int** edges, int* nedge, char* err,
                          size_t errlen);
/* Region of every element of `name` under field f (nelem values into
 * region); errors name `key`. *nregion gets the number of regions. */
int ds__sysid_field_regions(const dsEnv* env, const char* name, const dsSysidField* f, const char* key, int* region,
                            int nelem, int* nregion, char* err, size_t errlen);
/* The regulariser of dsSysidParam (tv, tv_eps, laplacian) over edges at u
 * (skip: values not identified, may be NULL): returns R and adds dR/du to
 * g (may be NULL). */
double ds__sysid_field_reg(const int* edges, int nedge, const double* u, const unsigned char* skip, double tv,
                           double eps, double laplacian, double* g);

/* The "sysid" section of a config's text into *d (holding the defaults),
 * sysid.stages included, without ds_sysid_def_validate (a caller may still
 * apply --set): what ds_sysid_def_from_text does before validating. */
int ds__sysid_parse_section(const char* name, const char* text, dsSysidDef* d, char* err, size_t errlen);

#endif
