// Thin C helpers for the two C APIs that Swift cannot call directly
// because they are variadic (MHD_start_daemon, MHD_get_connection_info, MHD_get_daemon_info,
// rd_kafka_producev). Nothing else belongs here.
#ifndef CSHIMS_H
#define CSHIMS_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <microhttpd.h>
#include <librdkafka/rdkafka.h>

/// Starts an epoll thread-pool daemon on `port` (all addresses): at most `connection_limit` connections, each closed
/// after `connection_timeout_seconds` idle; `accept_policy` admits new connections and `notify` hears them open and
/// close, `request_line` hears each request line arrive (it must return NULL); "%00" in a path or query stays as it
/// is (a NUL would cut it short).
struct MHD_Daemon *shim_mhd_start(uint16_t port, unsigned int threads,
                                  unsigned int connection_timeout_seconds, unsigned int connection_limit,
                                  MHD_AccessHandlerCallback handler, void *handler_cls,
                                  MHD_RequestCompletedCallback completed, void *completed_cls,
                                  MHD_AcceptPolicyCallback accept_policy, void *accept_cls,
                                  MHD_NotifyConnectionCallback notify, void *notify_cls,
                                  void *(*request_line)(void *cls, const char *uri, struct MHD_Connection *connection),
                                  void *request_line_cls);

/// The socket of `connection`; -1 when unknown.
int shim_mhd_connection_fd(struct MHD_Connection *connection);

/// Writes the numeric form of `address` into `buffer`; returns 0 on success.
int shim_sockaddr_address(const struct sockaddr *address, char *buffer, size_t length);

/// The port the daemon listens on (the one the system chose when started on port 0); 0 when unknown.
uint16_t shim_mhd_bound_port(struct MHD_Daemon *daemon);

/// Writes the numeric client address of `connection` into `buffer`; returns 0 on success.
int shim_mhd_client_address(struct MHD_Connection *connection, char *buffer, size_t length);

/// Produces one message with an optional single header; `opaque` comes back in the delivery report.
rd_kafka_resp_err_t shim_kafka_produce(rd_kafka_t *rk, const char *topic,
                                       const void *key, size_t key_length,
                                       const void *value, size_t value_length,
                                       const char *header_name, const char *header_value,
                                       void *opaque);

/// Fixes glibc's mmap threshold at `bytes` (it otherwise rises after the first large free, and large blocks then stay
/// in the threads' arenas for good).
void shim_fix_mmap_threshold(int bytes);

/// Returns the free pages of glibc's heaps to the system (malloc_trim).
void shim_release_free_memory(void);
#endif
