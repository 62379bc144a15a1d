/* The camera simulator on an env (dsim/env.h ds_env_camsim_*): the view and
 * mesh the env's own renderer draws, filmed by the other pipeline
 * (render/footage.c). */
#include "config.h"

#include <math.h>

#include "envs/env_priv.h"

int ds_env_camsim_create(const dsEnv* e, const dsCamSimDef* def, dsCamSim** out, char* err, size_t errlen) {
  if (!e || !def || !out) return DS_ERR_INVALID;
  dsCamSimDef d = *def;
  const dsRenderSettings* rs = ds_raster_settings(e->r);
  d.width = rs->width;
  d.height = rs->height;
  d.camera = rs->camera;
  return ds_camsim_create(out, &d, e->m->nface, err, errlen);
}

int ds_env_camsim_render(dsEnv* e, dsCamSim* c, dsReal light, uint64_t noise_seed, dsReal* image) {
  if (!e || !c || !image) return DS_ERR_INVALID;
  const dsRasterMesh rm = ds__env_raster_mesh(e, e->d->x);
  int rc = ds_camsim_render(c, &rm, light, noise_seed, image);
  if (rc) return ds__seterr(&e->err, rc, "camera simulator: %s", ds_strerror(rc));
  return 0;
}

int ds_env_camsim_paint_faces(dsEnv* e) {
  if (!e) return DS_ERR_INVALID;
  if (e->cls->sim) return ds__seterr(&e->err, DS_ERR_UNSUPPORTED, "paint faces: the %s env renders itself", e->cls->name);
  const dsRasterMesh rm = ds__env_raster_mesh(e, e->d->x);
  for (int f = 0; f < rm.nface; f++) {
    const dsReal* p[3];
    for (int i = 0; i < 3; i++) p[i] = rm.verts + 3 * rm.faces[3 * f + i];
    double a[3], b[3], n[3];
    for (int k = 0; k < 3; k++) a[k] = (double)p[1][k] - p[0][k], b[k] = (double)p[2][k] - p[0][k];
    n[0] = fabs(a[1] * b[2] - a[2] * b[1]);
    n[1] = fabs(a[2] * b[0] - a[0] * b[2]);
    n[2] = fabs(a[0] * b[1] - a[1] * b[0]);
    const int axis = n[0] >= n[1] && n[0] >= n[2] ? 0 : n[1] >= n[2] ? 1 : 2;
    for (int k = 0; k < 3; k++) e->face_colors[3 * f + k] = k == axis;
  }
  return 0;
}
