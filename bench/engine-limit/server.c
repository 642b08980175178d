/* The engine's own limit: libmicrohttpd with the gateway's flags (internal polling threads, poll(), a pool of
 * HTTP_THREADS, suspend/resume allowed) answering every request with a fixed JSON body, nothing else. make bench
 * runs it in the same sitting as the gateway and prints each core scenario as a ratio to it.
 *   server PORT [THREADS] */
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char body[] = "{\"status\":\"ok\"}";
static struct MHD_Response *answer;
static int seen;

static enum MHD_Result handle(void *cls, struct MHD_Connection *connection, const char *url, const char *method,
                              const char *version, const char *upload, size_t *upload_size, void **state) {
    (void) cls; (void) url; (void) method; (void) version; (void) upload;
    /* Answered in the second call, as the gateway does: answering in the first costs keep-alive. */
    if (*state == NULL) { *state = &seen; return MHD_YES; }
    if (*upload_size != 0) { *upload_size = 0; return MHD_YES; }
    return MHD_queue_response(connection, MHD_HTTP_OK, answer);
}

static void stop(int signal_number) { (void) signal_number; }

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s PORT [THREADS]\n", argv[0]); return 2; }
    unsigned threads = argc > 2 ? (unsigned) atoi(argv[2]) : 2;
    answer = MHD_create_response_from_buffer(sizeof body - 1, (void *) body, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(answer, "Content-Type", "application/json");
    struct MHD_Daemon *daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_ALLOW_SUSPEND_RESUME, (uint16_t) atoi(argv[1]), NULL, NULL,
        &handle, NULL, MHD_OPTION_THREAD_POOL_SIZE, threads, MHD_OPTION_CONNECTION_TIMEOUT, 30u,
        MHD_OPTION_CONNECTION_LIMIT, 1024u, MHD_OPTION_END);
    if (daemon == NULL) { fprintf(stderr, "cannot listen on port %s\n", argv[1]); return 1; }
    signal(SIGTERM, stop);
    signal(SIGINT, stop);
    pause();
    MHD_stop_daemon(daemon);
    MHD_destroy_response(answer);
    return 0;
}
