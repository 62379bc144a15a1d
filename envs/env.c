/* Environments: episode (reset/step), observations, rewards, the built-in
 * losses and the backward pass through the engine tape and the renderer.
 *
 * This file is the part every environment shares; what differs (the scene,
 * how an action enters the physics and its adjoint, the metric) is the
 * class's (dsEnvClass, one file each: envs/walker.c, control_fem.c,
 * control_cloth.c, walker_springs.c; registry in envs/env_def.c).
 *
 * Forward. Step k covers substeps [kC, min((k+1)C, T)) with the action held:
 * before each substep s it is written into the data: into the class's block
 * of activations (act_first) or by the class's action_fwd (external forces
 * or, for an initial action, the state at s = 0). After substep s
 * the state is x_{s}; at every scheduled frame s (0 at reset) the positions
 * are kept, and the frame's image loss l_f = loss(render(x_s), goal) is
 * evaluated when something asks for it: the reward of the step that produces
 * a loss term, ds_env_loss (IMAGE_LAST: the last frame only; IMAGE_SUM:
 * each frame once). A frame no loss term weighs is never rendered during
 * the episode; a value is the same function of the kept positions whenever
 * it is evaluated, so results do not depend on when (bit for bit). The
 * positions of frames and step ends are kept so backward can re-render
 * (images are not stored).
 *
 * Backward. Any loss here is a sum of terms, each a function of the state at
 * one substep s: frame losses w_f l_f(x_s), centre-of-mass terms
 * w |com(x_s) - target|^2 and observation terms. Popping substeps from the
 * engine tape from t down to 0, the adjoints of the terms at s are added
 * into d->adj_x / d->adj_v right after the pop that made them the adjoints
 * of state s; frames are re-rendered from the kept positions and
 * backpropagated through ds_raster_backward. dL/d(action of step k) is the
 * sum over the step's substeps, after each pop, of the same block of the
 * engine's dL/d(act), or of what the class's action_bwd takes from the
 * engine's adjoints (dL/d(act), dL/d(f_ext), dL/d(state)).
 *
 * Centre of mass: com = sum_i m_i x_i / M, so dcom/dx_i = m_i/M and
 * dcom/dm_i = (x_i - com)/M (added to the particle.mass gradient). */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "envs/env_priv.h"
#include "engine/batch_priv.h"
#include "render/raster_batch.h"
#include "io/cfg.h"

/* batched frames on (ds__env_set_batched_frames) */
static int batched_frames;

/* ---- small helpers ---------------------------------------------------------- */
void ds__env_com(const dsModel* m, const dsReal* x, dsReal c[3]) {
  double s[3] = {0, 0, 0}, M = 0;
  for (int i = 0; i < m->nparticle; i++) {
    const double mi = m->mass[i];
    M += mi;
    for (int k = 0; k < 3; k++) s[k] += mi * x[3 * i + k];
  }
  for (int k = 0; k < 3; k++) c[k] = (dsReal)(M > 0 ? s[k] / M : 0);
}

void ds__mesh_center(dsMesh* mesh) {
  dsReal c[3];
  ds_mesh_centroid(mesh, c);
  c[0] = -c[0];
  c[1] = -c[1];
  c[2] = -c[2];
  ds_mesh_translate(mesh, c);
}

/* The action into the data before substep s, and its adjoint after the pop
 * of substep s: an activation block (cls->act_first) or the class's hooks. */
static void action_fwd(dsEnv* e, int k, int s, const dsReal* a) {
  if (e->cls->act_first)
    memcpy(e->d->act + e->cls->act_first(e), a, (size_t)e->adim * sizeof(dsReal));
  else
    e->cls->action_fwd(e, k, s, a);
}

static void action_bwd(dsEnv* e, int k, int s, const dsReal* a, dsReal* grad) {
  if (e->cls->act_first) {
    const dsReal* adj = e->adj_act + e->cls->act_first(e);
    for (int i = 0; i < e->adim; i++) grad[i] += adj[i];
  } else {
    e->cls->action_bwd(e, k, s, a, e->adj_act, e->adj_fext, grad);
  }
}

static dsReal total_mass(const dsModel* m) {
  double M = 0;
  for (int i = 0; i < m->nparticle; i++) M += m->mass[i];
  return (dsReal)M;
}

/* adj_x_i += w_c m_i/M, g_mass_i += w_c.(x_i - com)/M  (w: dL/dcom) */
static void com_bwd(const dsModel* m, dsGrad* g, const dsReal* x, const dsReal w[3], dsReal* adj_x) {
  dsReal c[3];
  ds__env_com(m, x, c);
  const dsReal M = total_mass(m);
  if (!(M > 0)) return;
  for (int i = 0; i < m->nparticle; i++) {
    const dsReal mi = m->mass[i] / M;
    dsReal gm = 0;
    for (int k = 0; k < 3; k++) {
      adj_x[3 * i + k] += w[k] * mi;
      gm += w[k] * (x[3 * i + k] - c[k]);
    }
    g->mass[i] += gm / M;
  }
}

static dsReal com_loss(const dsEnv* e, const dsReal* x) {
  dsReal c[3];
  ds__env_com(e->m, x, c);
  dsReal s = 0;
  for (int k = 0; k < 3; k++) s += (c[k] - e->target[k]) * (c[k] - e->target[k]);
  return s;
}

static int step_end(const dsEnv* e, int k) { return (k + 1) * e->C < e->T ? (k + 1) * e->C : e->T; }

static dsRasterMesh raster_mesh(const dsEnv* e, const dsReal* x) {
  dsRasterMesh rm;
  rm.verts = x;
  rm.nvert = e->np;
  rm.faces = e->m->face_idx;
  rm.nface = e->m->nface;
  rm.colors = e->face_colors;
  rm.color_mode = DS_COLOR_FACE;
  return rm;
}

static int render_x(dsEnv* e, const dsReal* x, dsReal* image) {
  dsRasterMesh rm = raster_mesh(e, x);
  int rc = ds_raster_render(e->r, &rm, image);
  if (rc) return ds__seterr(&e->err, rc, "render: %s", ds_raster_last_error(e->r));
  return 0;
}

static void write_obs(const dsEnv* e, const dsReal* x, const dsReal* v, dsReal* obs) {
  if (!obs) return;
  if (e->def.obs_state == DS_OBS_STATE_FULL) {
    memcpy(obs, x, (size_t)e->n3 * sizeof(dsReal));
    memcpy(obs + e->n3, v, (size_t)e->n3 * sizeof(dsReal));
  } else if (e->def.obs_state == DS_OBS_STATE_COM) {
    ds__env_com(e->m, x, obs);
    ds__env_com(e->m, v, obs + 3);
  }
}

/* ---- build / free ----------------------------------------------------------- */
static void free_sized(dsEnv* e) {
  ds__env_group_render_free(e->bgr);
  e->bgr = NULL;
  ds_bsim_free(e->bs);
  e->bs = NULL;
  ds_data_free(e->d);
  ds_grad_free(e->g);
  ds_model_free(e->m);
  ds_raster_destroy(e->r);
  ds_raster_destroy(e->r2);
  e->r2 = NULL;
  e->d = NULL;
  e->g = NULL;
  e->m = NULL;
  e->r = NULL;
  dsReal** bufs[] = {&e->face_colors, &e->goal_x, &e->x0_def, &e->frame_x, &e->frame_loss, &e->step_x,
                     &e->step_v,      &e->actions, &e->adj_act, &e->adj_fext,   &e->sink,     &e->bgrad,
                     &e->badj_act};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
    ds__free(*bufs[i]);
    *bufs[i] = NULL;
  }
  ds__free(e->frame_done);
  e->frame_done = NULL;
}

static dsReal* alloc_reals(size_t n) { return (dsReal*)ds__calloc(n ? n : 1, sizeof(dsReal)); }

/* The class's model: its build, then dt, gravity and ground contact. */
static int build_model(dsEnv* e, dsModel** out) {
  const dsEnvDef* def = &e->def;
  dsBuilder* b = NULL;
  int rc = ds_builder_create(&b);
  if (rc) return ds__seterr(&e->err, rc, "cannot create the model builder");
  rc = e->cls->build(e, b);
  if (rc >= 0) {
    ds_builder_set_gravity(b, def->gravity[0], def->gravity[1], def->gravity[2]);
    ds_builder_set_dt(b, def->dt);
    if (def->ground) {
      const dsGroundDef gd = {def->contact_ke, def->contact_kd, def->contact_kf, def->contact_mu, def->contact_skin};
      ds_builder_set_ground(b, &gd);
    } else {
      ds_builder_set_ground(b, NULL);
    }
    rc = ds_builder_finalize(b, out);
  }
  if (rc < 0 && !e->err.code) {
    const char* msg = ds_builder_last_error(b);
    ds__seterr(&e->err, rc, "%s: cannot build the model: %s", e->cls->name, msg && *msg ? msg : ds_strerror(rc));
  }
  ds_builder_free(b);
  return rc < 0 ? rc : 0;
}

/* Bytes of the env's own buffers for the built model (frames, steps, actions,
 * images), beside the engine data. */
static size_t env_buffer_bytes(const dsEnv* e) {
  const size_t n3 = 3 * (size_t)e->m->nparticle, px = (size_t)e->def.width * (size_t)e->def.height * 4;
  const size_t ss = (size_t)e->def.supersample * (size_t)e->def.supersample;
  size_t reals = (size_t)e->nframe * (n3 + 1) + 2 * (size_t)e->nstep * n3 + (size_t)e->nstep * (size_t)e->adim +
                 3 * (size_t)e->m->nface + 4 * n3 + (size_t)e->m->nact;
  return sizeof(dsReal) * (reals + px * (4 + 2 * ss));
}

/* Refuse an episode whose tape and buffers would not fit the memory bound
 * (ds_memory_limit): say how much it needs and which key to change. */
static int check_memory(dsEnv* e, const dsDataDef* dd) {
  const size_t data = ds_data_bytes_needed(e->m, dd), need = data + env_buffer_bytes(e), lim = ds_memory_limit();
  if (need <= lim) return 0;
  char a[32], b[32], c[32];
  const int K = dd->checkpoint_every > 1 ? dd->checkpoint_every : 1;
  if (K == 1) {
    /* the checkpointed tape of about sqrt(T) states */
    dsDataDef ck = *dd;
    int k = 1;
    while ((long)k * k < e->T) k++;
    ck.checkpoint_every = k;
    const size_t with = ds_data_bytes_needed(e->m, &ck) + env_buffer_bytes(e);
    return ds__seterr(&e->err, DS_ERR_NOMEM,
                      "%s: the episode needs %s of memory (a tape of every state: %d substeps x %d particles), more "
                      "than dsim may use, %s (%s); set "
                      "env.physics.checkpoint_every (e.g. %d: about %s) or lower env.physics.substeps",
                      e->cls->name, ds_format_size(need, a, sizeof a), e->T, e->m->nparticle,
                      ds_format_size(lim, b, sizeof b), ds_memory_limit_source(), k, ds_format_size(with, c, sizeof c));
  }
  return ds__seterr(&e->err, DS_ERR_NOMEM,
                    "%s: the episode needs %s of memory (%d substeps x %d particles, a checkpoint every %d), more "
                    "than dsim may use, %s (%s); lower "
                    "env.physics.substeps or the mesh size",
                    e->cls->name, ds_format_size(need, a, sizeof a), e->T, e->m->nparticle, K,
                    ds_format_size(lim, b, sizeof b), ds_memory_limit_source());
}

/* Model, data, gradient, renderer and every buffer sized by the model. */
static int build_sized(dsEnv* e) {
  const dsEnvDef* def = &e->def;
  free_sized(e);
  int rc = build_model(e, &e->m);
  if (rc) return rc;
  const dsModel* m = e->m;
  e->np = m->nparticle;
  e->n3 = 3 * m->nparticle;
  e->adim = e->cls->action_size(e);
  if (e->adim < 0) return ds__seterr(&e->err, DS_ERR_INVALID, "%s: bad action size %d", e->cls->name, e->adim);
  e->odim = def->obs_state == DS_OBS_STATE_FULL ? 2 * e->n3 : def->obs_state == DS_OBS_STATE_COM ? 6 : 0;
  const int batched = def->device.kind == DS_DEVICE_CUDA || def->batch_engine;
  if (batched && (!e->cls->act_first || m->nbody || e->cls->uses_external_force)) {
    char dn[32];
    return ds__seterr(&e->err, DS_ERR_UNSUPPORTED,
                      "%s: runs on the CPU engine only, not on %s%s: its actions enter the physics through %s, and "
                      "the batched engine takes actions as activations only; use device cpu",
                      e->cls->name, ds_device_name(def->device, dn, sizeof dn),
                      def->device.kind == DS_DEVICE_CUDA ? "" : " (the batched engine)",
                      m->nbody ? "rigid bodies" : "the class's own hook (velocities or external forces)");
  }
  dsDataDef dd = ds_default_data_def();
  dd.max_substeps = def->gradients && !batched ? e->T : 0; /* forward only, or a mirror: no tape */
  dd.checkpoint_every = def->checkpoint_every;
  dd.act_records = e->nstep + 1;
  dd.fext_records = e->cls->uses_external_force ? e->T : 1;
  if ((rc = check_memory(e, &dd))) return rc;
  rc = ds_data_create(m, &dd, &e->d);
  if (rc) return ds__seterr(&e->err, rc, "cannot create the simulation data (%s)", ds_strerror(rc));
  if (batched && !e->bs_member) {
    dsBatchSimDef bd = ds_default_batch_sim_def();
    bd.batch = 1;
    bd.max_substeps = def->gradients ? e->T : 0;
    bd.checkpoint_every = def->checkpoint_every;
    bd.act_records = e->nstep + 1;
    bd.fext_records = 1;
    bd.device = def->device;
    char why[DS_ERRMSG_LEN], dn[32];
    rc = ds_bsim_create(m, &bd, &e->bs, why, sizeof why);
    if (rc)
      return ds__seterr(&e->err, rc, "%s: the batched engine on %s: %s", e->cls->name,
                        ds_device_name(def->device, dn, sizeof dn), why);
  }
  if (batched) { /* gradient scratch (a member's backward runs in its batch's group) */
    int most = 1;
    for (int k = 0; k < ds_param_count(); k++) {
      const dsReal* p;
      int n;
      if (!ds_model_param(m, ds_param_name(k), &p, &n) && n > most) most = n;
    }
    e->bgrad = alloc_reals((size_t)most);
    e->badj_act = alloc_reals((size_t)m->nact);
    if (!e->bgrad || !e->badj_act) return ds__seterr(&e->err, DS_ERR_NOMEM, "out of memory");
  }
  rc = ds_grad_create(m, &e->g);
  if (rc) return ds__seterr(&e->err, rc, "cannot create the gradient (%s)", ds_strerror(rc));
  dsRenderSettings s = ds_default_render_settings();
  s.width = def->width;
  s.height = def->height;
  s.supersample = def->supersample;
  s.sigma = def->sigma;
  s.gamma = def->gamma;
  s.ambient = def->ambient;
  s.directional = def->directional;
  rc = ds_camera_look_at(&s.camera, def->cam_distance, def->cam_elevation, def->cam_azimuth);
  if (rc) return ds__seterr(&e->err, rc, "camera: invalid view (distance %g, elevation %g)", (double)def->cam_distance,
                            (double)def->cam_elevation);
  for (int k = 0; k < 3; k++) s.light_dir[k] = def->light_dir[k]; /* 0, 0, 0: a headlight */
  s.camera.fov_deg = def->cam_fov;
  s.camera.znear = def->cam_near;
  s.camera.zfar = def->cam_far;
  char why[256];
  if (ds_render_settings_check(&s, why, sizeof why))
    return ds__seterr(&e->err, DS_ERR_INVALID, "%s: %s", e->cls->name, why);
  rc = ds_raster_create(&e->r, &s, m->nface, m->nparticle);
  if (rc) return ds__seterr(&e->err, rc, "cannot create the renderer (%s)", ds_strerror(rc));
  if (def->cam2) {
    rc = ds_camera_look_at(&s.camera, def->cam2_distance, def->cam2_elevation, def->cam2_azimuth);
    if (rc)
      return ds__seterr(&e->err, rc, "camera2: invalid view (distance %g, elevation %g)", (double)def->cam2_distance,
                        (double)def->cam2_elevation);
    if (ds_render_settings_check(&s, why, sizeof why))
      return ds__seterr(&e->err, DS_ERR_INVALID, "%s: camera2: %s", e->cls->name, why);
    rc = ds_raster_create(&e->r2, &s, m->nface, m->nparticle);
    if (rc) return ds__seterr(&e->err, rc, "cannot create the second view's renderer (%s)", ds_strerror(rc));
  }
  const size_t n3 = (size_t)e->n3;
  e->face_colors = alloc_reals(3 * (size_t)m->nface);
  e->goal_x = alloc_reals(n3);
  e->x0_def = alloc_reals(n3);
  e->frame_x = alloc_reals((size_t)e->nframe * n3);
  e->frame_loss = alloc_reals((size_t)e->nframe);
  e->frame_done = (unsigned char*)ds__calloc((size_t)e->nframe + 1, 1);
  e->step_x = alloc_reals((size_t)e->nstep * n3);
  e->step_v = alloc_reals((size_t)e->nstep * n3);
  e->actions = alloc_reals((size_t)e->nstep * (size_t)e->adim);
  e->adj_act = alloc_reals((size_t)m->nact);
  e->adj_fext = alloc_reals(n3);
  e->sink = alloc_reals((size_t)e->adim);
  if (!e->face_colors || !e->goal_x || !e->x0_def || !e->frame_x || !e->frame_loss || !e->frame_done || !e->step_x ||
      !e->step_v || !e->actions || !e->adj_act || !e->adj_fext || !e->sink)
    return ds__seterr(&e->err, DS_ERR_NOMEM, "out of memory");
  /* rigid vertices: as the built body parameters pose them (the data's reset) */
  memcpy(e->x0_def, m->nbody ? e->d->x : m->x0, n3 * sizeof(dsReal));
  for (int f = 0; f < m->nface; f++)
    for (int k = 0; k < 3; k++) e->face_colors[3 * f + k] = def->color[k];
  if (e->cls->built) {
    rc = e->cls->built(e);
    if (rc) return e->err.code ? rc : ds__seterr(&e->err, rc, "%s: %s", e->cls->name, ds_strerror(rc));
  }
  e->have_goal = 0;
  e->have_episode = 0;
  if (e->bs && (rc = ds__env_group_render_make(&e->bgr, &e, 1, e->bs))) return rc;
  return 0;
}

/* A member of a batch's shared engine keeps the topology the engine was made for. */
static int refuse_member(dsEnv* e, const char* what) {
  return ds__seterr(&e->err, DS_ERR_STATE,
                    "%s: this env is instance %d of a batch that steps its envs together on one batched engine",
                    what, e->bs_inst);
}

int ds_env_rebuild(dsEnv* e) {
  if (!e) return DS_ERR_INVALID;
  return e->bs_member ? refuse_member(e, "rebuild") : build_sized(e);
}

int ds_env_set_device(dsEnv* e, const char* device) {
  if (!e || !device) return DS_ERR_INVALID;
  char why[512];
  dsDevice dev;
  if (e->bs_member) return refuse_member(e, "set_device");
  int rc = ds_device_parse("device", device, &dev, why, sizeof why);
  if (!rc) rc = ds_device_check("device", dev, why, sizeof why);
  if (rc) return ds__seterr(&e->err, rc, "%s: %s", e->cls->name, why);
  e->def.device = dev;
  rc = build_sized(e);
  if (rc) { /* back on the CPU, the message kept */
    char msg[DS_ERRMSG_LEN];
    snprintf(msg, sizeof msg, "%s", ds__errmsg(&e->err));
    e->def.device = ds_device_cpu();
    if (build_sized(e)) return rc;
    ds__seterr(&e->err, rc, "%s", msg);
  }
  return rc;
}

void ds_env_destroy(dsEnv* e) {
  if (!e) return;
  free_sized(e);
  if (e->cls && e->cls->destroy) e->cls->destroy(e->cstate);
  ds_image_loss_destroy(e->il);
  ds__free(e->goal_img);
  ds__free(e->goal_img2);
  ds__free(e->img);
  ds__free(e->img_grad);
  ds__free(e->frame_at);
  ds__free(e->frame_t);
  ds__free(e->config_text);
  ds__free(e);
}

static void copy_err(char* err, size_t errlen, const char* msg) {
  if (err && errlen) snprintf(err, errlen, "%s", msg);
}

/* Takes ownership of text (may be NULL: generated from def). */
static int env_create(const dsEnvDef* def, char* text, int member, dsEnv** out, char* err, size_t errlen) {
  dsErrBuf eb;
  ds__clearerr(&eb);
  copy_err(err, errlen, "");
  if (!def || !out) {
    ds__free(text);
    return DS_ERR_INVALID;
  }
  *out = NULL;
  int rc = ds__env_validate_def(def, &eb);
  if (rc) {
    ds__free(text);
    copy_err(err, errlen, ds__errmsg(&eb));
    return rc;
  }
  dsEnv* e = (dsEnv*)ds__calloc(1, sizeof *e);
  if (!e) {
    ds__free(text);
    copy_err(err, errlen, "out of memory");
    return DS_ERR_NOMEM;
  }
  e->def = *def;
  e->cls = def->cls;
  e->bs_member = member != 0;
  e->config_text = text;
  if (!e->config_text) {
    int need = ds_env_def_to_json(def, NULL, 0);
    e->config_text = need >= 0 ? (char*)ds__malloc((size_t)need + 1) : NULL;
    if (e->config_text) ds_env_def_to_json(def, e->config_text, (size_t)need + 1);
  }
  e->T = def->substeps;
  e->C = def->control_interval;
  e->R = def->render_interval;
  e->nstep = (e->T + e->C - 1) / e->C;
  e->frame_at = (int*)ds__malloc(((size_t)e->T + 1) * sizeof(int));
  e->frame_t = (int*)ds__malloc(((size_t)e->T + 2) * sizeof(int));
  const size_t npix = 4 * (size_t)def->width * (size_t)def->height;
  e->goal_img = alloc_reals(npix);
  if (def->cam2) e->goal_img2 = alloc_reals(npix);
  e->img = alloc_reals(npix);
  e->img_grad = alloc_reals(npix);
  if (!e->config_text || !e->frame_at || !e->frame_t || !e->goal_img || (def->cam2 && !e->goal_img2) || !e->img ||
      !e->img_grad) {
    rc = ds__seterr(&e->err, DS_ERR_NOMEM, "out of memory");
    goto fail;
  }
  e->nframe = 0;
  for (int s = 0; s <= e->T; s++) {
    e->frame_at[s] = -1;
    if ((s < e->T && s % e->R == 0) || (s == e->T && def->render_last)) {
      e->frame_at[s] = e->nframe;
      e->frame_t[e->nframe++] = s;
    }
  }
  dsLossDef ld = ds_default_loss_def();
  ld.kind = def->image_loss;
  ld.levels = def->loss_levels;
  ld.moments_weight = def->loss_moments;
  ld.moments_size = def->loss_moments_size;
  char why[256];
  if ((rc = ds_image_loss_check(&ld, def->width, def->height, why, sizeof why))) {
    ds__seterr(&e->err, rc, "%s: %s", def->cls->name, why);
    goto fail;
  }
  e->ldef = ld;
  rc = ds_image_loss_create(&e->il, &ld, def->width, def->height);
  if (rc) {
    ds__seterr(&e->err, rc, "cannot create the image loss (%s)", ds_strerror(rc));
    goto fail;
  }
  if (e->cls->create) {
    rc = e->cls->create(e, &e->cstate);
    if (rc) {
      ds__seterr(&e->err, rc, "%s: cannot create the class state (%s)", e->cls->name, ds_strerror(rc));
      goto fail;
    }
  }
  rc = build_sized(e);
  if (rc) goto fail;
  *out = e;
  return 0;
fail:
  copy_err(err, errlen, ds__errmsg(&e->err));
  ds_env_destroy(e);
  return rc;
}

int ds_env_create(const dsEnvDef* def, dsEnv** out, char* err, size_t errlen) {
  return env_create(def, NULL, 0, out, err, errlen);
}

int ds__env_create(const dsEnvDef* def, const char* name, const char* text, int member, dsEnv** out, char* err,
                   size_t errlen) {
  copy_err(err, errlen, "");
  if (!def || !out || (text && !name)) return DS_ERR_INVALID;
  *out = NULL;
  if (!text) return env_create(def, NULL, member, out, err, errlen);
  char* copy = ds__strdup(text);
  if (!copy) {
    copy_err(err, errlen, "out of memory");
    return DS_ERR_NOMEM;
  }
  char msg[DS_ERRMSG_LEN];
  int rc = env_create(def, copy, member, out, msg, sizeof msg);
  /* creation-time messages are prefixed with the config's name */
  if (rc && err && errlen) snprintf(err, errlen, "%s: %s", name, msg);
  return rc;
}

int ds_env_create_from_text(const char* name, const char* text, dsEnv** out, char* err, size_t errlen) {
  dsEnvDef def;
  copy_err(err, errlen, "");
  if (!name || !text || !out) return DS_ERR_INVALID;
  *out = NULL;
  int rc = ds_env_def_from_text(name, text, &def, err, errlen);
  return rc ? rc : ds__env_create(&def, name, text, 0, out, err, errlen);
}

int ds_env_create_from_config(const char* path, dsEnv** out, char* err, size_t errlen) {
  dsErrBuf eb;
  ds__clearerr(&eb);
  copy_err(err, errlen, "");
  if (!path || !out) return DS_ERR_INVALID;
  *out = NULL;
  char* text = NULL;
  size_t len = 0;
  int rc = ds__read_text_file(path, &text, &len, &eb);
  if (rc) {
    copy_err(err, errlen, ds__errmsg(&eb));
    return rc;
  }
  rc = ds_env_create_from_text(path, text, out, err, errlen);
  ds__free(text);
  return rc;
}

/* ---- queries ------------------------------------------------------------------ */
const char* ds_env_last_error(const dsEnv* e) { return e ? ds__errmsg(&e->err) : ""; }
const char* ds_env_config_text(const dsEnv* e) { return e ? e->config_text : NULL; }
const dsEnvDef* ds_env_def(const dsEnv* e) { return e ? &e->def : NULL; }
const char* ds_env_name(const dsEnv* e) { return e ? e->cls->name : NULL; }
int ds_env_action_kind(const dsEnv* e) { return e ? e->cls->action_kind : DS_ERR_INVALID; }
double ds_env_metric_goal(const dsEnv* e) {
  return e && e->cls->metric_kind == DS_METRIC_DISPLACEMENT ? (double)e->def.goal_x_min : 0.0;
}
const dsModel* ds_env_model(const dsEnv* e) { return e ? e->m : NULL; }
dsData* ds_env_data(dsEnv* e) { return e ? e->d : NULL; }
dsGrad* ds_env_grad(dsEnv* e) { return e ? e->g : NULL; }
const void* ds_env_params(const dsEnv* e) { return e ? e->def.params.bytes : NULL; }
void* ds_env_class_state(dsEnv* e) { return e ? e->cstate : NULL; }
int ds_env_set_error(dsEnv* e, int code, const char* msg) {
  return e ? ds__seterr(&e->err, code, "%s", msg ? msg : ds_strerror(code)) : code;
}
int ds_env_obs_size(const dsEnv* e) { return e ? e->odim : DS_ERR_INVALID; }
int ds_env_action_size(const dsEnv* e) { return e ? e->adim : DS_ERR_INVALID; }
void ds_env_image_size(const dsEnv* e, int* w, int* h) {
  if (w) *w = e ? e->def.width : 0;
  if (h) *h = e ? e->def.height : 0;
}
int ds_env_num_steps(const dsEnv* e) { return e ? e->nstep : DS_ERR_INVALID; }
int ds_env_steps_taken(const dsEnv* e) {
  if (!e) return DS_ERR_INVALID;
  return e->have_episode ? (e->d->t + e->C - 1) / e->C : 0;
}
int ds_env_num_particles(const dsEnv* e) { return e ? e->np : DS_ERR_INVALID; }
/* rigid bodies add their states (13 each) after the particles' */
static int state_size(const dsEnv* e) { return 1 + 2 * e->n3 + 13 * e->m->nbody; }
int ds_env_state_size(const dsEnv* e) { return e ? state_size(e) : DS_ERR_INVALID; }
const dsReal* ds_env_positions(const dsEnv* e) { return e ? e->d->x : NULL; }
const dsReal* ds_env_goal_image(const dsEnv* e) { return e && e->have_goal ? e->goal_img : NULL; }

int ds_env_target(const dsEnv* e, dsReal target[3]) {
  if (!e || !target) return DS_ERR_INVALID;
  if (!e->have_episode) return DS_ERR_STATE;
  memcpy(target, e->target, sizeof e->target);
  return 0;
}

int ds_env_metric(const dsEnv* e, dsReal* value) {
  if (!e || !value) return DS_ERR_INVALID;
  if (!e->have_episode) return DS_ERR_STATE;
  if (e->cls->metric_kind == DS_METRIC_DISPLACEMENT) {
    dsReal c[3];
    ds__env_com(e->m, e->d->x, c);
    *value = c[0] - e->com0[0];
  } else {
    *value = com_loss(e, e->d->x) / 3; /* mean over the 3 coordinates */
  }
  return 0;
}

int ds_env_render(dsEnv* e, dsReal* image) {
  if (!e || !image) return DS_ERR_INVALID;
  return render_x(e, e->d->x, image);
}

/* ---- reset ----------------------------------------------------------------------- */
/* Frames rendered by substep t. */
static int frames_done(const dsEnv* e, int t) {
  int n = 0;
  while (n < e->nframe && e->frame_t[n] <= t) n++;
  return n;
}

/* The image loss of positions x: the sum over the views (the first camera,
 * and camera2 when on) of the loss against the goal seen from that view.
 * With w != 0 its gradient times w is also added into d->adj_x (backward). */
static int frame_image_loss(dsEnv* e, const dsReal* x, dsReal* loss, dsReal w, const char* what, int f) {
  dsRaster* rs[2] = {e->r, e->r2};
  const dsReal* goals[2] = {e->goal_img, e->goal_img2};
  const size_t npix = 4 * (size_t)e->def.width * e->def.height;
  const dsRasterMesh rm = raster_mesh(e, x);
  dsReal sum = 0;
  for (int v = 0; v < 2 && rs[v]; v++) {
    dsReal l = 0;
    int rc = ds_raster_render(rs[v], &rm, e->img);
    if (rc) return ds__seterr(&e->err, rc, "%s%s: frame %d: %s", what, v ? " (camera2)" : "", f, ds_raster_last_error(rs[v]));
    rc = ds_image_loss_eval(e->il, e->img, goals[v], &l, w != 0 ? e->img_grad : NULL);
    if (rc) return ds__seterr(&e->err, rc, "%s%s: frame %d: image loss failed (%s)", what, v ? " (camera2)" : "", f,
                              ds_strerror(rc));
    sum += l;
    if (w != 0) {
      for (size_t p = 0; p < npix; p++) e->img_grad[p] *= w;
      rc = ds_raster_backward(rs[v], &rm, e->img_grad, e->d->adj_x, NULL);
      if (rc) return ds__seterr(&e->err, rc, "%s%s: frame %d: %s", what, v ? " (camera2)" : "", f, ds_raster_last_error(rs[v]));
    }
  }
  if (loss) *loss = sum;
  return 0;
}

/* Frame f is the state x: keep its positions; its loss is evaluated on
 * demand (frame_loss_of). */
static void keep_frame(dsEnv* e, int f, const dsReal* x) {
  memcpy(e->frame_x + (size_t)f * e->n3, x, (size_t)e->n3 * sizeof(dsReal));
  e->frame_done[f] = 0;
}

/* The image loss of kept frame f against the goal, rendered the first time
 * it is asked for in the episode. */
static int frame_loss_of(dsEnv* e, int f, dsReal* loss) {
  if (!e->frame_done[f]) {
    dsReal l = 0;
    int rc = frame_image_loss(e, e->frame_x + (size_t)f * e->n3, &l, 0, "render", f);
    if (rc) return rc;
    e->frame_loss[f] = l;
    e->frame_done[f] = 1;
  }
  *loss = e->frame_loss[f];
  return 0;
}

/* The episode's goal, from the start its definition gives (e->x0_def: the
 * built model as the class's own reset draws placed it, not parameters set
 * later with ds_env_set_param): its centre of mass com0 (the metric's
 * origin), the target (relative goals: com0 plus the drawn offset), the goal
 * state (that shape moved so that its centre of mass is the target) and the
 * goal image, re-rendered only when the goal state changed. The backward
 * treats them as the constants they are (dsim/env.h "Targets"). */
static int place_goal(dsEnv* e) {
  const dsEnvDef* def = &e->def;
  const dsModel* m = e->m;
  const dsReal* xs = e->x0_def;
  ds__env_com(m, xs, e->com0);
  const dsReal rel[3] = {def->goal_relative ? e->com0[0] : 0, def->goal_relative ? e->com0[1] : 0,
                         def->goal_relative ? e->com0[2] : 0};
  e->target[0] = rel[0] + e->goal_draw;
  e->target[1] = rel[1] + def->goal_y;
  e->target[2] = rel[2] + def->goal_z;
  if (e->cls->target) e->cls->target(e, e->target);
  int same = e->have_goal;
  for (int i = 0; i < e->np; i++)
    for (int k = 0; k < 3; k++) {
      const dsReal g = xs[3 * i + k] + (e->target[k] - e->com0[k]);
      same = same && e->goal_x[3 * i + k] == g;
      e->goal_x[3 * i + k] = g;
    }
  if (!same) {
    int rc = render_x(e, e->goal_x, e->goal_img);
    if (!rc && e->r2) {
      dsRasterMesh rm = raster_mesh(e, e->goal_x);
      rc = ds_raster_render(e->r2, &rm, e->goal_img2);
      if (rc) ds__seterr(&e->err, rc, "render (camera2): %s", ds_raster_last_error(e->r2));
    }
    if (rc) {
      e->have_goal = 0;
      return rc;
    }
    e->have_goal = 1;
    e->goal_serial++;
  }
  return 0;
}

/* *r minus frame f's loss term, when the built-in loss weighs frame f. */
static int frame_reward(dsEnv* e, int f, dsReal* r) {
  const int lk = e->def.loss_kind;
  if (!(lk == DS_ENV_LOSS_IMAGE_SUM || (lk == DS_ENV_LOSS_IMAGE_LAST && f == e->nframe - 1))) return 0;
  dsReal l = 0;
  int rc = frame_loss_of(e, f, &l);
  if (!rc) *r -= l;
  return rc;
}

/* ---- the physics on the batched engine (e->bs) ----------------------------------------
 * The episode's state, tape and adjoints live in e->bs (a CUDA device or
 * the CPU backend); e->d mirrors on the host what the env reads: x and v at
 * frames and step ends, t, the activation block the class writes, and the
 * adjoint scratch add_terms writes into (uploaded where it was written). */
static int bs_fail(dsEnv* e, int rc, const char* what) {
  return ds__seterr(&e->err, rc, "%s: %s", what, ds_bsim_last_error(e->bs));
}

/* Every parameter of the model into the batch, then the batch reset to the
 * mirror's state (the start of an episode). */
static int bs_sync(dsEnv* e) {
  const dsModel* m = e->m;
  int rc = ds_bsim_reset(e->bs); /* parameters are set at substep 0 */
  for (int k = 0; k < ds_param_count() && !rc; k++) {
    const dsReal* p;
    int n;
    if (ds_model_param(m, ds_param_name(k), &p, &n) || n == 0) continue;
    rc = ds_bsim_set_param(e->bs, -1, ds_param_name(k), p, n);
  }
  if (!rc) rc = ds_bsim_set_state(e->bs, e->d->x, e->d->v);
  return rc ? bs_fail(e, rc, "batched engine: episode start") : 0;
}

/* The mirror's state from the batch. */
static int bs_pull(dsEnv* e) {
  int rc = ds_bsim_get_state(e->bs, e->d->x, e->d->v);
  return rc ? bs_fail(e, rc, "batched engine: reading the state") : 0;
}

/* Substeps s0 .. s1 of step k with the action held: one activation upload,
 * then runs of substeps up to each frame (whose positions are kept). The
 * frames the loss counts and the observed image at the step's end (into
 * image, *rendered set) are rendered where the engine runs. */
static int bs_step(dsEnv* e, int k, int s0, int s1, dsReal* r, int want_reward, dsReal* image, int* rendered) {
  dsData* d = e->d;
  int rc = ds_bsim_set_act(e->bs, d->act);
  if (rc) return bs_fail(e, rc, "step: batched engine: activations");
  int s = s0;
  while (s < s1) {
    int next = s + 1;
    while (next < s1 && e->frame_at[next] < 0) next++;
    rc = ds_bsim_step(e->bs, next - s, NULL);
    if (rc) return ds__env_step_failed(e, k, rc, ds_bsim_last_error(e->bs));
    s = next;
    if (e->frame_at[s] >= 0 && (rc = bs_pull(e))) return rc;
    const int want_loss = ds__env_frame_counts(e, e->frame_at[s]), want_img = s == s1 && image && e->def.obs_image;
    dsReal fl = 0;
    int dev = 0;
    if (want_loss || want_img) {
      rc = ds__env_group_render_now(&e, 1, e->bs, &e->bgr, want_img ? image : NULL, want_loss ? &fl : NULL);
      if (rc && rc != DS_ERR_UNSUPPORTED) return rc;
      dev = rc == 0;
      *rendered = dev && want_img;
    }
    if ((rc = ds__env_step_at(e, s, want_reward, r, dev && want_loss ? &fl : NULL))) return rc;
  }
  return e->frame_at[s1] >= 0 ? 0 : bs_pull(e); /* at a frame the state came back already */
}

int ds_env_reset(dsEnv* e, uint64_t seed, dsReal* obs, dsReal* image) {
  if (!e) return DS_ERR_INVALID;
  ds__clearerr(&e->err);
  const dsEnvDef* def = &e->def;
  uint64_t rng = seed;
  /* draws, in a fixed order: goal x, then (cloth) size and height */
  const dsReal xt = (dsReal)(def->goal_x_min + (def->goal_x_max - def->goal_x_min) * ds__splitmix64_uniform(&rng));
  int rc = 0;
  if (e->cls->reset) {
    rc = e->cls->reset(e, &rng);
    if (rc) return e->err.code ? rc : ds__seterr(&e->err, rc, "%s: reset: %s", e->cls->name, ds_strerror(rc));
  }
  const dsModel* m = e->m;
  dsData* d = e->d;
  ds_data_reset(m, d);
  /* a class with its own draws places its body there (cloth: the sheet's
   * height): that is the definition's start */
  if (e->cls->reset) memcpy(e->x0_def, m->nbody ? d->x : m->x0, (size_t)e->n3 * sizeof(dsReal));
  e->failed = 0;
  e->did_backward = 0;
  e->goal_draw = xt;
  if ((rc = place_goal(e))) return rc;
  e->goal_seed = seed;
  if (e->bs && (rc = bs_sync(e))) return rc;
  e->bs_dirty = e->bs_member;
  e->have_episode = 1;
  if (e->frame_at[0] >= 0) keep_frame(e, e->frame_at[0], d->x);
  write_obs(e, d->x, d->v, obs);
  if (image && def->obs_image) {
    rc = render_x(e, d->x, image);
    if (rc) return rc;
  }
  return 0;
}

/* ---- step ------------------------------------------------------------------------ */
int ds__env_step_begin(dsEnv* e, const dsReal* action, int* s0_out, int* s1_out) {
  if (!action && e->adim > 0) return ds__seterr(&e->err, DS_ERR_INVALID, "step: action is NULL");
  if (!e->have_episode) return ds__seterr(&e->err, DS_ERR_STATE, "step: reset the env first");
  if (e->failed) return ds__seterr(&e->err, DS_ERR_STATE, "step: the episode diverged; reset the env");
  const int s0 = e->d->t;
  if (s0 >= e->T) return ds__seterr(&e->err, DS_ERR_STATE, "step: the episode is done (%d substeps)", e->T);
  const int k = s0 / e->C;
  for (int i = 0; i < e->adim; i++)
    if (!isfinite(action[i]))
      return ds__seterr(&e->err, DS_ERR_RANGE, "step %d: action[%d] is not finite", k, i);
  memcpy(e->actions + (size_t)k * e->adim, action, (size_t)e->adim * sizeof(dsReal));
  e->did_backward = 0;
  /* the batched engine holds the activations over the step (act_first classes only) */
  if (e->bs || e->bs_member) action_fwd(e, k, s0, action);
  *s0_out = s0;
  *s1_out = step_end(e, k);
  return 0;
}

int ds__env_step_at(dsEnv* e, int s, int want_reward, dsReal* r, const dsReal* frame_loss) {
  e->d->t = s;
  const int f = e->frame_at[s];
  if (f < 0) return 0;
  keep_frame(e, f, e->d->x);
  if (frame_loss) { /* rendered where the engine runs: the same bits as frame_loss_of */
    e->frame_loss[f] = *frame_loss;
    e->frame_done[f] = 1;
  }
  /* the reward's loss term (rendered only when a reward is asked for) */
  return want_reward ? frame_reward(e, f, r) : 0;
}

int ds__env_step_end(dsEnv* e, dsReal r, dsReal* obs, dsReal* image, const dsReal* rendered, dsReal* reward,
                     int* done) {
  dsData* d = e->d;
  const int s1 = d->t, k = (s1 - 1) / e->C;
  if (s1 == e->T && e->def.loss_kind == DS_ENV_LOSS_COM) r -= com_loss(e, d->x);
  memcpy(e->step_x + (size_t)k * e->n3, d->x, (size_t)e->n3 * sizeof(dsReal));
  memcpy(e->step_v + (size_t)k * e->n3, d->v, (size_t)e->n3 * sizeof(dsReal));
  write_obs(e, d->x, d->v, obs);
  if (image && e->def.obs_image) {
    int rc = 0;
    if (rendered) {
      if (rendered != image) memcpy(image, rendered, 4 * (size_t)e->def.width * e->def.height * sizeof(dsReal));
    } else {
      rc = render_x(e, d->x, image);
    }
    if (rc) return rc;
  }
  if (reward) *reward = r;
  if (done) *done = s1 == e->T;
  return 0;
}

int ds__env_step_failed(dsEnv* e, int k, int rc, const char* msg) {
  e->failed = 1;
  return ds__seterr(&e->err, rc, "step %d: %s", k, msg);
}

int ds_env_step(dsEnv* e, const dsReal* action, dsReal* obs, dsReal* image, dsReal* reward, int* done) {
  if (!e) return DS_ERR_INVALID;
  if (e->bs_member) return refuse_member(e, "step (use ds_batch_step)");
  const dsModel* m = e->m;
  dsData* d = e->d;
  int s0 = 0, s1 = 0;
  int rc = ds__env_step_begin(e, action, &s0, &s1);
  if (rc) return rc;
  const int k = s0 / e->C;
  dsReal r = 0;
  int rendered = 0;
  if (e->bs && (rc = bs_step(e, k, s0, s1, &r, reward != NULL, image, &rendered))) return rc;
  for (int s = e->bs ? s1 : s0; s < s1; s++) {
    action_fwd(e, k, s, action);
    rc = ds_step(m, d);
    if (rc) return ds__env_step_failed(e, k, rc, ds_data_last_error(d));
    if ((rc = ds__env_step_at(e, s + 1, reward != NULL, &r, NULL))) return rc;
  }
  d->t = s1;
  return ds__env_step_end(e, r, obs, image, rendered ? image : NULL, reward, done);
}

/* ---- losses and backward ------------------------------------------------------------ */
int ds_env_loss(const dsEnv* ce, dsReal* loss) {
  if (!ce || !loss) return DS_ERR_INVALID;
  if (!ce->have_episode) return DS_ERR_STATE;
  /* frames not evaluated yet are rendered here, into the env's scratch
   * (dsim/env.h: not concurrently with another call on this env) */
  dsEnv* e = (dsEnv*)ce;
  const int nf = frames_done(e, e->d->t);
  dsReal l = 0, lf = 0;
  int rc = 0;
  switch (e->def.loss_kind) {
    case DS_ENV_LOSS_IMAGE_LAST:
      if (nf > 0 && !(rc = frame_loss_of(e, nf - 1, &lf))) l = lf;
      break;
    case DS_ENV_LOSS_IMAGE_SUM:
      for (int f = 0; f < nf && !rc; f++)
        if (!(rc = frame_loss_of(e, f, &lf))) l += lf;
      break;
    default:
      l = com_loss(e, e->d->x);
  }
  if (rc) return rc;
  *loss = l;
  return 0;
}

typedef dsEnvBwdSpec BwdSpec;

/* The weight of frame f's image loss (at substep s; nf frames kept) in the
 * loss a backward differentiates: the built-in loss's, and minus the
 * reward adjoint of the step whose reward holds it. */
static dsReal frame_weight(const dsEnv* e, const BwdSpec* sp, int s, int f, int nf) {
  const int lk = e->def.loss_kind;
  dsReal w = 0;
  if (sp->builtin) w += (lk == DS_ENV_LOSS_IMAGE_SUM || (lk == DS_ENV_LOSS_IMAGE_LAST && f == nf - 1)) ? 1 : 0;
  if (sp->adj_reward && s > 0 && (lk == DS_ENV_LOSS_IMAGE_SUM || (lk == DS_ENV_LOSS_IMAGE_LAST && f == e->nframe - 1)))
    w -= sp->adj_reward[(s - 1) / e->C];
  return w;
}

/* Adds dL/d(state s) of every term at substep s into d->adj_x / d->adj_v
 * (rendered 0: but the terms that render, frames and image adjoints). */
static int add_terms(dsEnv* e, const BwdSpec* sp, int s, int t, int nf, int rendered) {
  const dsModel* m = e->m;
  dsData* d = e->d;
  const int lk = e->def.loss_kind, steps = (t + e->C - 1) / e->C;
  const size_t n3 = (size_t)e->n3, npix = 4 * (size_t)e->def.width * e->def.height;
  int rc = 0;
  /* frame terms (unless the group renders them where its engine runs) */
  const int f = e->frame_at[s];
  if (rendered && f >= 0 && f < nf) {
    const dsReal w = frame_weight(e, sp, s, f, nf);
    if (w != 0) {
      rc = frame_image_loss(e, e->frame_x + (size_t)f * n3, NULL, w, "backward", f);
      if (rc) return rc;
      e->adj_dirty = 1;
    }
  }
  /* centre-of-mass terms: w |com - target|^2 */
  {
    dsReal w = 0;
    if (sp->builtin && lk == DS_ENV_LOSS_COM && s == t) w += 1;
    if (sp->adj_reward && lk == DS_ENV_LOSS_COM && s == e->T && t == e->T) w -= sp->adj_reward[e->nstep - 1];
    if (w != 0) {
      const dsReal* x = s == t ? d->x : e->step_x + (size_t)(e->nstep - 1) * n3;
      dsReal c[3], wc[3];
      ds__env_com(m, x, c);
      for (int k = 0; k < 3; k++) wc[k] = 2 * w * (c[k] - e->target[k]);
      com_bwd(m, e->g, x, wc, d->adj_x);
      e->adj_dirty = 1;
    }
  }
  /* observation terms at step ends */
  if (s > 0 && (s % e->C == 0 || s == e->T)) {
    const int k = (s - 1) / e->C;
    if (k < steps) {
      const dsReal* x = e->step_x + (size_t)k * n3;
      const dsReal* v = e->step_v + (size_t)k * n3;
      if (sp->adj_obs && e->odim > 0) {
        const dsReal* ao = sp->adj_obs + (size_t)k * e->odim;
        e->adj_dirty = 1;
        if (e->def.obs_state == DS_OBS_STATE_FULL) {
          for (size_t q = 0; q < n3; q++) {
            d->adj_x[q] += ao[q];
            d->adj_v[q] += ao[n3 + q];
          }
        } else {
          com_bwd(m, e->g, x, ao, d->adj_x);
          com_bwd(m, e->g, v, ao + 3, d->adj_v);
        }
      }
      if (sp->adj_image && rendered) {
        e->adj_dirty = 1;
        dsRasterMesh rm = raster_mesh(e, x);
        rc = ds_raster_render(e->r, &rm, NULL);
        if (!rc) rc = ds_raster_backward(e->r, &rm, sp->adj_image + (size_t)k * npix, d->adj_x, NULL);
        if (rc) return ds__seterr(&e->err, rc, "backward: image of step %d: %s", k, ds_raster_last_error(e->r));
      }
    }
  }
  return 0;
}

/* env_backward on the batched engine: the tape is popped in runs that end
 * where a term may add adjoints (a frame) or a step starts (its action's
 * adjoint is read back, summed over the run); the parameter gradients come
 * back at the end and are added to those of the host terms (centre of
 * mass). Sums are taken in other groupings than the serial engine's, so
 * results agree with env_backward on the CPU engine to rounding, not bits.
 * A group of envs on one engine runs the same schedule (they are at one
 * substep), each env's host terms on its own thread. */
static int group_fail(dsEnv** envs, int n, dsBatchSim* bs, int rc, const char* what) {
  for (int i = 0; i < n; i++) ds__seterr(&envs[i]->err, rc, "%s: %s", what, ds_bsim_last_error(bs));
  return rc;
}

/* ---- frame terms rendered where the group's engine runs ---------------------------
 * One batched renderer per view on the engine's backend and context
 * (render/raster_batch.h): the engine's positions at the frame's substep
 * are rendered, the loss against each env's goal taken and differentiated
 * (times each env's frame weight) and the adjoint added to the engine's,
 * without the positions or images crossing to the host. Per instance the
 * bits are those of frame_image_loss. */
struct dsEnvGroupRender {
  dsBatchRaster* r[2];
  int nview;
  unsigned* serial; /* B x 2: the goal serial of each instance's uploaded goal (0: none) */
  dsReal* goals;    /* B x npx staging */
  dsReal* w;        /* B frame weights */
  dsReal* loss;     /* B */
  dsReal* lsum;     /* B: summed over the views */
};

static int batched_frames = 1;
void ds__env_set_batched_frames(int on) { batched_frames = on != 0; }

void ds__env_group_render_free(dsEnvGroupRender* gr) {
  if (!gr) return;
  ds__braster_destroy(gr->r[0]);
  ds__braster_destroy(gr->r[1]);
  ds__free(gr->serial);
  ds__free(gr->goals);
  ds__free(gr->w);
  ds__free(gr->loss);
  ds__free(gr->lsum);
  ds__free(gr);
}

static int group_render_make(dsEnvGroupRender** out, dsEnv* e0, dsBatchSim* bs, int B, char* err, size_t errlen);

int ds__env_group_render_make(dsEnvGroupRender** out, dsEnv** envs, int n, dsBatchSim* bs) {
  const dsEnvDef* d = &envs[0]->def;
  if (*out || !batched_frames || !(d->obs_image || d->loss_kind != DS_ENV_LOSS_COM)) return 0;
  char why[256];
  const int rc = group_render_make(out, envs[0], bs, n, why, sizeof why);
  if (rc)
    for (int i = 0; i < n; i++) ds__seterr(&envs[i]->err, rc, "%s: %s", envs[i]->cls->name, why);
  return rc;
}

static int group_render_make(dsEnvGroupRender** out, dsEnv* e0, dsBatchSim* bs, int B, char* err, size_t errlen) {
  const dsBackend* be =
      ds__backend(ds_bsim_device(bs).kind);
  if (!be) return ds__puterr(err, errlen, DS_ERR_UNSUPPORTED, "this dsim was built without CUDA");
  dsEnvGroupRender* gr = (dsEnvGroupRender*)ds__calloc(1, sizeof *gr);
  const size_t npx = 4 * (size_t)e0->def.width * e0->def.height;
  int rc = gr ? 0 : ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  if (gr) {
    gr->nview = e0->r2 ? 2 : 1;
    gr->serial = (unsigned*)ds__calloc(2 * (size_t)B, sizeof(unsigned));
    gr->goals = (dsReal*)ds__malloc(sizeof(dsReal) * npx * (size_t)B);
    gr->w = (dsReal*)ds__calloc((size_t)B, sizeof(dsReal));
    gr->loss = (dsReal*)ds__calloc((size_t)B, sizeof(dsReal));
    gr->lsum = (dsReal*)ds__calloc((size_t)B, sizeof(dsReal));
    if (!gr->serial || !gr->goals || !gr->w || !gr->loss || !gr->lsum) rc = ds__puterr(err, errlen, DS_ERR_NOMEM, "out of memory");
  }
  for (int v = 0; v < (gr ? gr->nview : 0) && !rc; v++)
    rc = ds__braster_create(&gr->r[v], be, ds__bsim_context(bs), ds_raster_settings(v ? e0->r2 : e0->r), B, e0->np,
                            e0->m->nface, e0->m->face_idx, e0->face_colors, DS_COLOR_FACE, err, errlen);
  if (rc) {
    ds__env_group_render_free(gr);
    return rc;
  }
  *out = gr;
  return 0;
}

/* Uploads each env's goal seen from view v where the group's renderer runs,
 * when some env's goal changed since the last upload. */
static int group_goals(dsEnvGroupRender* gr, dsEnv** envs, int n, int v) {
  const size_t npx = 4 * (size_t)envs[0]->def.width * envs[0]->def.height;
  int stale = 0;
  for (int i = 0; i < n; i++) stale |= gr->serial[2 * i + v] != envs[i]->goal_serial;
  if (!stale) return 0;
  for (int i = 0; i < n; i++) {
    memcpy(gr->goals + (size_t)i * npx, v ? envs[i]->goal_img2 : envs[i]->goal_img, npx * sizeof(dsReal));
    gr->serial[2 * i + v] = envs[i]->goal_serial;
  }
  int rc = ds__braster_set_goal(gr->r[v], gr->goals, 1);
  if (rc)
    for (int i = 0; i < n; i++) gr->serial[2 * i + v] = 0; /* upload again next time */
  return rc;
}

int ds__env_frame_counts(const dsEnv* e, int f) {
  const int lk = e->def.loss_kind;
  return f >= 0 && (lk == DS_ENV_LOSS_IMAGE_SUM || (lk == DS_ENV_LOSS_IMAGE_LAST && f == e->nframe - 1));
}

int ds__env_group_render_now(dsEnv** envs, int n, dsBatchSim* bs, dsEnvGroupRender** grp, dsReal* images,
                             dsReal* losses) {
  if (!batched_frames || ds_bsim_batch(bs) != n) return DS_ERR_UNSUPPORTED;
  char why[256];
  int rc = 0;
  if (!*grp && (rc = group_render_make(grp, envs[0], bs, n, why, sizeof why))) {
    for (int i = 0; i < n; i++) ds__seterr(&envs[i]->err, rc, "render: batched render: %s", why);
    return rc;
  }
  dsEnvGroupRender* gr = *grp;
  const dsReal* x = NULL;
  if ((rc = ds__bsim_positions(bs, &x))) return group_fail(envs, n, bs, rc, "render: batched engine");
  for (int v = 0; v < gr->nview && !rc; v++) {
    if (v > 0 && !losses) break; /* images are the first view's */
    rc = losses ? group_goals(gr, envs, n, v) : 0;
    if (!rc) rc = ds__braster_render(gr->r[v], x, v == 0 ? images : NULL);
    if (!rc && losses) rc = ds__braster_loss(gr->r[v], &envs[0]->ldef, NULL, gr->loss);
    if (rc) {
      for (int i = 0; i < n; i++)
        ds__seterr(&envs[i]->err, rc, "render%s: %s", v ? " (camera2)" : "", ds__braster_last_error(gr->r[v]));
      return rc;
    }
    if (losses)
      for (int i = 0; i < n; i++) losses[i] = v ? losses[i] + gr->loss[i] : gr->loss[i];
  }
  return 0;
}

/* The rendered terms at substep s of every env of the group, into one
 * adjoint scratch of the engine, then added to its adjoints: the frame
 * terms (frame f of all of them: they are at one substep of one schedule)
 * and, at a step's end, the image observation's adjoints. */
static int group_rendered(dsEnv** envs, int n, dsBatchSim* bs, dsEnvGroupRender** grp, const BwdSpec* sp,
                          const unsigned char* skip, int ref, int s, int t, int nf) {
  dsEnv* e0 = envs[ref];
  const int f = e0->frame_at[s], steps = (t + e0->C - 1) / e0->C, k = (s - 1) / e0->C;
  const size_t npx = 4 * (size_t)e0->def.width * e0->def.height;
  int any_frame = 0, any_img = 0;
  for (int i = 0; i < n && f >= 0 && f < nf && !any_frame; i++)
    any_frame = !(skip && skip[i]) && frame_weight(envs[i], sp + i, s, f, nf) != 0;
  if (s > 0 && (s % e0->C == 0 || s == e0->T) && k < steps)
    for (int i = 0; i < n && !any_img; i++) any_img = !(skip && skip[i]) && sp[i].adj_image;
  if (!any_frame && !any_img) return 0;
  char why[256];
  int rc = 0;
  if (!*grp && (rc = group_render_make(grp, e0, bs, n, why, sizeof why))) {
    for (int i = 0; i < n; i++) ds__seterr(&envs[i]->err, rc, "backward: batched render: %s", why);
    return rc;
  }
  dsEnvGroupRender* gr = *grp;
  const dsReal* x = NULL;
  dsReal* ax = NULL;
  rc = ds__bsim_positions(bs, &x);
  if (!rc) rc = ds__bsim_adj_scratch(bs, &ax);
  if (rc) return group_fail(envs, n, bs, rc, "backward: batched engine");
  for (int i = 0; i < n; i++) gr->w[i] = !any_frame || (skip && skip[i]) ? 0 : frame_weight(envs[i], sp + i, s, f, nf);
  for (int v = 0; v < gr->nview && any_frame; v++) {
    rc = group_goals(gr, envs, n, v);
    if (!rc) rc = ds__braster_render(gr->r[v], x, NULL);
    if (!rc) rc = ds__braster_loss(gr->r[v], &e0->ldef, gr->w, gr->loss);
    if (!rc) rc = ds__braster_backward(gr->r[v], NULL, ax);
    for (int i = 0; i < n && !rc; i++) gr->lsum[i] = v ? gr->lsum[i] + gr->loss[i] : gr->loss[i];
    if (rc) {
      for (int i = 0; i < n; i++)
        ds__seterr(&envs[i]->err, rc, "backward%s: frame %d: %s", v ? " (camera2)" : "", f,
                   ds__braster_last_error(gr->r[v]));
      return rc;
    }
  }
  for (int i = 0; i < n && any_frame; i++) /* the frame's loss, as frame_loss_of would render it */
    if (!(skip && skip[i])) {
      envs[i]->frame_loss[f] = gr->lsum[i];
      envs[i]->frame_done[f] = 1;
    }
  if (any_img) { /* the step's image adjoints (image observations: the first view) */
    for (int i = 0; i < n; i++) {
      dsReal* row = gr->goals + (size_t)i * npx; /* host staging only: the uploaded goals stay */
      if ((skip && skip[i]) || !sp[i].adj_image)
        memset(row, 0, npx * sizeof(dsReal));
      else
        memcpy(row, sp[i].adj_image + (size_t)k * npx, npx * sizeof(dsReal));
    }
    if (!any_frame) rc = ds__braster_render(gr->r[0], x, NULL); /* else view 0 rendered x above */
    if (!rc) rc = ds__braster_backward(gr->r[0], gr->goals, ax);
    if (rc) {
      for (int i = 0; i < n; i++)
        ds__seterr(&envs[i]->err, rc, "backward: image of step %d: %s", k, ds__braster_last_error(gr->r[0]));
      return rc;
    }
  }
  rc = ds__bsim_add_adj_scratch(bs);
  return rc ? group_fail(envs, n, bs, rc, "backward: batched engine: adding adjoints") : 0;
}

/* every env's host terms at substep s, then their adjoints into the engine
 * (the rendered terms first, where the engine runs, when grp is not NULL) */
static int group_terms(dsEnv** envs, int n, dsBatchSim* bs, dsEnvGroupRender** grp, const BwdSpec* sp,
                       const unsigned char* skip, int ref, int s, int t, int nf, dsReal* bx, dsReal* bv, int* rcs) {
  if (grp) {
    int rc = group_rendered(envs, n, bs, grp, sp, skip, ref, s, t, nf);
    if (rc) return rc;
  }
  const int rendered = grp == NULL;
  DS__ENVS_FOR(n, i) { rcs[i] = skip && skip[i] ? 0 : add_terms(envs[i], sp + i, s, t, nf, rendered); }
  DS__ENVS_END();
  int dirty = 0;
  for (int i = 0; i < n; i++) {
    if (rcs[i]) return rcs[i];
    dirty |= envs[i]->adj_dirty;
  }
  if (!dirty) return 0;
  const size_t n3 = (size_t)envs[0]->n3;
  int rc;
  if (n == 1) {
    rc = ds_bsim_add_adjoint(bs, envs[0]->d->adj_x, envs[0]->d->adj_v);
  } else {
    for (int i = 0; i < n; i++) {
      memcpy(bx + (size_t)i * n3, envs[i]->d->adj_x, n3 * sizeof(dsReal));
      memcpy(bv + (size_t)i * n3, envs[i]->d->adj_v, n3 * sizeof(dsReal));
    }
    rc = ds_bsim_add_adjoint(bs, bx, bv);
  }
  for (int i = 0; i < n; i++) {
    memset(envs[i]->d->adj_x, 0, n3 * sizeof(dsReal));
    memset(envs[i]->d->adj_v, 0, n3 * sizeof(dsReal));
    envs[i]->adj_dirty = 0;
  }
  return rc ? group_fail(envs, n, bs, rc, "backward: batched engine: adding adjoints") : 0;
}

int ds__env_group_backward(dsEnv** envs, int n, dsBatchSim* bs, dsEnvGroupRender** gr, const BwdSpec* sp,
                           const unsigned char* skip, int first, dsReal* const* grad_actions, dsReal* bx, dsReal* bv,
                           dsReal* badj, int* rcs) {
  int ref = 0;
  while (skip && ref < n - 1 && skip[ref]) ref++;
  dsEnv* e0 = envs[ref];
  const dsModel* m = e0->m;
  const int t = e0->d->t, nf = frames_done(e0, t), A = e0->adim, first_act = e0->cls->act_first(e0);
  const int s_stop = first * e0->C < t ? first * e0->C : t;
  const size_t nact = (size_t)m->nact;
  for (int i = 0; i < n; i++) {
    memset(envs[i]->d->adj_x, 0, (size_t)e0->n3 * sizeof(dsReal));
    memset(envs[i]->d->adj_v, 0, (size_t)e0->n3 * sizeof(dsReal));
    envs[i]->adj_dirty = 0;
  }
  int rc = ds_bsim_zero_grad(bs);
  if (!rc) rc = ds_bsim_backward_begin(bs, NULL, NULL);
  if (rc) return group_fail(envs, n, bs, rc, "backward: batched engine");
  /* frame terms where the engine runs (one instance per env) */
  dsEnvGroupRender** grp = batched_frames && gr && ds_bsim_batch(bs) == n ? gr : NULL;
  if ((rc = group_terms(envs, n, bs, grp, sp, skip, ref, t, t, nf, bx, bv, rcs))) return rc;
  int s = t;
  while (s > s_stop) {
    const int k = (s - 1) / e0->C;
    int lo = k * e0->C > s_stop ? k * e0->C : s_stop;
    for (int q = s - 1; q > lo; q--)
      if (e0->frame_at[q] >= 0) {
        lo = q;
        break;
      }
    rc = ds_bsim_backward_step(bs, s - lo, nact ? badj : NULL, NULL);
    if (rc) return group_fail(envs, n, bs, rc, "backward: batched engine");
    for (int i = 0; i < n; i++) {
      dsEnv* e = envs[i];
      if (skip && skip[i]) continue;
      dsReal* ga = grad_actions[i] ? grad_actions[i] + (size_t)k * A : e->sink;
      if (!grad_actions[i]) memset(e->sink, 0, (size_t)A * sizeof(dsReal)); /* dL/da nobody asked for */
      for (int j = 0; j < A; j++) ga[j] += badj[(size_t)i * nact + (size_t)first_act + (size_t)j];
    }
    s = lo;
    if ((rc = group_terms(envs, n, bs, grp, sp, skip, ref, s, t, nf, bx, bv, rcs))) return rc;
  }
  if (s_stop == 0 && (rc = ds_bsim_backward_finish(bs))) return group_fail(envs, n, bs, rc, "backward: batched engine");
  for (int i = 0; i < n; i++) {
    dsEnv* e = envs[i];
    if (skip && skip[i]) continue;
    for (int k = 0; k < ds_param_count(); k++) {
      const char* name = ds_param_name(k);
      const dsReal* p;
      dsReal* g;
      int np, ng;
      if (ds_model_param(e->m, name, &p, &np) || np == 0 || ds_grad_param(e->g, name, &g, &ng) || ng != np) continue;
      if ((rc = ds_bsim_get_grad(bs, i, name, e->bgrad, np))) return group_fail(envs, n, bs, rc, "backward: batched engine");
      for (int j = 0; j < np; j++) g[j] += e->bgrad[j];
    }
    e->did_backward = 1;
  }
  return 0;
}

/* The checks before a backward of e down to step first, and its outputs cleared. */
static int bwd_prepare(dsEnv* e, const BwdSpec* sp, int first, dsReal* grad_actions) {
  if (!e->def.gradients)
    return ds__seterr(&e->err, DS_ERR_STATE,
                      "backward: %s was created forward only (env.physics.gradients false): no tape to go back on",
                      e->cls->name);
  if (!e->have_episode) return ds__seterr(&e->err, DS_ERR_STATE, "backward: reset the env first");
  if (e->failed) return ds__seterr(&e->err, DS_ERR_STATE, "backward: the episode diverged");
  if (sp->adj_image && !e->def.obs_image)
    return ds__seterr(&e->err, DS_ERR_INVALID, "backward: image adjoints need observation.image");
  const int t = e->d->t, steps = (t + e->C - 1) / e->C;
  if (first < 0 || first > steps)
    return ds__seterr(&e->err, DS_ERR_RANGE, "backward: first step %d outside [0, %d]", first, steps);
  if (grad_actions) memset(grad_actions, 0, (size_t)steps * e->adim * sizeof(dsReal));
  ds_grad_zero(e->g);
  return 0;
}

int ds__env_bwd_prepare(dsEnv* e, const dsEnvBwdSpec* sp, int first, dsReal* grad_actions) {
  return bwd_prepare(e, sp, first, grad_actions);
}

/* Backward down to the start of step first (0: the whole episode). */
static int env_backward(dsEnv* e, const BwdSpec* sp, int first, dsReal* grad_actions) {
  if (e->bs_member && e->def.gradients) return refuse_member(e, "backward (use ds_batch_backward_loss or _adjoints)");
  int rc = bwd_prepare(e, sp, first, grad_actions);
  if (rc) return rc;
  int one_rc;
  if (e->bs)
    return ds__env_group_backward(&e, 1, e->bs, &e->bgr, sp, NULL, first, &grad_actions, NULL, NULL, e->badj_act,
                                  &one_rc);
  const dsModel* m = e->m;
  dsData* d = e->d;
  const int t = d->t, nf = frames_done(e, t), A = e->adim;
  const int s_stop = first * e->C < t ? first * e->C : t;
  rc = ds_backward_begin(m, d);
  if (rc) return ds__seterr(&e->err, rc, "backward: %s", ds_data_last_error(d));
  rc = add_terms(e, sp, t, t, nf, 1);
  if (rc) return rc;
  for (int s = t - 1; s >= s_stop; s--) {
    rc = ds_backward_step(m, d, e->g, m->nact ? e->adj_act : NULL, e->adj_fext);
    if (rc) return ds__seterr(&e->err, rc, "backward: %s", ds_data_last_error(d));
    const int k = s / e->C;
    dsReal* ga = grad_actions ? grad_actions + (size_t)k * A : NULL;
    if (!ga) memset(e->sink, 0, (size_t)A * sizeof(dsReal)); /* dL/da nobody asked for */
    action_bwd(e, k, s, e->actions + (size_t)k * A, ga ? ga : e->sink);
    rc = add_terms(e, sp, s, t, nf, 1);
    if (rc) return rc;
  }
  if (s_stop == 0) { /* the initial state's adjoints: parameter gradients */
    rc = ds_backward_finish(m, d, e->g);
    if (rc) return ds__seterr(&e->err, rc, "backward: %s", ds_data_last_error(d));
  }
  e->did_backward = 1;
  return 0;
}

int ds_env_backward_loss_from(dsEnv* e, int first_step, dsReal* loss, dsReal* grad_actions) {
  if (!e) return DS_ERR_INVALID;
  BwdSpec sp = {1, NULL, NULL, NULL};
  int rc = env_backward(e, &sp, first_step, grad_actions);
  if (!rc && loss) rc = ds_env_loss(e, loss);
  return rc;
}

int ds_env_backward_loss(dsEnv* e, dsReal* loss, dsReal* grad_actions) {
  return ds_env_backward_loss_from(e, 0, loss, grad_actions);
}

int ds_env_backward_adjoints_from(dsEnv* e, int first_step, const dsReal* adj_obs, const dsReal* adj_image,
                                  const dsReal* adj_reward, dsReal* grad_actions) {
  if (!e) return DS_ERR_INVALID;
  BwdSpec sp = {0, adj_obs, adj_image, adj_reward};
  return env_backward(e, &sp, first_step, grad_actions);
}

int ds_env_backward_adjoints(dsEnv* e, const dsReal* adj_obs, const dsReal* adj_image, const dsReal* adj_reward,
                             dsReal* grad_actions) {
  return ds_env_backward_adjoints_from(e, 0, adj_obs, adj_image, adj_reward, grad_actions);
}

/* ---- image loss of the env's definition against any target -------------------------- */
int ds_env_image_loss(dsEnv* e, const dsReal* image, const dsReal* target, dsReal* loss, dsReal* grad) {
  if (!e || !image || !target || !loss) return DS_ERR_INVALID;
  int rc = ds_image_loss_eval(e->il, image, target, loss, grad);
  if (rc) return ds__seterr(&e->err, rc, "image loss failed (%s)", ds_strerror(rc));
  return 0;
}

/* ---- parameters ------------------------------------------------------------------- */
int ds_env_param(const dsEnv* e, const char* name, const dsReal** values, int* count) {
  if (!e || !name) return DS_ERR_INVALID;
  return ds_model_param(e->m, name, values, count);
}

int ds_env_set_param(dsEnv* e, const char* name, const dsReal* values, int count) {
  if (!e || !name || !values) return DS_ERR_INVALID;
  if (e->have_episode && e->d->t > 0)
    return ds__seterr(&e->err, DS_ERR_STATE, "set_param %s: only between episodes (now at substep %d)", name, e->d->t);
  int rc = ds_model_set_param(e->m, name, values, count);
  if (rc) return ds__seterr(&e->err, rc, "set_param: %s", ds_model_last_error(e->m));
  if (e->have_episode) {
    /* before the first step: the state follows new initial values (rigid
       bodies: their vertices are re-posed from the body parameters); the
       target, the goal image and the metric's origin stay the
       definition's */
    if (e->m->nbody) {
      ds_data_reset(e->m, e->d);
    } else {
      memcpy(e->d->x, e->m->x0, (size_t)e->n3 * sizeof(dsReal));
      memcpy(e->d->v, e->m->v0, (size_t)e->n3 * sizeof(dsReal));
    }
    if (e->frame_at[0] >= 0) keep_frame(e, e->frame_at[0], e->d->x);
    if (e->bs) rc = bs_sync(e);
    e->bs_dirty = e->bs_member;
  }
  return rc;
}

int ds_env_copy_params(dsEnv* dst, const dsEnv* src) {
  if (!dst || !src) return DS_ERR_INVALID;
  for (int k = 0; k < ds_param_count(); k++) {
    const char* name = ds_param_name(k);
    const dsReal* p;
    int n;
    if (ds_model_param(src->m, name, &p, &n) || n == 0) continue;
    int rc = ds_env_set_param(dst, name, p, n);
    if (rc) return rc;
  }
  return 0;
}

int ds_env_param_grad(const dsEnv* e, const char* name, const dsReal** grad, int* count) {
  if (!e || !name) return DS_ERR_INVALID;
  dsReal* p = NULL;
  int rc = ds_grad_param(e->g, name, &p, count);
  if (grad) *grad = p;
  return rc;
}

/* ---- state --------------------------------------------------------------------------- */
int ds_env_get_state(const dsEnv* e, dsReal* state, int n) {
  if (!e || !state) return DS_ERR_INVALID;
  if (n != state_size(e)) return DS_ERR_RANGE;
  state[0] = (dsReal)e->d->t;
  memcpy(state + 1, e->d->x, (size_t)e->n3 * sizeof(dsReal));
  memcpy(state + 1 + e->n3, e->d->v, (size_t)e->n3 * sizeof(dsReal));
  if (e->m->nbody) memcpy(state + 1 + 2 * e->n3, e->d->body, 13 * (size_t)e->m->nbody * sizeof(dsReal));
  return 0;
}

int ds_env_set_state(dsEnv* e, const dsReal* state, int n) {
  if (!e || !state) return DS_ERR_INVALID;
  if (n != state_size(e))
    return ds__seterr(&e->err, DS_ERR_RANGE, "set_state: %d values, expected %d", n, state_size(e));
  if (!e->have_episode) return ds__seterr(&e->err, DS_ERR_STATE, "set_state: reset the env first");
  const double sv = (double)state[0];
  const int s = (int)sv;
  if (!(sv >= 0 && sv <= e->T) || (double)s != sv || (s % e->C != 0 && s != e->T))
    return ds__seterr(&e->err, DS_ERR_RANGE, "set_state: substep %g is not a step boundary in [0, %d]", sv, e->T);
  if (s > e->d->t)
    return ds__seterr(&e->err, DS_ERR_RANGE, "set_state: substep %d is ahead of the episode (%d)", s, e->d->t);
  for (int q = 1; q < n; q++)
    if (!isfinite(state[q])) return ds__seterr(&e->err, DS_ERR_RANGE, "set_state: value %d is not finite", q);
  dsData* d = e->d;
  if (e->bs) {
    int rc = ds_bsim_rewind(e->bs, s, state + 1, state + 1 + e->n3);
    if (rc) return bs_fail(e, rc, "set_state: batched engine");
  }
  e->bs_dirty = e->bs_member;
  /* rewind the engine tape to s: the records before s stay valid */
  d->t = s;
  d->bt = -1;
  d->seg_start = -1;
  d->failed = 0;
  const int taped = d->max_substeps > 0; /* forward-only data keep no records */
  if (e->m->nact && taped) d->act_n = s > 0 ? d->act_rec[s - 1] + 1 : 0;
  if (taped) d->fext_n = s > 0 ? d->fext_rec[s - 1] + 1 : 0;
  memcpy(d->x, state + 1, (size_t)e->n3 * sizeof(dsReal));
  memcpy(d->v, state + 1 + e->n3, (size_t)e->n3 * sizeof(dsReal));
  if (e->m->nbody) {
    if (taped) d->bfext_n = s > 0 ? d->bfext_rec[s - 1] + 1 : 0;
    memcpy(d->body, state + 1 + 2 * e->n3, 13 * (size_t)e->m->nbody * sizeof(dsReal));
  }
  e->failed = 0;
  e->did_backward = 0;
  if (e->frame_at[s] >= 0) keep_frame(e, e->frame_at[s], d->x);
  return 0;
}
