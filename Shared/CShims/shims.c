#include "CShims.h"
#include <malloc.h>
#include <netdb.h>
#include <string.h>

static int hex_value(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decoding as libmicrohttpd's own, except that %00 stays as it is: a NUL would cut the path short. */
static size_t unescape_keeping_nul(void *cls, struct MHD_Connection *connection, char *s) {
    (void) cls; (void) connection;
    char *w = s;
    const char *r = s;
    while (*r) {
        if (r[0] == '%' && hex_value(r[1]) >= 0 && hex_value(r[2]) >= 0) {
            int v = hex_value(r[1]) * 16 + hex_value(r[2]);
            if (v != 0) { *w++ = (char) v; r += 3; continue; }
        }
        *w++ = *r++;
    }
    *w = 0;
    return (size_t) (w - s);
}

struct MHD_Daemon *shim_mhd_start(uint16_t port, unsigned int threads,
                                  unsigned int connection_timeout_seconds, unsigned int connection_limit,
                                  MHD_AccessHandlerCallback handler, void *handler_cls,
                                  MHD_RequestCompletedCallback completed, void *completed_cls,
                                  MHD_AcceptPolicyCallback accept_policy, void *accept_cls,
                                  MHD_NotifyConnectionCallback notify, void *notify_cls,
                                  void *(*request_line)(void *cls, const char *uri, struct MHD_Connection *connection),
                                  void *request_line_cls) {
    unsigned int flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC
                       | MHD_ALLOW_SUSPEND_RESUME;
    return MHD_start_daemon(flags, port, accept_policy, accept_cls, handler, handler_cls,
                            MHD_OPTION_THREAD_POOL_SIZE, threads,
                            MHD_OPTION_CONNECTION_TIMEOUT, connection_timeout_seconds,
                            MHD_OPTION_CONNECTION_LIMIT, connection_limit,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_cls,
                            MHD_OPTION_NOTIFY_CONNECTION, notify, notify_cls,
                            MHD_OPTION_URI_LOG_CALLBACK, request_line, request_line_cls,
                            MHD_OPTION_LISTENING_ADDRESS_REUSE, (unsigned int) 1,
                            MHD_OPTION_UNESCAPE_CALLBACK, unescape_keeping_nul, NULL,
                            MHD_OPTION_END);
}

int shim_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

int shim_sockaddr_address(const struct sockaddr *address, char *buffer, size_t length) {
    if (address == NULL) return -1;
    socklen_t size = address->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    return getnameinfo(address, size, buffer, (socklen_t) length, NULL, 0, NI_NUMERICHOST);
}

uint16_t shim_mhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

int shim_mhd_client_address(struct MHD_Connection *connection, char *buffer, size_t length) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL || info->client_addr == NULL) return -1;
    socklen_t size = info->client_addr->sa_family == AF_INET6
        ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    return getnameinfo(info->client_addr, size, buffer, (socklen_t) length, NULL, 0, NI_NUMERICHOST);
}

rd_kafka_resp_err_t shim_kafka_produce(rd_kafka_t *rk, const char *topic,
                                       const void *key, size_t key_length,
                                       const void *value, size_t value_length,
                                       const char *header_name, const char *header_value,
                                       void *opaque) {
    if (header_name != NULL) {
        return rd_kafka_producev(rk,
            RD_KAFKA_V_TOPIC(topic),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_KEY(key, key_length),
            RD_KAFKA_V_VALUE((void *) value, value_length),
            RD_KAFKA_V_HEADER(header_name, header_value, (ssize_t) strlen(header_value)),
            RD_KAFKA_V_OPAQUE(opaque),
            RD_KAFKA_V_END);
    }
    return rd_kafka_producev(rk,
        RD_KAFKA_V_TOPIC(topic),
        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
        RD_KAFKA_V_KEY(key, key_length),
        RD_KAFKA_V_VALUE((void *) value, value_length),
        RD_KAFKA_V_OPAQUE(opaque),
        RD_KAFKA_V_END);
}

void shim_fix_mmap_threshold(int bytes) {
    mallopt(M_MMAP_THRESHOLD, bytes);
}

void shim_release_free_memory(void) {
    malloc_trim(0);
}
