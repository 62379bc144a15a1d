/* dsim articulated bodies: kinematic trees in reduced (generalised)
 * coordinates, with joints, limits, passive springs and dampers, actuators,
 * ground contact of link spheres and capsules, and an exact adjoint.
 * docs/articulated.md explains the formulation and its cost.
 *
 * Usage:
 *
 *   dsArticBuilder* b; ds_artic_builder_create(&b);
 *   dsArticBodyDef bd = ds_artic_default_body_def(); bd.name = "link"; bd.mass = 1; ...
 *   ds_artic_add_body(b, &bd);
 *   dsArticJointDef jd = ds_artic_default_joint_def(); jd.name = "hinge"; jd.child = "link"; ...
 *   ds_artic_add_joint(b, &jd);            // parent NULL or "world": the world
 *   ... ds_artic_add_geom, ds_artic_add_actuator ...
 *   dsArticOptions o = ds_artic_default_options(); o.dt = 1e-3;
 *   dsArticModel* m; ds_artic_build(b, &o, &m);    // validates; errors: ds_artic_builder_error(b)
 *   dsArticData* d; ds_artic_data_create(m, T, &d); // room for T steps (the tape)
 *   ds_artic_reset(m, d, q0, qd0);                  // NULL: the model's q = 0 pose
 *   for (t = 0; t < T; t++) ds_artic_step(m, d, action_t);
 *   ds_artic_backward(m, d, dl_dq, dl_dqd, &grad);  // adjoint of a loss on the states
 *
 * Coordinates: SI, z up, the ground is the plane z = 0. Every body's frame
 * sits at its centre of mass with its principal axes (the inertia is
 * diagonal there). Generalised positions q (nq) and velocities qd (nv) hold
 * each body's joint in tree order (parents first, otherwise the order the
 * bodies were added; ds_artic_joint_adr gives each joint's offsets):
 *   hinge:  q = angle (rad), qd = angular rate
 *   slide:  q = displacement along the axis (m), qd = its rate
 *   ball:   q = unit quaternion (w, x, y, z) of the child relative to the
 *           joint frame, qd = angular velocity in the child frame (3)
 *   free:   q = joint point position in the parent's joint frame (3), then a
 *           quaternion (4); qd = d(position)/dt (3), then the angular
 *           velocity in the child frame (3)
 *   fixed:  none.
 * Model and data: the model is read-only during stepping (several data may
 * share it); parameters are changed between rollouts with
 * ds_artic_param_set. Nothing allocates after ds_artic_data_create; the
 * engine is serial and bitwise deterministic whatever OMP_NUM_THREADS. */
#ifndef DSIM_ARTIC_H
#define DSIM_ARTIC_H

#include "dsim/base.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dsJointType {
  DS_JOINT_FIXED = 0, /* welds the child to the parent, 0 dof */
  DS_JOINT_HINGE = 1, /* revolute about axis, 1 dof */
  DS_JOINT_SLIDE = 2, /* prismatic along axis, 1 dof */
  DS_JOINT_BALL = 3,  /* spherical about the joint point, 3 dof (q: 4) */
  DS_JOINT_FREE = 4   /* 6 dof (q: 7) */
} dsJointType;

typedef enum dsArticGeomType {
  DS_ARTIC_SPHERE = 0, /* contact sphere at pos */
  DS_ARTIC_CAPSULE = 1 /* contact spheres at both end points pos, pos2 */
} dsArticGeomType;

typedef enum dsArticActuatorType {
  DS_ARTIC_MOTOR = 0, /* tau = gear * ctrl_limit * tanh(u / ctrl_limit) (gear * u when ctrl_limit = 0) */
  DS_ARTIC_SERVO = 1  /* tau = force_limit * tanh((kp (u - q) - kv qd) / force_limit) (unsaturated when 0) */
} dsArticActuatorType;

/* A rigid link. Named parameters: body.NAME.mass, body.NAME.inertia.{x,y,z}. */
typedef struct dsArticBodyDef {
  const char* name;  /* unique, not "world"; copied */
  double mass;       /* kg, > 0 */
  double inertia[3]; /* principal moments about the centre of mass, kg m^2, > 0 */
} dsArticBodyDef;

/* The joint that attaches `child` to `parent`; every body has exactly one.
 * The joint frame is the parent's frame moved to anchor_parent and rotated
 * by quat; at q = 0 the child's frame has the joint frame's orientation and
 * its origin (centre of mass) at joint point - R anchor_child.
 * Named parameters: joint.NAME.anchor_parent.{x,y,z},
 * joint.NAME.anchor_child.{x,y,z} (the link's geometry: a pendulum's length
 * is |anchor_child|); hinge, slide, ball, free: joint.NAME.damping,
 * joint.NAME.armature; hinge, slide: joint.NAME.stiffness, joint.NAME.rest,
 * and when limited joint.NAME.limit_lower, joint.NAME.limit_upper. */
typedef struct dsArticJointDef {
  const char* name; /* unique; copied */
  dsJointType type;
  const char* parent;      /* body name; NULL or "world" for the world */
  const char* child;       /* body name */
  double axis[3];          /* hinge/slide axis in the joint frame (normalised at build), nonzero */
  double anchor_parent[3]; /* joint point in the parent's frame, m */
  double anchor_child[3];  /* joint point in the child's frame, m */
  double quat[4];          /* joint frame relative to the parent frame (w, x, y, z), nonzero */
  double damping;          /* tau = -damping qd per dof, N m s/rad or N s/m, >= 0 */
  double armature;         /* added to the mass matrix diagonal per dof, >= 0 */
  double stiffness;        /* tau = -stiffness (q - rest), hinge/slide, >= 0 */
  double rest;             /* rad or m */
  int limited;             /* hinge/slide: 1 for the limit penalty below */
  double limit_lower;      /* rad or m, <= limit_upper */
  double limit_upper;
  /* Past a limit, a one-sided smooth spring-damper (e = (q - upper)/w or
   * (lower - q)/w):  tau = -+ limit_stiffness w softplus(e) - limit_damping qd sigmoid(e) */
  double limit_stiffness; /* N m/rad or N/m, >= 0 */
  double limit_damping;   /* >= 0 */
  double limit_width;     /* w, > 0 (rad or m) */
} dsArticJointDef;

/* Contact geometry on a body (points in the body frame); contacts the
 * ground z = 0 when dsArticOptions.ground is set. */
typedef struct dsArticGeomDef {
  const char* body;
  dsArticGeomType type;
  double pos[3];  /* sphere centre / capsule end point, m */
  double pos2[3]; /* capsule's other end point, m */
  double radius;  /* m, > 0 */
} dsArticGeomDef;

/* One action entry driving a hinge or slide joint. Named parameters:
 * actuator.NAME.gear (motor), actuator.NAME.kp and actuator.NAME.kv (servo). */
typedef struct dsArticActuatorDef {
  const char* name;
  const char* joint;
  dsArticActuatorType type;
  double gear;        /* motor */
  double kp, kv;      /* servo gains, >= 0 */
  double ctrl_limit;  /* motor: smooth action bound, 0 = none, >= 0 */
  double force_limit; /* servo: smooth force bound, 0 = none, >= 0 */
} dsArticActuatorDef;

/* Named parameters: gravity.{x,y,z}; with the ground contact.{ke,kd,kf,mu}
 * (the particle ground model of engine/force_contact.h, z up). */
typedef struct dsArticOptions {
  double dt;         /* s, > 0 */
  double gravity[3]; /* m/s^2 */
  int ground;        /* 1: spheres and capsules contact the plane z = 0 */
  double contact_ke, contact_kd, contact_kf, contact_mu;
} dsArticOptions;

typedef struct dsArticBuilder dsArticBuilder;
typedef struct dsArticModel dsArticModel;
typedef struct dsArticData dsArticData;

/* Gradients of a loss, caller-owned arrays; any may be NULL (not written). */
typedef struct dsArticGrad {
  double* q0;     /* nq */
  double* qd0;    /* nv */
  double* action; /* steps x nu */
  double* param;  /* nparam, in ds_artic_param_name order */
} dsArticGrad;

DS_API dsArticBodyDef ds_artic_default_body_def(void);         /* mass 1, inertia 1e-3 */
DS_API dsArticJointDef ds_artic_default_joint_def(void);       /* hinge about z, identity quat, limit w 0.01 */
DS_API dsArticGeomDef ds_artic_default_geom_def(void);         /* sphere, radius 0.05 */
DS_API dsArticActuatorDef ds_artic_default_actuator_def(void); /* motor, gear 1 */
DS_API dsArticOptions ds_artic_default_options(void);          /* dt 1e-3, g (0,0,-9.81), ground off */

DS_API int ds_artic_builder_create(dsArticBuilder** out);
DS_API void ds_artic_builder_free(dsArticBuilder* b);
/* Each add copies the def; errors that need the whole tree (unknown names,
 * cycles) come from ds_artic_build. DS_ERR_INVALID with the message in
 * ds_artic_builder_error naming the element and the expected value. */
DS_API int ds_artic_add_body(dsArticBuilder* b, const dsArticBodyDef* def);
DS_API int ds_artic_add_joint(dsArticBuilder* b, const dsArticJointDef* def);
DS_API int ds_artic_add_geom(dsArticBuilder* b, const dsArticGeomDef* def);
DS_API int ds_artic_add_actuator(dsArticBuilder* b, const dsArticActuatorDef* def);
/* Validates the tree (unknown parent or child, a body with no or two
 * joints, a cycle) and every value; 0 and *out, or DS_ERR_INVALID and
 * nothing. The builder stays usable and must still be freed. */
DS_API int ds_artic_build(dsArticBuilder* b, const dsArticOptions* opt, dsArticModel** out);
/* The last error's message ("" when none). */
DS_API const char* ds_artic_builder_error(const dsArticBuilder* b);

DS_API void ds_artic_model_free(dsArticModel* m);
DS_API int ds_artic_nq(const dsArticModel* m);
DS_API int ds_artic_nv(const dsArticModel* m);
DS_API int ds_artic_nu(const dsArticModel* m);
DS_API int ds_artic_nbody(const dsArticModel* m);
DS_API double ds_artic_dt(const dsArticModel* m);
/* Name of body i (0 .. nbody - 1, parents first: the link index of
 * ds_builder_add_artic_mesh); NULL out of range. */
DS_API const char* ds_artic_body_name(const dsArticModel* m, int i);
/* Contact spheres in the order their geoms were added (a capsule gives two:
 * its end points pos, then pos2): the count, and sphere i's body index,
 * centre (body frame, m; NULL to skip) and radius (NULL to skip).
 * DS_ERR_RANGE for i out of range. For drawing a model's links. */
DS_API int ds_artic_nsphere(const dsArticModel* m);
DS_API int ds_artic_sphere(const dsArticModel* m, int i, int* body, double pos[3], double* radius);
/* Offsets of joint `name` in q and qd: DS_ERR_NOTFOUND when unknown. */
DS_API int ds_artic_joint_adr(const dsArticModel* m, const char* name, int* qadr, int* vadr);

/* Parameters: a flat vector, in a fixed order, each with a name (see the
 * defs above). Index of a name or DS_ERR_NOTFOUND. Set refuses values out of
 * range (mass, inertia <= 0; lower > upper; negative damping, ...) with
 * DS_ERR_RANGE. */
DS_API int ds_artic_nparam(const dsArticModel* m);
DS_API const char* ds_artic_param_name(const dsArticModel* m, int i);
DS_API int ds_artic_param_index(const dsArticModel* m, const char* name);
DS_API int ds_artic_param_get(const dsArticModel* m, const char* name, double* value);
DS_API int ds_artic_param_set(dsArticModel* m, const char* name, double value);

/* Data with a tape of `steps` steps (states 0 .. steps), and, while it
 * takes at most 128 MiB (steps x (nv (nv + 3) / 2) doubles), each step's
 * factor of the mass matrix and its accelerations, which ds_artic_backward
 * reuses instead of refactoring (same gradient, bit for bit). Change
 * parameters between a rollout and its backward and the backward mixes the
 * rollout's factors with the new parameters: change them between rollouts. */
DS_API int ds_artic_data_create(const dsArticModel* m, int steps, dsArticData** out);
DS_API void ds_artic_data_free(dsArticData* d);
/* Rewinds to step 0 with q0 (nq) and qd0 (nv); NULL for the q = 0 pose
 * (identity quaternions) and rest. Quaternions are kept as given (the
 * kinematics reads q/|q|, so the gradient is with respect to the entries
 * given); each step's result is normalised. */
DS_API int ds_artic_reset(const dsArticModel* m, dsArticData* d, const double* q0, const double* qd0);
/* One semi-implicit Euler step with action (nu; NULL for zeros).
 * DS_ERR_STATE when the tape is full, DS_ERR_DIVERGED on NaN/Inf (the
 * step is not recorded). */
DS_API int ds_artic_step(const dsArticModel* m, dsArticData* d, const double* action);
/* Steps taken since the reset, and the state after step t (0 .. steps()). */
DS_API int ds_artic_steps(const dsArticData* d);
DS_API const double* ds_artic_q(const dsArticData* d, int t);
DS_API const double* ds_artic_qd(const dsArticData* d, int t);

/* Adjoint of a loss L(q_0..q_t, qd_0..qd_t) over the t steps taken:
 * dl_dq ((t + 1) x nq) and dl_dqd ((t + 1) x nv) are dL/dq_k, dL/dqd_k
 * (NULL: zero); writes g's non-NULL arrays (overwritten, not added). */
DS_API int ds_artic_backward(const dsArticModel* m, dsArticData* d, const double* dl_dq, const double* dl_dqd,
                             const dsArticGrad* g);

/* Energy at (q, qd): kinetic 1/2 qd^T M qd (armature included) and
 * potential (gravity and joint springs; limits and contact excluded). */
DS_API int ds_artic_energy(const dsArticModel* m, dsArticData* d, const double* q, const double* qd, double* kinetic,
                           double* potential);
/* Total linear momentum and angular momentum about the world origin. */
DS_API int ds_artic_momentum(const dsArticModel* m, dsArticData* d, const double* q, const double* qd, double lin[3],
                             double ang[3]);

#ifdef __cplusplus
}
#endif

#endif
