/* Environments: internals shared by envs/env.c (episode, gradients),
 * envs/env_scene.c (scene construction) and envs/env_config.c (JSON
 * tables). Not installed. */
#ifndef DSIM_ENVS_ENV_PRIV_H
#define DSIM_ENVS_ENV_PRIV_H

#include <stdint.h>

#include "dsim/engine.h"
#include "dsim/env.h"
#include "dsim/raster.h"
#include "base/internal.h"
#include "base/rng.h"

struct dsEnv {
  dsEnvDef def;
  dsErrBuf err;
  char* config_text;  /* JSON the env was made from */

  /* sized objects (rebuilt together for a new cloth size) */
  dsModel* m;
  dsData* d;
  dsGrad* g;
  dsRaster* r;
  dsImageLoss* il;     /* frame loss against the goal image */
  dsReal* face_colors;  /* nface x 3 */
  dsReal* goal_x;       /* goal state positions, nparticle x 3 */
  dsReal* frame_x;      /* positions of every scheduled frame, nframe x n3 */
  dsReal* frame_loss;   /* image loss of every frame rendered, nframe */
  dsReal* step_x;       /* positions at every step end, nstep x n3 */
  dsReal* step_v;       /* velocities at every step end, nstep x n3 */
  dsReal* actions;      /* nstep x adim */
  dsReal* sub_x;        /* walker-springs: positions at the start of every substep, T x n3 */
  dsReal* adj_act;      /* scratch: nact */
  dsReal* adj_fext;     /* scratch: n3 */
  dsReal* tmp3;         /* scratch: n3 */
  dsReal* cloth_base;   /* cloth: rest positions at drop height 0, n3 */
  int cloth_D;          /* cells per side of the built cloth */

  /* size-independent buffers */
  dsReal* goal_img;     /* h x w x 4 */
  dsReal* img;          /* h x w x 4 scratch */
  dsReal* img_grad;     /* h x w x 4 scratch */
  int* frame_at;        /* substep 0..T -> frame index or -1 */
  int* frame_t;         /* frame index -> substep */

  int np, n3, adim, odim, nstep, nframe, T, C, R;

  /* episode */
  int have_episode;     /* a reset happened */
  int have_goal;        /* goal image valid for goal_seed */
  uint64_t goal_seed;
  int failed;           /* the simulation diverged: reset needed */
  dsReal target[3];     /* target centre of mass, m */
  dsReal com0[3];       /* centre of mass at substep 0 */
  dsReal cloth_h;       /* drawn drop height */
  int did_backward;
};

/* env_scene.c: build the model of the definition (cloth: D cells per side,
 * drop height h) and the per-kind rest placement; fills e->m. */
int ds__env_build_model(dsEnv* e, int cloth_D, dsReal cloth_h, dsModel** out);
/* Cloth rest positions for size D, height h into x ((D+1)^2 x 3). */
int ds__env_cloth_positions(const dsEnvDef* def, int D, dsReal h, dsReal* x);
/* Validate cross-field constraints; message into eb. */
int ds__env_validate_def(const dsEnvDef* def, dsErrBuf* eb);

/* env_config.c */
int ds__env_parse(const char* name, const char* text, dsEnvDef* def, dsErrBuf* eb);

#endif
