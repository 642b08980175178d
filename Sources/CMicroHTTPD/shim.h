#ifndef DG_MHD_SHIM_H
#define DG_MHD_SHIM_H
#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <stdlib.h>
#include <pthread.h>
#include <time.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <microhttpd.h>

/* One connection as the header deadline sweeper sees it. */
struct dg_mhd_conn {
    struct dg_mhd_conn *prev, *next;
    int fd;
    long long started_ms;
    int headers_done;
    int listed;
    /* Where the current request's target ends as libmicrohttpd first saw it (before unescaping): a NUL byte inside the
       raw target shows up as a gap between this and the HTTP version. */
    const char *target_end;
    /* The request's query had more arguments than DG_MHD_MAX_ARGUMENTS, and was cut before libmicrohttpd parsed it. */
    int query_dropped;
    /* The client's address as text, made once when the connection starts (inet_ntop formats through sprintf, a
       measurable part of a kept-alive request's cost when done per request); address_length 0 when unknown. */
    unsigned char address_length;
    char address[INET6_ADDRSTRLEN];
};

/* Per-daemon bookkeeping shared with the connection callbacks: the live connection count (read by the server to
   answer 503 past its own limit, which sits below libmicrohttpd's), the header timeout of new connections, and the
   connections still waiting for their first request's headers (for the deadline sweeper). */
struct dg_mhd_state {
    unsigned int request_timeout;
    unsigned int live;
    pthread_mutex_t lock;
    struct dg_mhd_conn *head;
};

static inline void dg_mhd_state_init(struct dg_mhd_state *state, unsigned int request_timeout)
{
    memset(state, 0, sizeof(*state));
    state->request_timeout = request_timeout;
    pthread_mutex_init(&state->lock, NULL);
}

static inline void dg_mhd_state_destroy(struct dg_mhd_state *state)
{
    pthread_mutex_destroy(&state->lock);
}

static inline unsigned int dg_mhd_live(struct dg_mhd_state *state)
{
    return __atomic_load_n(&state->live, __ATOMIC_RELAXED);
}

static inline long long dg_mhd_now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long) now.tv_sec * 1000 + now.tv_nsec / 1000000;
}

/* The client's IP address as text into `buffer`; returns its length, 0 when unknown. */
static inline size_t dg_mhd_format_ip(struct MHD_Connection *connection, char *buffer, size_t length)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!info || !info->client_addr) return 0;
    const struct sockaddr *address = info->client_addr;
    const char *text = NULL;
    if (address->sa_family == AF_INET)
        text = inet_ntop(AF_INET, &((const struct sockaddr_in *) address)->sin_addr, buffer, (socklen_t) length);
    else if (address->sa_family == AF_INET6)
        text = inet_ntop(AF_INET6, &((const struct sockaddr_in6 *) address)->sin6_addr, buffer, (socklen_t) length);
    return text ? strlen(buffer) : 0;
}

/* A new connection gets `request_timeout` seconds of silence, not the idle timeout, until its first request (headers
   and body) is in (dg_mhd_headers_done then restores the idle timeout): connections that never send a request, or
   send it a byte at a time, are dropped sooner than idle keep-alive ones. It is also registered for the sweeper,
   which ends it when that request is not complete `request_timeout` seconds after the connection was accepted,
   however the bytes trickle in. libmicrohttpd reports a connection closed before it closes the socket, so the sweeper never
   touches a descriptor that was reused. */
static inline void dg_mhd_connection_event(void *cls, struct MHD_Connection *connection, void **socket_context,
                                           enum MHD_ConnectionNotificationCode code)
{
    struct dg_mhd_state *state = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        __atomic_fetch_add(&state->live, 1, __ATOMIC_RELAXED);
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct dg_mhd_conn *entry = calloc(1, sizeof(*entry));
        if (!info || !entry) { free(entry); return; }
        entry->fd = info->connect_fd;
        entry->started_ms = dg_mhd_now_ms();
        entry->address_length = (unsigned char) dg_mhd_format_ip(connection, entry->address, sizeof entry->address);
        *socket_context = entry;
        if (state->request_timeout == 0) return;
        MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, state->request_timeout);
        pthread_mutex_lock(&state->lock);
        entry->listed = 1;
        entry->next = state->head;
        if (state->head) state->head->prev = entry;
        state->head = entry;
        pthread_mutex_unlock(&state->lock);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        __atomic_fetch_sub(&state->live, 1, __ATOMIC_RELAXED);
        struct dg_mhd_conn *entry = *socket_context;
        if (!entry) return;
        if (entry->listed) {
            pthread_mutex_lock(&state->lock);
            if (entry->prev) entry->prev->next = entry->next; else state->head = entry->next;
            if (entry->next) entry->next->prev = entry->prev;
            pthread_mutex_unlock(&state->lock);
        }
        *socket_context = NULL;
        free(entry);
    }
}

static inline struct dg_mhd_conn *dg_mhd_entry(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info ? info->socket_context : NULL;
}

/* libmicrohttpd 0.9.75 keeps a record per query argument in the connection's memory; when they do not fit, it queues
   a 431 but then goes on reading the header block and closes the connection without sending it (about 250 to 440
   arguments at the default 32 KiB). A query with more arguments than this is cut at its '?' here, before
   libmicrohttpd parses it (the target is the connection's own buffer, which libmicrohttpd itself writes into), and
   the request is refused with a problem. Returns 1 when cut. */
#define DG_MHD_MAX_ARGUMENTS 128
static inline int dg_mhd_drop_long_query(char *uri)
{
    char *query = strchr(uri, '?');
    if (!query) return 0;
    unsigned int arguments = 1;
    for (const char *at = query + 1; *at; at++)
        if (*at == '&' && ++arguments > DG_MHD_MAX_ARGUMENTS) {
            query[1] = '\0';
            return 1;
        }
    return 0;
}

/* libmicrohttpd's URI logger: it sees the request target raw, before any unescaping. It also starts the deadline of
   a later request on a kept-alive connection, from the moment its request line is in (the wait before it is idle
   time, under the idle timeout). Returns NULL so the access handler's per-request context starts empty as before. */
static inline void *dg_mhd_target_seen(void *cls, const char *uri, struct MHD_Connection *connection)
{
    struct dg_mhd_state *state = cls;
    struct dg_mhd_conn *entry = dg_mhd_entry(connection);
    if (!entry || !uri) return NULL;
    entry->target_end = uri + strlen(uri);
    entry->query_dropped = dg_mhd_drop_long_query((char *) uri);
    if (state && state->request_timeout > 0 && entry->listed && __atomic_load_n(&entry->headers_done, __ATOMIC_ACQUIRE) == 1) {
        __atomic_store_n(&entry->started_ms, dg_mhd_now_ms(), __ATOMIC_RELAXED);
        __atomic_store_n(&entry->headers_done, 0, __ATOMIC_RELEASE);
        MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, state->request_timeout);
    }
    return NULL;
}

/* The request is in, headers and body: the idle timeout applies until the next request line, and the sweeper leaves
   the connection alone until then. */
static inline void dg_mhd_headers_done(struct MHD_Connection *connection, unsigned int idle_timeout)
{
    struct dg_mhd_conn *entry = dg_mhd_entry(connection);
    if (!entry || __atomic_load_n(&entry->headers_done, __ATOMIC_RELAXED)) return;
    __atomic_store_n(&entry->headers_done, 1, __ATOMIC_RELAXED);
    MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, idle_timeout);
}

/* Shuts down (libmicrohttpd then closes) every connection whose first request is overdue; returns how many. */
static inline int dg_mhd_sweep(struct dg_mhd_state *state)
{
    int ended = 0;
    long long deadline = dg_mhd_now_ms() - (long long) state->request_timeout * 1000;
    pthread_mutex_lock(&state->lock);
    for (struct dg_mhd_conn *entry = state->head; entry; entry = entry->next) {
        if (__atomic_load_n(&entry->headers_done, __ATOMIC_ACQUIRE) || __atomic_load_n(&entry->started_ms, __ATOMIC_RELAXED) > deadline) continue;
        __atomic_store_n(&entry->headers_done, 2, __ATOMIC_RELAXED);
        shutdown(entry->fd, SHUT_RDWR);
        ended++;
    }
    pthread_mutex_unlock(&state->lock);
    return ended;
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

/* One header or query argument as libmicrohttpd parsed it, pointing into the connection's memory (valid until the
   request ends). Copied out with the sizes libmicrohttpd measured, so Swift makes its strings without strlen. */
struct dg_mhd_pair {
    const char *name;
    size_t name_size;
    const char *value;
    size_t value_size;
};

struct dg_mhd_pair_fill {
    struct dg_mhd_pair *pairs;
    size_t capacity;
    size_t count;
};

static inline enum MHD_Result dg_mhd_fill_pair(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                              const char *value, size_t value_size)
{
    (void) kind;
    struct dg_mhd_pair_fill *fill = cls;
    if (!key) return MHD_YES;
    if (fill->count == fill->capacity) return MHD_NO;
    fill->pairs[fill->count++] = (struct dg_mhd_pair) { key, key_size, value, value ? value_size : 0 };
    return MHD_YES;
}

/* The request's pairs of one kind in arrival order, at most `capacity` of them; returns how many. */
static inline size_t dg_mhd_pairs(struct MHD_Connection *connection, enum MHD_ValueKind kind, struct dg_mhd_pair *pairs,
                                  size_t capacity)
{
    struct dg_mhd_pair_fill fill = { pairs, capacity, 0 };
    if (capacity > 0) MHD_get_connection_values_n(connection, kind, dg_mhd_fill_pair, &fill);
    return fill.count;
}

/* What the framing checks found in the header fields (RFC 9112 §2.2, §3.2, §5.1, §6): the first field at fault and
   why (problem: 1 its name is not a token, 2 its value holds a control character, 3 Content-Length is not digits
   only, 4 Content-Length given again with another value; index is the field's), and the counts the server's rules
   need (Host fields, Content-Length fields, Transfer-Encoding fields and whether the one given is exactly chunked). */
struct dg_mhd_framing {
    int problem;
    size_t index;
    int hosts;
    int lengths;
    int codings;
    int chunked;
};

/* RFC 9110 §5.6.2 tchar: `!#$%&'*+-.` and digits; letters and `^_`|~`. */
static inline int dg_mhd_is_tchar(unsigned char byte)
{
    static const uint64_t low = 0x03FF6CFA00000000ull, high = 0x57FFFFFFC7FFFFFEull;
    return byte < 64 ? (int) ((low >> byte) & 1) : byte < 128 ? (int) ((high >> (byte - 64)) & 1) : 0;
}

/* Whether a C string (the request's method) is a token of at most `max` bytes. */
static inline int dg_mhd_is_token(const char *text, size_t max)
{
    size_t i = 0;
    for (; text[i]; i++) if (i == max || !dg_mhd_is_tchar((unsigned char) text[i])) return 0;
    return i > 0;
}

/* Whether `text` is `want` (lowercase ASCII) in any ASCII case. */
static inline int dg_mhd_names(const char *text, size_t size, const char *want, size_t want_size)
{
    if (size != want_size) return 0;
    for (size_t i = 0; i < size; i++) {
        unsigned char byte = (unsigned char) text[i];
        if ((byte >= 'A' && byte <= 'Z' ? byte + 32 : byte) != (unsigned char) want[i]) return 0;
    }
    return 1;
}

/* A bare CR (a front proxy that ends lines at it would frame the request differently), LF, NUL, DEL or any other
   control character but HTAB. */
static inline int dg_mhd_is_control(unsigned char byte)
{
    return (byte < 0x20 && byte != 0x09) || byte == 0x7F;
}

/* Whether a value holds a control character, eight bytes at a time: a word with no byte below 0x20 and none equal
   to 0x7F is clean (the bit tricks find whether such a byte exists, exactly); only a word that may hold one, a tab
   perhaps, is looked at byte by byte. A bearer token is the longest value of most requests. */
static inline int dg_mhd_has_control(const char *value, size_t size)
{
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    size_t i = 0;
    for (; i + 8 <= size; i += 8) {
        uint64_t word, del;
        memcpy(&word, value + i, 8);
        del = word ^ (ones * 0x7F);
        if ((((word - ones * 0x20) & ~word) | ((del - ones) & ~del)) & highs) {
            for (size_t j = i; j < i + 8; j++) if (dg_mhd_is_control((unsigned char) value[j])) return 1;
        }
    }
    for (; i < size; i++) if (dg_mhd_is_control((unsigned char) value[i])) return 1;
    return 0;
}

static inline int dg_mhd_field_problem(const struct dg_mhd_pair *pair, const struct dg_mhd_pair **length)
{
    if (pair->name_size == 0) return 1;
    for (size_t i = 0; i < pair->name_size; i++) if (!dg_mhd_is_tchar((unsigned char) pair->name[i])) return 1;
    if (dg_mhd_has_control(pair->value, pair->value_size)) return 2;
    if (!dg_mhd_names(pair->name, pair->name_size, "content-length", 14)) return 0;
    /* Digits only, as libmicrohttpd frames the body by it: no sign, no list, no spaces. */
    if (pair->value_size == 0) return 3;
    for (size_t i = 0; i < pair->value_size; i++) if (pair->value[i] < '0' || pair->value[i] > '9') return 3;
    if (*length && ((*length)->value_size != pair->value_size || memcmp((*length)->value, pair->value, pair->value_size))) return 4;
    *length = pair;
    return 0;
}

static inline void dg_mhd_check_fields(const struct dg_mhd_pair *pairs, size_t count, struct dg_mhd_framing *out)
{
    const struct dg_mhd_pair *length = NULL;
    *out = (struct dg_mhd_framing) { 0 };
    for (size_t index = 0; index < count; index++) {
        const struct dg_mhd_pair *pair = &pairs[index];
        int problem = dg_mhd_field_problem(pair, &length);
        if (problem) { out->problem = problem; out->index = index; return; }
        if (length == pair) {
            out->lengths++;
        } else if (dg_mhd_names(pair->name, pair->name_size, "transfer-encoding", 17)) {
            /* Compared as libmicrohttpd compares it, which frames the body: it drops the spaces before a value but
               not after, and reads "chunked " as no coding it knows, waiting for a body it cannot frame. */
            out->codings++;
            out->chunked = dg_mhd_names(pair->value, pair->value_size, "chunked", 7);
        } else if (dg_mhd_names(pair->name, pair->name_size, "host", 4)) {
            out->hosts++;
        }
    }
}

/* Whether the request holds a raw NUL byte (such a request is refused, not cut short), and where: 1 in the request
   target, 2 in a header line (or a line folded or cut short), 3 when CR LF lines end with a bare LF; 0 when clean.
   libmicrohttpd parses the header lines in place, turning each line ending (CR LF or LF) into NUL bytes and
   measuring keys and values with strlen, so a raw NUL inside a value cuts it short and the rest stays behind in the
   buffer, between the value's end and the next line. A clean request leaves exactly one or two NUL bytes there;
   anything else (a smuggled tail, a folded line moved elsewhere) is refused. The target's end as first seen must sit
   right before the HTTP version. After the last line come the empty line's NUL bytes, four of them when the client
   ends its lines with CR LF, as every client we know does. %00 in the path or query is caught by dg_mhd_unescape.
   Also runs the field checks above into `framing`. `pairs` are the request's headers from dg_mhd_pairs. */
static inline int dg_mhd_check_headers(struct MHD_Connection *connection, const char *version,
                                       const struct dg_mhd_pair *pairs, size_t count, struct dg_mhd_framing *framing)
{
    dg_mhd_check_fields(pairs, count, framing);
    struct dg_mhd_conn *entry = dg_mhd_entry(connection);
    /* Read and cleared first: a cut query is refused whatever else the request holds. */
    int dropped = entry && entry->query_dropped;
    if (entry) entry->query_dropped = 0;
    if (!version) return dropped ? 4 : 0;
    if (entry && entry->target_end) {
        int moved = entry->target_end + 1 != version;
        entry->target_end = NULL;
        if (moved) return 1;
    }
    if (dropped) return 4;
    const char *end = version + strlen(version);
    int crlf_only = 1;
    for (size_t index = 0; index < count; index++) {
        if (!pairs[index].value) continue;
        ptrdiff_t gap = pairs[index].name - end;
        if (gap < 1 || gap > 2 || end[0] != 0 || end[gap - 1] != 0) return 2;
        if (gap == 1) crlf_only = 0;
        end = pairs[index].value + pairs[index].value_size;
    }
    if (end[0] != 0 || end[1] != 0) return 2;
    return crlf_only && (end[2] != 0 || end[3] != 0) ? 3 : 0;
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
    /* A pool of one thread is none: MHD runs one thread, and names a pool size of 1 or 0 in a warning on stderr, a
       line outside the JSON log. So the option is given only for a pool; otherwise its slot repeats the timeout. */
    enum MHD_OPTION pool_option = threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_CONNECTION_TIMEOUT;
    unsigned int pool_value = threads > 1 ? threads : connection_timeout;
    return MHD_start_daemon(flags, port, NULL, NULL, handler, handler_cls,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            pool_option, pool_value,
                            MHD_OPTION_CONNECTION_TIMEOUT, connection_timeout,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip_limit,
                            MHD_OPTION_UNESCAPE_CALLBACK, dg_mhd_unescape, NULL,
                            MHD_OPTION_URI_LOG_CALLBACK, dg_mhd_target_seen, (void *) state,
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
/* The client's address of a request: the connection's copy, made when it started, else formatted now. */
static inline size_t dg_mhd_client_ip(struct MHD_Connection *connection, char *buffer, size_t length)
{
    const struct dg_mhd_conn *entry = dg_mhd_entry(connection);
    if (entry && entry->address_length > 0 && entry->address_length <= length) {
        memcpy(buffer, entry->address, entry->address_length);
        return entry->address_length;
    }
    return dg_mhd_format_ip(connection, buffer, length);
}
#endif
