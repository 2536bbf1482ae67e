// libcurl for sending mail over SMTP and Web Push messages over HTTP. curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call:
// these typed forwarders are the only way the Mail and Push modules set options.
#include <curl/curl.h>

static inline CURLcode shim_curl_set_string(CURL *curl, CURLoption option, const char *value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode shim_curl_set_long(CURL *curl, CURLoption option, long value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode shim_curl_set_pointer(CURL *curl, CURLoption option, void *value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode shim_curl_set_list(CURL *curl, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(curl, option, value);
}
static inline CURLcode shim_curl_set_read_function(CURL *curl, size_t (*read)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(curl, CURLOPT_READFUNCTION, read);
}
/* CURLOPT_WRITEFUNCTION or CURLOPT_HEADERFUNCTION. */
static inline CURLcode shim_curl_set_data_function(CURL *curl, CURLoption option, size_t (*write)(char *, size_t, size_t, void *)) {
    return curl_easy_setopt(curl, option, write);
}
static inline CURLcode shim_curl_set_size(CURL *curl, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(curl, option, value);
}
static inline long shim_curl_response_code(CURL *curl) {
    long code = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &code);
    return code;
}
