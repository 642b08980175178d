#ifndef DG_CURL_SHIM_H
#define DG_CURL_SHIM_H
#include <curl/curl.h>

/* curl_easy_setopt and curl_easy_getinfo are C-variadic, which Swift cannot call: one fixed-arity wrapper per
   argument type curl reads through va_arg. */
static inline CURLcode dg_curl_set_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode dg_curl_set_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode dg_curl_set_list(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}
typedef size_t (*dg_curl_write_callback)(char *data, size_t size, size_t count, void *context);
static inline CURLcode dg_curl_set_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode dg_curl_set_size(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}
/* Response headers, one line per call (status lines included). */
static inline CURLcode dg_curl_set_header_writer(CURL *handle, dg_curl_write_callback callback, void *context) {
    CURLcode code = curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, callback);
    return code != CURLE_OK ? code : curl_easy_setopt(handle, CURLOPT_HEADERDATA, context);
}
/* Called often during a transfer, idle or not; a non-zero return aborts it (CURLE_ABORTED_BY_CALLBACK). */
typedef int (*dg_curl_progress_callback)(void *context, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow);
static inline CURLcode dg_curl_set_progress(CURL *handle, dg_curl_progress_callback callback, void *context) {
    CURLcode code = curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, callback);
    if (code == CURLE_OK) code = curl_easy_setopt(handle, CURLOPT_XFERINFODATA, context);
    return code != CURLE_OK ? code : curl_easy_setopt(handle, CURLOPT_NOPROGRESS, 0L);
}
static inline CURLcode dg_curl_set_writer(CURL *handle, dg_curl_write_callback callback, void *context) {
    CURLcode code = curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
    return code != CURLE_OK ? code : curl_easy_setopt(handle, CURLOPT_WRITEDATA, context);
}
static inline long dg_curl_status(CURL *handle) {
    long status = 0;
    curl_easy_getinfo(handle, CURLINFO_RESPONSE_CODE, &status);
    return status;
}
/* The Location of a 3xx answer made absolute by curl (NULL when there is none). */
static inline const char *dg_curl_redirect(CURL *handle) {
    char *url = NULL;
    curl_easy_getinfo(handle, CURLINFO_REDIRECT_URL, &url);
    return url;
}
#endif
