/* The camera simulator on an env (dsim/env.h ds_env_camsim_*): the view and
 * mesh the env's own renderer draws, filmed by the other pipeline
 * (render/footage.c). */
#include "config.h"

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
