/* libmicrohttpd 0.9.75 answers a Content-Length it cannot parse (`-1`, `abc`, `5, 5`, more than 18 digits) itself,
   and a state-machine slip writes that answer's status line and headers twice. Its header parser asks for the value
   through the exported MHD_lookup_connection_value_n (through the PLT, so a definition in the program comes first):
   this one hides such a value, libmicrohttpd then frames the request as bodiless and calls the gateway, and the
   gateway refuses the request itself (400, or 413 for too many digits) with one well-formed answer and closes the
   connection, so no byte after the headers is ever read as a request. Every other lookup is passed through. */
#include "next.h"
#include <stddef.h>
#include <strings.h>
#include <microhttpd.h>
#include "dg_mhd_fixes.h"

typedef enum MHD_Result (*dg_lookup_fn)(struct MHD_Connection *, enum MHD_ValueKind, const char *, size_t,
                                        const char **, size_t *);

int dg_mhd_fixes_linked(void) { return dg_mhd_errors_linked(); }

/* The longest length passed through: 18 digits always fit libmicrohttpd's 64-bit parse. */
static int dg_plain_length(const char *value, size_t size)
{
    if (size == 0 || size > 18) return 0;
    for (size_t i = 0; i < size; i++)
        if (value[i] < '0' || value[i] > '9') return 0;
    return 1;
}

enum MHD_Result MHD_lookup_connection_value_n(struct MHD_Connection *connection, enum MHD_ValueKind kind,
                                              const char *key, size_t key_size, const char **value_ptr,
                                              size_t *value_size_ptr)
{
    static void *slot;
    dg_lookup_fn next = (dg_lookup_fn) dg_next(&slot, "MHD_lookup_connection_value_n");
    if (!next) return MHD_NO;
    if (kind != MHD_HEADER_KIND || !key || key_size != 14 || strncasecmp(key, "Content-Length", 14) != 0)
        return next(connection, kind, key, key_size, value_ptr, value_size_ptr);
    const char *value = NULL;
    size_t size = 0;
    if (next(connection, kind, key, key_size, &value, &size) != MHD_YES) return MHD_NO;
    if (!value || !dg_plain_length(value, size)) return MHD_NO;
    if (value_ptr) *value_ptr = value;
    if (value_size_ptr) *value_size_ptr = size;
    return MHD_YES;
}
