#ifndef DG_MHD_FIXES_H
#define DG_MHD_FIXES_H
/* Links the libmicrohttpd 0.9.75 work-arounds in lookup.c and errors.c into every program that serves HTTP. */
int dg_mhd_fixes_linked(void);
int dg_mhd_errors_linked(void);
#endif
