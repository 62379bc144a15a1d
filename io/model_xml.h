/* Internal: the model loaders of io/model_xml.c from memory (the fuzz
 * target's entry points). name names the input in messages. */
#ifndef DSIM_IO_MODEL_XML_H
#define DSIM_IO_MODEL_XML_H

#include <stddef.h>

#include "dsim/model_file.h"

int ds__artic_load_mjcf_mem(const char* buf, size_t n, const char* name, const dsArticOptions* opt,
                            dsArticModel** out, char* err, size_t errlen);
int ds__artic_load_urdf_mem(const char* buf, size_t n, const char* name, const dsArticOptions* opt,
                            dsArticModel** out, char* err, size_t errlen);

#endif
