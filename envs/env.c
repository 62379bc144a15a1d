/* Environments: creation, the objects sized by the built model (model,
 * data, gradient, renderers, episode buffers), the helpers the episode and
 * the backward share, and the queries.
 *
 * This part and envs/env_episode.c, env_backward.c and env_frames.c are what
 * every environment shares; what differs (the scene, how an action enters
 * the physics and its adjoint, the metric) is the class's (dsEnvClass, one
 * file each, listed in envs/classes.h; registry in envs/env_def.c).
 *
 * Centre of mass: com = sum_i m_i x_i / M, so dcom/dx_i = m_i/M and
 * dcom/dm_i = (x_i - com)/M (added to the particle.mass gradient). */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "envs/env_priv.h"

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

/* The action into the data before substep s, and its adjoint after the pop
 * of substep s: an activation block (cls->act_first) or the class's hooks. */
void ds__env_action_fwd(dsEnv* e, int k, int s, const dsReal* a) {
  if (e->cls->act_first)
    memcpy(e->d->act + e->cls->act_first(e), a, (size_t)e->adim * sizeof(dsReal));
  else
    e->cls->action_fwd(e, k, s, a);
}

void ds__env_action_bwd(dsEnv* e, int k, int s, const dsReal* a, dsReal* grad) {
  if (e->cls->act_first) {
    const dsReal* adj = e->adj_act + e->cls->act_first(e);
    for (int i = 0; i < e->adim; i++) grad[i] += adj[i];
  } else {
    e->cls->action_bwd(e, k, s, a, e->adj_act, e->adj_fext, grad);
  }
}

int ds_env_artic_action_size(const dsEnv* e) { return e->m->artic_nu; }

void ds_env_artic_action_fwd(dsEnv* e, int step, int s, const dsReal* a) {
  (void)step, (void)s;
  for (int k = 0; k < e->m->artic_nu; k++) e->d->artic_act[k] = a[k];
}

void ds_env_artic_action_bwd(dsEnv* e, int step, int s, const dsReal* a, const dsReal* adj_act,
                             const dsReal* adj_fext, dsReal* grad) {
  (void)step, (void)s, (void)a, (void)adj_act, (void)adj_fext;
  for (int k = 0; k < e->m->artic_nu; k++) grad[k] += e->d->adj_artic_act[k];
}

dsReal ds__env_com_loss(const dsEnv* e, const dsReal* x) {
  dsReal c[3];
  ds__env_com(e->m, x, c);
  dsReal s = 0;
  for (int k = 0; k < 3; k++) s += (c[k] - e->target[k]) * (c[k] - e->target[k]);
  return s;
}

dsRasterMesh ds__env_raster_mesh(const dsEnv* e, const dsReal* x) {
  dsRasterMesh rm;
  rm.verts = x;
  rm.nvert = e->np;
  rm.faces = e->m->face_idx;
  rm.nface = e->m->nface;
  rm.colors = e->face_colors;
  rm.color_mode = DS_COLOR_FACE;
  return rm;
}

int ds__env_render_x(dsEnv* e, const dsReal* x, dsReal* image) {
  if (e->cls->sim) return e->cls->sim->render(e, -1, image); /* its own state: the current one */
  dsRasterMesh rm = ds__env_raster_mesh(e, x);
  int rc = ds_raster_render(e->r, &rm, image);
  if (rc) return ds__seterr(&e->err, rc, "render: %s", ds_raster_last_error(e->r));
  return 0;
}

void ds__env_write_obs(const dsEnv* e, const dsReal* x, const dsReal* v, dsReal* obs) {
  if (!obs) return;
  if (e->def.obs_state == DS_OBS_STATE_FULL) {
    memcpy(obs, x, (size_t)e->n3 * sizeof(dsReal));
    memcpy(obs + e->n3, v, (size_t)e->n3 * sizeof(dsReal));
  } else if (e->def.obs_state == DS_OBS_STATE_COM) {
    ds__env_com(e->m, x, obs);
    ds__env_com(e->m, v, obs + 3);
  } else if (e->def.obs_state == DS_OBS_STATE_JOINTS) { /* the current substep's q, qd */
    memcpy(obs, e->d->artic_state, (size_t)e->odim * sizeof(dsReal));
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
                     &e->badj_act,    &e->fext_grad};
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
    rc = ds_builder_set_integrator(b, def->integrator);
    if (!rc) rc = ds_builder_set_solver(b, &def->solver);
  }
  if (rc >= 0) {
    if (def->ground) {
      const dsGroundDef gd = {def->contact_ke, def->contact_kd, def->contact_kf, def->contact_mu, def->contact_skin};
      ds_builder_set_ground(b, &gd);
      rc = ds_builder_set_contact_smooth(b, def->contact_smooth);
    } else {
      ds_builder_set_ground(b, NULL);
    }
    if (!rc) rc = ds_builder_finalize(b, out);
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
  size_t reals = (size_t)e->nframe * (n3 + 1) + 3 * (size_t)e->nstep * n3 + (size_t)e->nstep * (size_t)e->adim +
                 3 * (size_t)e->m->nface + 4 * n3 + (size_t)e->m->nact;
  return sizeof(dsReal) * (reals + px * (4 + 2 * ss));
}

/* Refuse an episode whose tape and buffers would not fit the memory bound
 * (ds_memory_limit): say how much it needs and which key to change. */
static int check_memory(dsEnv* e, const dsDataDef* dd) {
  const dsEnvSim* sim = e->cls->sim;
  const int K = dd->checkpoint_every > 1 ? dd->checkpoint_every : 1;
  const size_t own = sim ? sim->tape_bytes(e, e->T, K, e->def.gradients) : 0;
  const size_t data = ds_data_bytes_needed(e->m, dd), need = data + own + env_buffer_bytes(e), lim = ds_memory_limit();
  if (need <= lim) return 0;
  char a[32], b[32], c[32];
  if (sim) {
    const size_t with = sim->tape_bytes(e, e->T, 8, e->def.gradients) + data + env_buffer_bytes(e);
    return ds__seterr(&e->err, DS_ERR_NOMEM,
                      "%s: the episode needs %s of memory (%d substeps, a checkpoint every %d), more than dsim may "
                      "use, %s (%s); %slower env.physics.substeps or the grid size",
                      e->cls->name, ds_format_size(need, a, sizeof a), e->T, K, ds_format_size(lim, b, sizeof b),
                      ds_memory_limit_source(), K == 1 && with <= lim ? "set env.physics.checkpoint_every (e.g. 8), " : "");
  }
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

/* The view of ds_camera_look_at moved to look at `at` (the origin's bits
 * untouched: no + 0.0). */
static void aim_at(dsCamera* c, const dsReal at[3]) {
  for (int k = 0; k < 3; k++)
    if (at[k] != 0) {
      c->eye[k] += at[k];
      c->at[k] = at[k];
    }
}

/* Model, data, gradient, renderer and every buffer sized by the model. */
/* The first view's renderer and, with camera2, the second's (same settings
 * but the camera). */
static int make_renderers(dsEnv* e) {
  const dsEnvDef* def = &e->def;
  const dsModel* m = e->m;
  int rc;
  dsRenderSettings s = ds_default_render_settings();
  s.width = def->width;
  s.height = def->height;
  s.supersample = def->supersample;
  s.sigma = def->sigma;
  s.gamma = def->gamma;
  s.ambient = def->ambient;
  s.directional = def->directional;
  s.premultiplied = def->premultiplied;
  rc = ds_camera_look_at(&s.camera, def->cam_distance, def->cam_elevation, def->cam_azimuth);
  if (rc) return ds__seterr(&e->err, rc, "camera: invalid view (distance %g, elevation %g)", (double)def->cam_distance,
                            (double)def->cam_elevation);
  aim_at(&s.camera, def->cam_look_at);
  s.camera.fx = def->cam_fx;
  s.camera.fy = def->cam_fy;
  s.camera.cx = def->cam_cx;
  s.camera.cy = def->cam_cy;
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
    aim_at(&s.camera, def->cam_look_at);
    if (ds_render_settings_check(&s, why, sizeof why))
      return ds__seterr(&e->err, DS_ERR_INVALID, "%s: camera2: %s", e->cls->name, why);
    rc = ds_raster_create(&e->r2, &s, m->nface, m->nparticle);
    if (rc) return ds__seterr(&e->err, rc, "cannot create the second view's renderer (%s)", ds_strerror(rc));
  }
  return 0;
}

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
  if (def->obs_state == DS_OBS_STATE_JOINTS && !m->artic)
    return ds__seterr(&e->err, DS_ERR_INVALID,
                      "%s: observation.state joints: the model has no articulation (expected none, full or com)",
                      e->cls->name);
  e->odim = def->obs_state == DS_OBS_STATE_FULL     ? 2 * e->n3
            : def->obs_state == DS_OBS_STATE_COM    ? 6
            : def->obs_state == DS_OBS_STATE_JOINTS ? m->artic_nq + m->artic_nv
                                                    : 0;
  /* a class with its own physics on the batched engine (dsEnvSim.batched)
     runs it there itself: the particle model then stays on the CPU engine */
  const int own = e->cls->sim && e->cls->sim->batched;
  const int batched = (def->device.kind == DS_DEVICE_CUDA || def->batch_engine) && !own;
  /* an articulation's actions are the batched engine's activations
     (ds__env_bs_act); an initial action set by the class's hook goes up as
     the substep-0 state (ds__env_initial_hook) */
  if (batched && ((!e->cls->act_first && !m->artic && !ds__env_initial_hook(e)) || m->nbody ||
                  e->cls->uses_external_force)) {
    char dn[32];
    return ds__seterr(&e->err, DS_ERR_UNSUPPORTED,
                      "%s: runs on the CPU engine only, not on %s%s: its actions enter the physics through %s, and "
                      "the batched engine takes actions as activations or an initial state only; use device cpu",
                      e->cls->name, ds_device_name(def->device, dn, sizeof dn),
                      def->device.kind == DS_DEVICE_CUDA ? "" : " (the batched engine)",
                      m->nbody ? "rigid bodies" : "the class's own hook at every step (external forces or state changes)");
  }
  dsDataDef dd = ds_default_data_def();
  dd.max_substeps = def->gradients && !batched ? e->T : 0; /* forward only, or a mirror: no tape */
  dd.checkpoint_every = def->checkpoint_every;
  dd.jacobian_mib = def->jacobian_mib;
  dd.act_records = e->nstep + 1;
  /* one record per step for forces set with ds_env_set_external_force (a
     record is kept only when the field changes: nothing more while unset) */
  dd.fext_records = e->cls->uses_external_force ? e->T : e->nstep + 1;
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
    e->badj_act = alloc_reals((size_t)ds__env_bs_nact(m));
    if (!e->bgrad || !e->badj_act) return ds__seterr(&e->err, DS_ERR_NOMEM, "out of memory");
  }
  rc = ds_grad_create(m, &e->g);
  if (rc) return ds__seterr(&e->err, rc, "cannot create the gradient (%s)", ds_strerror(rc));
  if ((rc = make_renderers(e))) return rc;
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
  e->fext_grad = alloc_reals((size_t)e->nstep * n3);
  e->fext_lo = e->fext_hi = 0;
  e->sink = alloc_reals((size_t)e->adim);
  if (!e->face_colors || !e->goal_x || !e->x0_def || !e->frame_x || !e->frame_loss || !e->frame_done || !e->step_x ||
      !e->step_v || !e->actions || !e->adj_act || !e->adj_fext || !e->sink ||
      !e->fext_grad)
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
int ds__env_refuse_member(dsEnv* e, const char* what) {
  return ds__seterr(&e->err, DS_ERR_STATE,
                    "%s: this env is instance %d of a batch that steps its envs together on one batched engine",
                    what, e->bs_inst);
}

int ds_env_rebuild(dsEnv* e) {
  if (!e) return DS_ERR_INVALID;
  if (!e->bs_member) return build_sized(e);
  /* the class's reset drew a new model size (control-cloth's sheet) */
  return ds__seterr(&e->err, DS_ERR_STATE,
                    "%s: the episode needs a model of another size (a rebuild), but this env is instance %d of a "
                    "batch that steps its envs together on one batched engine, made for one size: give the class "
                    "one size (control-cloth: scene.size_min = scene.size_max) or use separate engines",
                    e->cls->name, e->bs_inst);
}

int ds_env_set_device(dsEnv* e, const char* device) {
  if (!e || !device) return DS_ERR_INVALID;
  char why[512];
  dsDevice dev;
  if (e->bs_member) return ds__env_refuse_member(e, "set_device");
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
  ds__free(e->set_at);
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
  e->set_at = (unsigned char*)ds__calloc((size_t)e->T + 1, 1);
  const size_t npix = 4 * (size_t)def->width * (size_t)def->height;
  e->goal_img = alloc_reals(npix);
  if (def->cam2) e->goal_img2 = alloc_reals(npix);
  e->img = alloc_reals(npix);
  e->img_grad = alloc_reals(npix);
  if (!e->config_text || !e->frame_at || !e->frame_t || !e->set_at || !e->goal_img || (def->cam2 && !e->goal_img2) || !e->img ||
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
      if (!e->err.code) ds__seterr(&e->err, rc, "%s: cannot create the class state (%s)", e->cls->name, ds_strerror(rc));
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
  copy_err(err, errlen, "");
  if (!path || !out) return DS_ERR_INVALID;
  *out = NULL;
  char* text = NULL;
  int rc = ds_config_read_file(path, &text, err, errlen);
  if (rc) return rc;
  rc = ds_env_create_from_text(path, text, out, err, errlen);
  ds_config_free_text(text);
  return rc;
}

/* ---- queries ------------------------------------------------------------------ */
const char* ds_env_last_error(const dsEnv* e) { return e ? ds__errmsg(&e->err) : ""; }
const char* ds_env_config_text(const dsEnv* e) { return e ? e->config_text : NULL; }
const dsEnvDef* ds_env_def(const dsEnv* e) { return e ? &e->def : NULL; }
const char* ds_env_name(const dsEnv* e) { return e ? e->cls->name : NULL; }
int ds_env_action_kind(const dsEnv* e) { return e ? e->cls->action_kind : DS_ERR_INVALID; }
double ds_env_action_scale(const dsEnv* e) {
  if (!e) return NAN;
  if (e->cls->action_scale > 0) return e->cls->action_scale;
  return e->cls->action_kind == DS_ACTION_INITIAL ? 5.0 : 1.0;
}
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
int ds_env_set_errorf(dsEnv* e, int code, const char* fmt, ...) {
  if (!e) return code;
  char msg[DS_ERRMSG_LEN];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt ? fmt : "", ap);
  va_end(ap);
  return ds__seterr(&e->err, code, "%s", fmt ? msg : ds_strerror(code));
}
dsModel* ds_env_model_mut(dsEnv* e) { return e ? e->m : NULL; }
const dsReal* ds_env_start_positions(const dsEnv* e) { return e ? e->x0_def : NULL; }
int ds_env_start_com(const dsEnv* e, dsReal com[3]) {
  if (!e || !com) return DS_ERR_INVALID;
  memcpy(com, e->com0, sizeof e->com0);
  return 0;
}
uint64_t ds_env_rng_next(uint64_t* rng) { return ds__splitmix64(rng); }
double ds_env_rng_uniform(uint64_t* rng) { return ds__splitmix64_uniform(rng); }
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
  if (e->cls->sim) return e->cls->sim->metric(e, value);
  if (e->cls->metric_kind == DS_METRIC_DISPLACEMENT) {
    dsReal c[3];
    ds__env_com(e->m, e->d->x, c);
    *value = c[0] - e->com0[0];
  } else {
    *value = ds__env_com_loss(e, e->d->x) / 3; /* mean over the 3 coordinates */
  }
  return 0;
}

int ds_env_render(dsEnv* e, dsReal* image) {
  if (!e || !image) return DS_ERR_INVALID;
  return ds__env_render_x(e, e->d->x, image);
}
