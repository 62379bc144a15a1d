/* Internal hooks of the run-log reader (io/runlog.c), not public API. */
#ifndef DSIM_IO_RUNLOG_INTERNAL_H
#define DSIM_IO_RUNLOG_INTERNAL_H

#include <stddef.h>

/* Make every ds_runlog_read_* call read this memory image of an HDF5 file
 * instead of the path it is given (the path still names it in messages);
 * NULL goes back to files. The image must outlive the reads. Process-wide
 * and not thread-safe: for the fuzz harness (tests/fuzz/fuzz_runlog.c),
 * where writing each input to disk and letting libhdf5 reopen it dominated
 * the time per execution. */
void ds__runlog_read_image(const void* image, size_t len);

/* /meta's string attribute name (e.g. "build_options", "precision",
 * "end_time") into out (outlen bytes, truncated); "" when the log lacks it. */
int ds__runlog_read_meta_text(const char* path, const char* name, char* out, size_t outlen, char* err,
                              size_t errlen);

#endif
