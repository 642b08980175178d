#ifndef DG_LIBPQ_SHIM_H
#define DG_LIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
