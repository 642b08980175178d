/* libmicrohttpd 0.9.75 answers a few requests itself, before the gateway sees them: a request line or header block
   over its memory (414, 431), a header or trailer line without a colon or a malformed chunk (400), a chunk size it cannot hold (413), an HTTP
   major version other than 1 (505, an HTTP/2 preface among them) and an internal failure (500). Its answer is a short HTML page with no Content-Type. It makes that answer with the exported
   MHD_create_response_from_buffer (persistent memory, an HTML page: the gateway itself always copies or hands over
   its bodies) and queues it at once with MHD_queue_response, both through the PLT, so these definitions in the program come
   first: the page is swapped, at queueing, for the gateway's problem+json of the same status. Statuses not listed
   keep libmicrohttpd's page. Every other call is passed through unchanged. */
#include "next.h"
#include <stddef.h>
#include <string.h>
#include <microhttpd.h>
#include "dg_mhd_fixes.h"

typedef struct MHD_Response *(*dg_create_fn)(size_t, void *, enum MHD_ResponseMemoryMode);
typedef enum MHD_Result (*dg_queue_fn)(struct MHD_Connection *, unsigned int, struct MHD_Response *);

/* libmicrohttpd's own answer, between its making and its queueing (the two calls follow each other on one thread). */
static __thread struct MHD_Response *dg_own_answer;

static void *dg_create_slot, *dg_queue_slot;

int dg_mhd_errors_linked(void) { return 1; }

struct MHD_Response *MHD_create_response_from_buffer(size_t size, void *buffer, enum MHD_ResponseMemoryMode mode)
{
    dg_create_fn create = (dg_create_fn) dg_next(&dg_create_slot, "MHD_create_response_from_buffer");
    if (!create) return NULL;
    struct MHD_Response *response = create(size, buffer, mode);
    /* Its pages are "<html>…" (or empty when it is built without messages); nothing else is taken for one. */
    if (mode == MHD_RESPMEM_PERSISTENT && (size == 0 || (size >= 6 && buffer && memcmp(buffer, "<html>", 6) == 0)))
        dg_own_answer = response;
    return response;
}

#define DG_PROBLEM(code, title, status, detail) \
    "{\"type\":\"urn:desk-gateway:problem:" code "\",\"title\":\"" title "\",\"status\":" #status \
    ",\"detail\":\"" detail "\",\"code\":\"" code "\"}"

/* The problem for a status libmicrohttpd answers itself, or NULL to keep its page. */
static const char *dg_problem(unsigned int status)
{
    switch (status) {
    case 400: return DG_PROBLEM("malformed_request", "Malformed request", 400,
                                "The request could not be parsed: a header or trailer line without a colon, or a malformed chunk.");
    case 413: return DG_PROBLEM("payload_too_large", "Request body too large", 413,
                                "A chunk of the body is larger than the gateway accepts.");
    case 414: return DG_PROBLEM("uri_too_long", "Request target too long", 414,
                                "The request line is longer than a request's head may be (about 16,000 bytes with its headers).");
    case 431: return DG_PROBLEM("headers_too_large", "Request header fields too large", 431,
                                "The request line and headers are larger than a request's head may be (about 16,000 bytes).");
    case 500: return DG_PROBLEM("internal_error", "Internal server error", 500,
                                "The request could not be handled.");
    case 505: return DG_PROBLEM("http_version_not_supported", "HTTP version not supported", 505,
                                "The gateway speaks HTTP/1.1 (and 1.0) on this connection; HTTP/2 needs a proxy in front.");
    default: return NULL;
    }
}

enum MHD_Result MHD_queue_response(struct MHD_Connection *connection, unsigned int status_code, struct MHD_Response *response)
{
    dg_queue_fn queue = (dg_queue_fn) dg_next(&dg_queue_slot, "MHD_queue_response");
    if (!queue) return MHD_NO;
    const char *problem = NULL;
    if (response && response == dg_own_answer) problem = dg_problem(status_code);
    dg_own_answer = NULL;
    if (!problem) return queue(connection, status_code, response);
    dg_create_fn create = (dg_create_fn) dg_next(&dg_create_slot, "MHD_create_response_from_buffer");
    struct MHD_Response *replaced = create ? create(strlen(problem), (void *) problem, MHD_RESPMEM_PERSISTENT) : NULL;
    if (!replaced) return queue(connection, status_code, response);
    if (MHD_add_response_header(replaced, MHD_HTTP_HEADER_CONTENT_TYPE, "application/problem+json") != MHD_YES) {
        MHD_destroy_response(replaced);
        return queue(connection, status_code, response);
    }
    /* The connection holds its own reference; libmicrohttpd destroys its page after this returns. */
    enum MHD_Result queued = queue(connection, status_code, replaced);
    MHD_destroy_response(replaced);
    return queued;
}
