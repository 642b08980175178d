#include "dg_build_info.h"

/* A C file so that only this object sees the define: a new revision recompiles one file and relinks, nothing else. */
#ifndef DG_REVISION
#define DG_REVISION "unknown"
#endif

const char *dg_build_revision(void) { return DG_REVISION; }
