#ifndef DG_MHD_SHIM_H
#define DG_MHD_SHIM_H
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <microhttpd.h>

/* Per-daemon bookkeeping shared with the connection callbacks: the live connection count (read by the server to
   answer 503 past its own limit, which sits below libmicrohttpd's) and the header timeout of new connections. */
struct dg_mhd_state {
    unsigned int request_timeout;
    unsigned int live;
};

static inline unsigned int dg_mhd_live(struct dg_mhd_state *state)
{
    return __atomic_load_n(&state->live, __ATOMIC_RELAXED);
}

/* A new connection gets `request_timeout` seconds of silence, not the idle timeout, until its first request's headers
   are in (dg_mhd_set_timeout then restores the idle timeout): connections that never send a request, or send it a
   byte at a time, are dropped sooner than idle keep-alive ones. 0 keeps the daemon's timeout. */
static inline void dg_mhd_connection_event(void *cls, struct MHD_Connection *connection, void **socket_context,
                                           enum MHD_ConnectionNotificationCode code)
{
    (void) socket_context;
    struct dg_mhd_state *state = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        __atomic_fetch_add(&state->live, 1, __ATOMIC_RELAXED);
        if (state->request_timeout > 0)
            MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, state->request_timeout);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        __atomic_fetch_sub(&state->live, 1, __ATOMIC_RELAXED);
    }
}

/* MHD_set_connection_option is C-variadic too. */
static inline void dg_mhd_set_timeout(struct MHD_Connection *connection, unsigned int seconds)
{
    MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, seconds);
}

/* Unescapes like libmicrohttpd, but a NUL byte that %00 would put in a path or query value turns the whole value into
   the single byte 0x7F, which the server refuses with 400: C strings would otherwise silently cut the value there. */
static inline size_t dg_mhd_unescape(void *cls, struct MHD_Connection *connection, char *value)
{
    (void) cls; (void) connection;
    size_t length = MHD_http_unescape(value);
    if (strlen(value) != length) { value[0] = 0x7F; value[1] = 0; return 1; }
    return length;
}

static inline enum MHD_Result dg_mhd_find_nul(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                              const char *value, size_t value_size)
{
    (void) kind;
    if ((key && strlen(key) != key_size) || (value && strlen(value) != value_size)) { *(int *) cls = 1; return MHD_NO; }
    return MHD_YES;
}

/* Whether any header, cookie or query argument holds a NUL byte (such a request is refused, not cut short). */
static inline int dg_mhd_has_nul(struct MHD_Connection *connection)
{
    int found = 0;
    MHD_get_connection_values_n(connection, (enum MHD_ValueKind) (MHD_HEADER_KIND | MHD_COOKIE_KIND | MHD_GET_ARGUMENT_KIND),
                                dg_mhd_find_nul, &found);
    return found;
}

/* MHD_start_daemon is C-variadic, which Swift cannot call; this fixed-arity wrapper passes each option with the
   exact type MHD reads through va_arg. Returns NULL when the host is not an IPv4 literal or MHD refuses to start. */
static inline struct MHD_Daemon *dg_mhd_start(unsigned int flags, const char *host, uint16_t port,
                                              MHD_AccessHandlerCallback handler, void *handler_cls,
                                              MHD_RequestCompletedCallback completed, void *completed_cls,
                                              unsigned int threads, unsigned int connection_timeout,
                                              unsigned int connection_limit, size_t memory_limit,
                                              unsigned int listen_backlog, unsigned int per_ip_limit,
                                              struct dg_mhd_state *state)
{
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof(addr));
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    if (inet_pton(AF_INET, host, &addr.sin_addr) != 1) return NULL;
    return MHD_start_daemon(flags, port, NULL, NULL, handler, handler_cls,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_THREAD_POOL_SIZE, threads,
                            MHD_OPTION_CONNECTION_TIMEOUT, connection_timeout,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip_limit,
                            MHD_OPTION_UNESCAPE_CALLBACK, dg_mhd_unescape, NULL,
                            MHD_OPTION_NOTIFY_CONNECTION, dg_mhd_connection_event, (void *) state,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, memory_limit,
                            MHD_OPTION_LISTEN_BACKLOG_SIZE, listen_backlog,
                            MHD_OPTION_SOCK_ADDR, (const struct sockaddr *) &addr,
                            MHD_OPTION_END);
}

/* The port actually bound (useful when 0 asked the kernel for an ephemeral one). */
static inline uint16_t dg_mhd_bound_port(struct MHD_Daemon *daemon)
{
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : 0;
}
/* The client's IP address as text; returns 0 when unknown. */
static inline int dg_mhd_client_ip(struct MHD_Connection *connection, char *buffer, size_t length)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!info || !info->client_addr) return 0;
    const struct sockaddr *address = info->client_addr;
    if (address->sa_family == AF_INET)
        return inet_ntop(AF_INET, &((const struct sockaddr_in *) address)->sin_addr, buffer, (socklen_t) length) != NULL;
    if (address->sa_family == AF_INET6)
        return inet_ntop(AF_INET6, &((const struct sockaddr_in6 *) address)->sin6_addr, buffer, (socklen_t) length) != NULL;
    return 0;
}
#endif
