/* The bundled environments' own parameters (the `params` of a dsEnvDef of
 * that class, dsim/env.h) and their scene generators: the control-fem gear
 * and the walker lattice as meshes (dsim/mesh.h). They live with the
 * environments (envs/), not in the engine. Values, sources and departures
 * from gradSim: docs/scenes.md. */
#ifndef DSIM_SCENES_H
#define DSIM_SCENES_H

#include "dsim/base.h"
#include "dsim/mesh.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Gear of docs/scenes.md control-fem: a toothed ring in the xy plane centred at
 * the origin, extruded along z over [-half_thickness, half_thickness].
 * Profile (polar grid with 2*teeth angular sectors): a ring from hub_radius
 * to root_radius (2 radial cells), and on every other sector a tooth from
 * root_radius to outer_radius (2 radial cells); the profile is triangulated,
 * extruded in `layers` layers and each prism split into 3 tets with
 * conforming faces. Vertices: 2*teeth*5*(layers+1); tets: 3*layers*12*teeth.
 * The defaults (16 teeth, radii 1.84/1.50/1.2073, half thickness 1.14,
 * 2 layers) give 480 vertices, 1,152 tets, volume 9.68 m^3 and |x|,|y| <= 1.84,
 * |z| <= 1.14 (original: 480 / 1,152, 9.68 m^3). tri = outward boundary.
 * DS_ERR_INVALID unless teeth >= 3, layers >= 1 and
 * 0 < hub_radius < root_radius < outer_radius, half_thickness > 0. */
typedef struct dsGearDef {
  int teeth;                  /* number of teeth */
  dsReal outer_radius;        /* tooth tip radius, m */
  dsReal root_radius;         /* tooth root radius (outer edge of the ring), m */
  dsReal hub_radius;          /* radius of the central hole, m */
  dsReal half_thickness;      /* half the extent along z, m */
  int layers;                 /* prism layers along z */
} dsGearDef;
DS_API dsGearDef ds_default_gear_def(void);
DS_API int ds_mesh_gear(const dsGearDef* def, dsMesh* out);

/* Walker of docs/scenes.md: lattice spacing h = 2/9 m, x in [-1, 1] in the z = 0
 * plane; a body of 5 rows x 10 vertices on top of two legs (the 3 leftmost
 * and 3 rightmost columns) 4 rows down; lowest row at y = 0.057. Vertices
 * row by row from the bottom, x increasing in a row. Exactly 74 vertices and
 * 104 triangles, each of rest area h^2/2, counter-clockwise seen from +z. */
DS_API int ds_mesh_walker(dsMesh* out);
/* Translate a mesh so that its vertex centroid (ds_mesh_centroid) is at the
 * origin: the gear and the cloth sheet are placed from there. */
DS_API void ds_mesh_center(dsMesh* mesh);

/* ---- parameters of the bundled classes (config keys in brackets) ---------- */
/* walker: a triangle-FEM lattice (ds_mesh_walker) translated by start; one
 * activation per triangle. */
typedef struct dsWalkerParams {
  dsReal particle_mass;           /* kg per particle [material.particle_mass] */
  dsReal k_mu, k_lambda, k_damp;  /* per rest area, Pa m [material.*] */
} dsWalkerParams;

/* control-fem: the gear (ds_mesh_gear) centred on its vertex centroid, then
 * translated by start; one activation per tet. */
typedef struct dsControlFemParams {
  dsReal density;                 /* kg/m^3, lumped V/4 per vertex [material.density] */
  dsReal k_mu, k_lambda, k_damp;  /* per rest volume, Pa [material.*] */
  dsGearDef gear;                 /* [gear.*] */
} dsControlFemParams;

/* control-cloth: a D x D grid of cell size `cell`, centred, rotated by angle
 * about axis, placed at start + (0, h, 0) by its centroid or (anchor 1) its
 * corner vertex; D ~ U{size_min..size_max}, h ~ U[height_min, height_max)
 * per episode. Action: a velocity added to every particle at substep 0. */
typedef struct dsControlClothParams {
  dsReal particle_mass;           /* kg per particle [material.particle_mass] */
  dsReal k_mu, k_lambda, k_damp;  /* per rest area [material.*] */
  dsReal bend_ke, bend_kd;        /* dihedral bending [material.bend_*] */
  dsReal lift, drag;              /* aerodynamics (0, 0: off) [material.lift, material.drag] */
  dsReal height_min, height_max;  /* drop height range, m [scene.height_*] */
  int size_min, size_max;         /* cells per side [scene.size_*] */
  dsReal cell;                    /* cell size, m [scene.cell] */
  dsReal axis[3];                 /* rotation axis (normalised inside) [scene.axis] */
  dsReal angle;                   /* rad [scene.angle] */
  int anchor;                     /* 0: centroid, 1: corner vertex 0 (gradSim's) [scene.anchor] */
  int pin;                        /* particles held (mass 0): 0 none, 1 the top-left corner, 2 the top edge
                                     (highest row of the unrotated grid) [scene.pin] */
} dsControlClothParams;

/* walker-springs: a mass-spring lattice (spacing 0.1 m, a 2 x 6 cell body on
 * two 1 x 2 cell legs, feet at y = 0.02) translated by start; one action per
 * spring: its rest length is L (1 + a). */
typedef struct dsWalkerSpringsParams {
  dsReal particle_mass;           /* kg per particle [material.particle_mass] */
  dsReal spring_ke, spring_kd;    /* N/m, N s/m [material.spring_*] */
  int legs;                       /* 1: two legs under the body [scene.legs] */
} dsWalkerSpringsParams;

/* rigid-toss: one rigid body (box, sphere or cylinder) resting on the
 * ground at start; the action (INITIAL) is an impulse J (N s) applied over
 * substep 0 at the centre of mass + impulse_offset. Its contact with the
 * ground uses the env's contact keys; restitution and mass are its own. */
typedef struct dsRigidTossParams {
  int shape;                      /* 0 box, 1 sphere, 2 cylinder [scene.shape] */
  dsReal size[3];                 /* box: half extents; sphere: radius size[0]; cylinder: radius
                                     size[0], half height size[1]; m [scene.size] */
  int segments;                   /* sphere / cylinder segments around y [scene.segments] */
  dsReal mass;                    /* kg [body.mass] */
  dsReal restitution;             /* e in (0, 1] [body.restitution] */
  dsReal impulse_offset[3];       /* where the impulse acts, relative to the centre of mass, m
                                     [scene.impulse_offset] */
} dsRigidTossParams;

/* beam: a box of cells[0] x cells[1] x cells[2] hexahedral cells (6 tets
 * each, ds_mesh_tet_grid) of extent size, minimum corner at start; with
 * clamp the particles of its x-minimum face are fixed (mass 0). One
 * activation per tet. */
typedef struct dsBeamParams {
  dsReal density;                 /* kg/m^3, lumped V/4 per vertex [material.density] */
  dsReal k_mu, k_lambda, k_damp;  /* per rest volume, Pa [material.*] */
  dsReal cells[3];                /* cells along x, y, z (integers) [beam.cells] */
  dsReal size[3];                 /* extent, m [beam.size] */
  int clamp;                      /* 1: x-minimum face fixed [beam.clamp] */
} dsBeamParams;

#ifdef __cplusplus
}
#endif
#endif
