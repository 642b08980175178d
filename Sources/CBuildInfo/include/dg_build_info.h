#ifndef DG_BUILD_INFO_H
#define DG_BUILD_INFO_H
/* The commit the binary was built from (DESK_GATEWAY_REVISION at build time), or "unknown". */
const char *dg_build_revision(void);
#endif
