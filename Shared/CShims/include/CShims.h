// Thin C helpers for what Swift cannot call directly: the variadic rd_kafka_producev, glibc's malloc tuning, and
// the Linux calls of the HTTP server that Swift's Glibc module leaves out (epoll, eventfd, accept4).
// Nothing else belongs here.
#ifndef CSHIMS_H
#define CSHIMS_H
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <stdarg.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <librdkafka/rdkafka.h>

/// accept4 (a GNU extension): the next connection of `listener`, non-blocking and closed on exec; -1 and errno.
int shim_accept(int listener, struct sockaddr *address, socklen_t *length);

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
