/* libmicrohttpd's own definition of a function the program defines again, found once (RTLD_NEXT) and kept. */
#ifndef DG_MHD_NEXT_H
#define DG_MHD_NEXT_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>

static inline void *dg_next(void **slot, const char *name)
{
    void *next = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
    if (!next) {
        next = dlsym(RTLD_NEXT, name);
        if (next) __atomic_store_n(slot, next, __ATOMIC_RELEASE);
    }
    return next;
}
#endif
