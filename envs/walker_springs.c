/* walker-springs: a mass-spring lattice on two legs with ground contact
 * (dsim's own scene, after gradSim's and DiffTaichi's mass-spring examples;
 * docs/scenes.md). Action: one value per spring, the engine's spring
 * activation a: the spring's rest length becomes L (1 + a) (the actuated
 * spring of engine/force_spring.h, forward and adjoint there). The
 * activations follow the triangles' and tets' in the engine's vector
 * [tri | tet | spring]; the action's adjoint is dL/d(act) of those entries.
 * Metric: centre-of-mass displacement along x since substep 0 (goal +1 m). */
#include <stddef.h>

#include "dsim/engine.h"
#include "dsim/env.h"
#include "dsim/mesh.h"

#define P(f) offsetof(dsWalkerSpringsParams, f)

static const dsConfigKey keys[] = {
    {"material.particle_mass", DS_KEY_REAL, P(particle_mass), DS_KEY_MIN_POSITIVE, DS_KEY_MAX, NULL, 0, "kg per particle"},
    {"material.spring_ke", DS_KEY_REAL, P(spring_ke), 0, DS_KEY_MAX, NULL, 0, "spring stiffness, N/m"},
    {"material.spring_kd", DS_KEY_REAL, P(spring_kd), 0, DS_KEY_MAX, NULL, 0, "spring damping, N s/m"},
    {"scene.legs", DS_KEY_BOOL, P(legs), 0, 1, NULL, 0, "two legs under the body"},
    {NULL, DS_KEY_REAL, 0, 0, 0, NULL, 0, NULL}};

static void defaults(dsEnvDef* d) {
  dsWalkerSpringsParams* p = (dsWalkerSpringsParams*)d->params.bytes;
  d->substeps = 1920;
  d->render_interval = 96;
  d->render_last = 1;
  /* a checkpoint every ~sqrt(T) substeps: 7% of the full tape's memory for
   * some 8-13% more time per iteration (bench_env's tape line) */
  d->checkpoint_every = 44;
  d->goal_x_min = d->goal_x_max = 1;
  d->goal_relative = 1;
  d->color[0] = (dsReal)0.2;
  d->color[1] = (dsReal)0.6;
  d->color[2] = 1;
  d->cam_distance = 4;
  d->cam_elevation = 10;
  p->particle_mass = 1;
  p->spring_ke = 1e4;
  p->spring_kd = 10;
  p->legs = 1;
}

/* walker-springs lattice: spacing 0.1 m, a body of 2 x 6 cells on two legs
 * of 1 x 2 cells (columns 0-1 and 5-6), feet at y = 0.02. Vertex (r, c)
 * exists for r >= 2 (body) or c in the leg columns. Springs: the edges of
 * every cell (shared edges once) and both diagonals. */
#define WS_COLS 7
#define WS_ROWS 5
#define WS_LEG_ROWS 2
static int ws_has(int legs, int r, int c) {
  if (r < 0 || r >= WS_ROWS || c < 0 || c >= WS_COLS) return 0;
  if (!legs) return r >= WS_LEG_ROWS;
  return r >= WS_LEG_ROWS || c <= 1 || c >= WS_COLS - 2;
}
static int ws_cell(int legs, int r, int c) {
  return ws_has(legs, r, c) && ws_has(legs, r + 1, c) && ws_has(legs, r, c + 1) && ws_has(legs, r + 1, c + 1);
}

static int build(dsEnv* e, dsBuilder* b) {
  const dsEnvDef* def = ds_env_def(e);
  const dsWalkerSpringsParams* p = (const dsWalkerSpringsParams*)def->params.bytes;
  int id[WS_ROWS][WS_COLS];
  const dsReal hs = 0.1, y0 = 0.02;
  int rc = 0;
  for (int r = 0; r < WS_ROWS; r++)
    for (int c = 0; c < WS_COLS; c++) {
      id[r][c] = -1;
      if (!ws_has(p->legs, r, c) || rc < 0) continue;
      const dsReal x[3] = {def->start[0] + (c - (WS_COLS - 1) / 2.0) * hs, def->start[1] + y0 + r * hs, def->start[2]};
      rc = ds_builder_add_particle(b, x, def->velocity, p->particle_mass);
      id[r][c] = rc;
    }
  if (rc < 0) return rc;
  const dsReal ke = p->spring_ke, kd = p->spring_kd;
  for (int r = 0; r < WS_ROWS && rc >= 0; r++)
    for (int c = 0; c < WS_COLS && rc >= 0; c++) {
      if (c + 1 < WS_COLS && (ws_cell(p->legs, r, c) || ws_cell(p->legs, r - 1, c)))
        rc = ds_builder_add_spring(b, id[r][c], id[r][c + 1], ke, kd, -1);
      if (rc >= 0 && r + 1 < WS_ROWS && (ws_cell(p->legs, r, c) || ws_cell(p->legs, r, c - 1)))
        rc = ds_builder_add_spring(b, id[r][c], id[r + 1][c], ke, kd, -1);
      if (rc >= 0 && ws_cell(p->legs, r, c)) {
        rc = ds_builder_add_spring(b, id[r][c], id[r + 1][c + 1], ke, kd, -1);
        if (rc >= 0) rc = ds_builder_add_spring(b, id[r + 1][c], id[r][c + 1], ke, kd, -1);
        if (rc >= 0) rc = ds_builder_add_face(b, id[r][c], id[r][c + 1], id[r + 1][c + 1]);
        if (rc >= 0) rc = ds_builder_add_face(b, id[r][c], id[r + 1][c + 1], id[r + 1][c]);
      }
    }
  return rc < 0 ? rc : 0;
}

static int action_size(const dsEnv* e) { return ds_env_model(e)->nspring; }

/* the action is the engine's activation block from here */
static int act_first(const dsEnv* e) {
  return ds_env_model(e)->ntri + ds_env_model(e)->ntet;
}

const dsEnvClass ds__walker_springs_class = {
    .name = "walker-springs",
    .doc = "a mass-spring walker on two legs, one actuated rest length per spring, goal +1 m in x",
    .params_size = sizeof(dsWalkerSpringsParams),
    .keys = keys,
    .defaults = defaults,
    .build = build,
    .action_size = action_size,
    .action_kind = DS_ACTION_PER_STEP,
    .act_first = act_first,
    .metric_kind = DS_METRIC_DISPLACEMENT,
};
