/* dsim: differentiable simulation and control environments.
 * Umbrella header: include this one. */
#ifndef DSIM_DSIM_H
#define DSIM_DSIM_H

#include "dsim/base.h"

#endif
