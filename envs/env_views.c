/* Other views of an env's scene (dsim/env.h dsEnvView): the env's mesh
 * drawn from another camera with the env's render settings, and its
 * adjoint with respect to the positions and the camera, for code above the
 * renderer (sysid's several views and camera calibration,
 * controllers/sysid_views.c).
 *
 * A camera's values map onto the renderer's dsCamera as eye = position,
 * at = look_at, up = +y, fov_deg = fov, and fx, fy, cx, cy; its adjoint is
 * the renderer's (render/raster.c camera_adjoint: the chain rule through
 * X = (p - eye).x_c, Y = (p - eye).y_c, Z = (p - eye).z_c with
 * z_c = unit(at - eye), x_c = unit(up x z_c), y_c = z_c x x_c, then
 * px = ax X/Z + ox, py = ay Y/Z + oy with ax, ay, ox, oy from the fov or
 * the intrinsics), read back in the same order. */
#include "config.h"

#include <string.h>

#include "envs/env_priv.h"

struct dsEnvView {
  dsRaster* r;
  dsCamera cam;   /* the current camera */
  dsErrBuf err;
};

/* values -> the renderer's camera (base: the env's, for the planes) */
static dsCamera to_camera(const dsCamera* base, const dsReal* v) {
  dsCamera c = *base;
  for (int k = 0; k < 3; k++) {
    c.eye[k] = v[k];
    c.at[k] = v[3 + k];
    c.up[k] = (dsReal)(k == 1);
  }
  c.orthographic = 0;
  c.fov_deg = v[6] > 0 ? v[6] : base->fov_deg;
  c.fx = v[7] > 0 ? v[7] : 0;
  c.fy = v[7] > 0 ? v[8] : 0;
  c.cx = v[7] > 0 ? v[9] : 0;
  c.cy = v[7] > 0 ? v[10] : 0;
  return c;
}

int ds_env_camera(const dsEnv* e, dsReal cam[DS_ENV_CAMERA_NVAL]) {
  if (!e || !cam || !e->r) return DS_ERR_INVALID;
  const dsCamera* c = &ds_raster_settings(e->r)->camera;
  for (int k = 0; k < 3; k++) {
    cam[k] = c->eye[k];
    cam[3 + k] = c->at[k];
  }
  cam[6] = c->fx > 0 ? 0 : c->fov_deg;
  cam[7] = c->fx, cam[8] = c->fy, cam[9] = c->cx, cam[10] = c->cy;
  return 0;
}

int ds_env_view_create(const dsEnv* e, const dsReal cam[DS_ENV_CAMERA_NVAL], dsEnvView** out, char* err,
                       size_t errlen) {
  if (!e || !cam || !out || !e->r) return ds__puterr(err, errlen, DS_ERR_INVALID, "env view: NULL argument");
  *out = NULL;
  dsRenderSettings s = *ds_raster_settings(e->r);
  s.camera = to_camera(&s.camera, cam);
  int rc = ds_render_settings_check(&s, err, errlen);
  if (rc) return rc;
  dsEnvView* v = (dsEnvView*)ds__calloc(1, sizeof *v);
  if (!v) return ds__puterr(err, errlen, DS_ERR_NOMEM, "env view: out of memory");
  rc = ds_raster_create(&v->r, &s, e->m->nface, e->m->nparticle);
  if (rc) {
    ds__free(v);
    return ds__puterr(err, errlen, rc, "env view: cannot create its renderer (%s)", ds_strerror(rc));
  }
  v->cam = s.camera;
  *out = v;
  return 0;
}

void ds_env_view_destroy(dsEnvView* v) {
  if (!v) return;
  ds_raster_destroy(v->r);
  ds__free(v);
}

const char* ds_env_view_last_error(const dsEnvView* v) { return v ? ds__errmsg(&v->err) : ""; }

int ds_env_view_set_camera(dsEnvView* v, const dsReal cam[DS_ENV_CAMERA_NVAL]) {
  if (!v || !cam) return DS_ERR_INVALID;
  dsCamera c = to_camera(&v->cam, cam);
  int rc = ds_raster_set_camera(v->r, &c);
  if (rc) return ds__seterr(&v->err, rc, "camera: %s", ds_raster_last_error(v->r));
  v->cam = c;
  ds__clearerr(&v->err);
  return 0;
}

int ds_env_view_render(dsEnvView* v, const dsEnv* e, const dsReal* x, dsReal* image) {
  if (!v || !e || !x) return DS_ERR_INVALID;
  dsRasterMesh rm = ds__env_raster_mesh(e, x);
  int rc = ds_raster_render(v->r, &rm, image);
  if (rc) return ds__seterr(&v->err, rc, "render: %s", ds_raster_last_error(v->r));
  ds__clearerr(&v->err);
  return 0;
}

int ds_env_view_backward(dsEnvView* v, const dsEnv* e, const dsReal* x, const dsReal* d_image, dsReal* d_x,
                         dsReal* d_cam) {
  if (!v || !e || !x || !d_image) return DS_ERR_INVALID;
  dsRasterMesh rm = ds__env_raster_mesh(e, x);
  dsCamera dc;
  memset(&dc, 0, sizeof dc);
  int rc = ds_raster_backward_camera(v->r, &rm, d_image, d_x, NULL, d_cam ? &dc : NULL);
  if (rc) return ds__seterr(&v->err, rc, "backward: %s", ds_raster_last_error(v->r));
  if (d_cam) {
    for (int k = 0; k < 3; k++) {
      d_cam[k] += dc.eye[k];
      d_cam[3 + k] += dc.at[k];
    }
    d_cam[6] += dc.fov_deg;
    d_cam[7] += dc.fx, d_cam[8] += dc.fy, d_cam[9] += dc.cx, d_cam[10] += dc.cy;
  }
  ds__clearerr(&v->err);
  return 0;
}
