/* The engine's own limit: libmicrohttpd with the gateway's flags (internal polling threads, poll(), a pool of
 * HTTP_THREADS, suspend/resume allowed) answering every request with a fixed JSON body, nothing else. make bench
 * runs it in the same sitting as the gateway and prints each core scenario as a ratio to it.
 *   server PORT [THREADS] [per-request]
 * With "per-request" the answer is made for each request, with the four headers of the gateway's /livez (one of
 * them numbered per request), as a server whose answers vary must: libmicrohttpd's own cost of a response. */
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char body[] = "{\"status\":\"ok\"}";
static struct MHD_Response *answer;
static int seen;
static unsigned long answered;

static struct MHD_Response *made_per_request(void) {
    char id[32];
    snprintf(id, sizeof id, "0f1e2d3c-%lx", __atomic_add_fetch(&answered, 1, __ATOMIC_RELAXED));
    struct MHD_Response *response = MHD_create_response_from_buffer(sizeof body - 1, (void *) body, MHD_RESPMEM_MUST_COPY);
    if (response == NULL) return NULL;
    MHD_add_response_header(response, "Content-Type", "application/health+json");
    MHD_add_response_header(response, "Cache-Control", "no-store");
    MHD_add_response_header(response, "ETag", "\"16d1f84e94437e7d\"");
    MHD_add_response_header(response, "X-Request-ID", id);
    return response;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *connection, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **state) {
    (void) cls; (void) url; (void) method; (void) version; (void) upload;
    /* Answered in the second call, as the gateway does: answering in the first costs keep-alive. */
    if (*state == NULL) { *state = &seen; return MHD_YES; }
    if (*upload_size != 0) { *upload_size = 0; return MHD_YES; }
    if (answer != NULL) return MHD_queue_response(connection, MHD_HTTP_OK, answer);
    struct MHD_Response *response = made_per_request();
    if (response == NULL) return MHD_NO;
    enum MHD_Result queued = MHD_queue_response(connection, MHD_HTTP_OK, response);
    MHD_destroy_response(response);
    return queued;
}

static void stop(int signal_number) { (void) signal_number; }

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s PORT [THREADS] [per-request]\n", argv[0]); return 2; }
    unsigned threads = argc > 2 ? (unsigned) atoi(argv[2]) : 2;
    if (argc <= 3 || strcmp(argv[3], "per-request") != 0) {
        answer = MHD_create_response_from_buffer(sizeof body - 1, (void *) body, MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(answer, "Content-Type", "application/json");
    }
    struct MHD_Daemon *daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME, (uint16_t) atoi(argv[1]), NULL, NULL,
        &handle, NULL, MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_CONNECTION_TIMEOUT, 30u,
        MHD_OPTION_CONNECTION_LIMIT, 1024u, MHD_OPTION_END);
    if (daemon == NULL) { fprintf(stderr, "cannot listen on port %s\n", argv[1]); return 1; }
    signal(SIGTERM, stop);
    signal(SIGINT, stop);
    pause();
    MHD_stop_daemon(daemon);
    if (answer != NULL) MHD_destroy_response(answer);
    return 0;
}
