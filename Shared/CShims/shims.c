#define _GNU_SOURCE
#include "CShims.h"
#include <malloc.h>
#include <string.h>

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

int shim_accept(int listener, struct sockaddr *address, socklen_t *length) {
    return accept4(listener, address, length, SOCK_NONBLOCK | SOCK_CLOEXEC);
}
