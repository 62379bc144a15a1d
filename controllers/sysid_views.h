/* Several views and camera calibration in sysid (controllers/sysid_views.c):
 * the episode's particle positions drawn by one renderer per view, the
 * image losses summed over the views, their adjoints back to the positions
 * (through the env's state adjoints) and to each camera (camera.position,
 * camera.look_at, camera.fov, camera.fx ... as sysid parameters). Internal
 * to controllers/. */
#ifndef DSIM_CONTROLLERS_SYSID_VIEWS_H
#define DSIM_CONTROLLERS_SYSID_VIEWS_H

#include <stddef.h>

#include "dsim/env.h"
#include "base/internal.h"
#include "dsim/sysid.h"

/* per view: position (3), look_at (3), fov, fx, fy, cx, cy (dsim/env.h's camera values) */
#define DS__VIEW_NVAL DS_ENV_CAMERA_NVAL

typedef struct dsSysidViewSet dsSysidViewSet;

/* 1 when the identification needs the views path: sysid.cameras, a video
 * of several views, or a camera parameter. */
int ds__sysid_views_wanted(const dsSysidDef* def, const dsSysidVideo* video);
/* 1 when name is a camera parameter ("camera.position", "camera2.fx", ...). */
int ds__sysid_is_camera_param(const char* name);

/* For env (created with observation.state full): the views of video (when
 * it has several), else def's sysid.cameras, else the env's camera; one
 * renderer each with the env's settings; buffers for nstep steps and
 * nframes frames. Errors name the key or file. */
int ds__sysid_views_create(dsSysidViewSet** out, dsEnv* env, const dsSysidDef* def, const dsSysidVideo* video,
                           int nstep, int nframes, char* err, size_t errlen);
void ds__sysid_views_destroy(dsSysidViewSet* vs);
int ds__sysid_views_count(const dsSysidViewSet* vs);
/* view v's camera values now (dsim/sysid.h ds_sysid_view) */
int ds__sysid_views_get(const dsSysidViewSet* vs, int v, dsSysidView* out);

/* A camera parameter's current values (*value, n of them, writable: the
 * next episode uses them) and its gradient after the last evaluation.
 * DS_ERR_NOTFOUND when name is no camera parameter of these views. */
int ds__sysid_views_param(dsSysidViewSet* vs, const char* name, dsReal** value, const dsReal** grad, int* n);

/* What an episode needs of the identification. */
typedef struct dsSysidViewsEp {
  const dsReal* action;   /* held at every step */
  const int* step_frame;  /* step -> frame or -1 */
  const int* fstep;       /* frame -> step */
  const int* used;        /* frame enters the loss */
  int nused;
  dsImageLoss* il;        /* the stage's loss, NULL: the env's */
  dsReal* rendered;       /* out: view 0's frames (nframes x npix) */
} dsSysidViewsEp;

/* Steps the env (already reset and given its parameters) through the
 * episode, keeping the positions of every frame. making: render every
 * view's frames as the target video. Otherwise *loss = sum over views v
 * and used frames f of loss(image_vf, goal_vf) / nused; with want_grad
 * also backward: the env's parameter gradients (ds_env_param_grad) and the
 * camera parameters' (ds__sysid_views_param). Errors go to eb. */
int ds__sysid_views_episode(dsSysidViewSet* vs, dsEnv* env, const dsSysidViewsEp* ep, int making, int want_grad,
                            double* loss, dsErrBuf* eb);
/* The target: footage (video: nviews x nframes frames, or one view's) or
 * the frames the last making episode rendered stay as they are (video NULL). */
void ds__sysid_views_set_goal(dsSysidViewSet* vs, const dsSysidVideo* video);
/* The first view's image of the env's current state (the initial frame). */
int ds__sysid_views_render(dsSysidViewSet* vs, dsEnv* env, dsReal* image, dsErrBuf* eb);

/* sysid.cameras (a list of objects) of a config's text into def->views;
 * *rest (ds__free) the text without it, NULL when it is absent. Errors
 * name the entry's index and key ("sysid.cameras[1]: \"look_at\" is
 * required"). */
int ds__sysid_parse_cameras(const char* name, const char* text, dsSysidDef* def, char** rest, char* err,
                            size_t errlen);

#endif
