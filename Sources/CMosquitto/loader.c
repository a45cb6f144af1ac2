// libmosquitto through dlopen: see CMosquitto.h. Every entry point is resolved at load; a library missing one is
// refused. The hrm_ functions are called only after hrm_load returned 1 (MQTTConnection makes sure of it).
#include "CMosquitto.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// Written once under `once`, read-only afterwards.
static struct {
    int loaded;
    char why[512];
    int (*lib_init)(void);
    struct mosquitto *(*new_)(const char *, bool, void *);
    void (*destroy)(struct mosquitto *);
    int (*will_set)(struct mosquitto *, const char *, int, const void *, int, bool);
    int (*username_pw_set)(struct mosquitto *, const char *, const char *);
    int (*connect_async)(struct mosquitto *, const char *, int, int);
    int (*disconnect)(struct mosquitto *);
    int (*publish)(struct mosquitto *, int *, const char *, int, const void *, int, bool);
    int (*subscribe)(struct mosquitto *, int *, const char *, int);
    int (*loop_start)(struct mosquitto *);
    int (*loop_stop)(struct mosquitto *, bool);
    int (*int_option)(struct mosquitto *, enum mosq_opt_t, int);
    int (*reconnect_delay_set)(struct mosquitto *, unsigned int, unsigned int, bool);
    void (*user_data_set)(struct mosquitto *, void *);
    int (*tls_set)(struct mosquitto *, const char *, const char *, const char *, const char *,
                   int (*)(char *, int, int, void *));
    void (*connect_callback_set)(struct mosquitto *, void (*)(struct mosquitto *, void *, int));
    void (*disconnect_callback_set)(struct mosquitto *, void (*)(struct mosquitto *, void *, int));
    void (*publish_callback_set)(struct mosquitto *, void (*)(struct mosquitto *, void *, int));
    void (*message_callback_set)(struct mosquitto *,
                                 void (*)(struct mosquitto *, void *, const struct mosquitto_message *));
    void (*log_callback_set)(struct mosquitto *, void (*)(struct mosquitto *, void *, int, const char *));
    const char *(*strerror_)(int);
    const char *(*connack_string)(int);
} api;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void) {
    const char *override = getenv("HR_GATEWAY_LIBMOSQUITTO");
    const char *path = (override != NULL && override[0] != '\0') ? override : "libmosquitto.so.1";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *e = dlerror();
        snprintf(api.why, sizeof api.why, "%s", e != NULL ? e : path);
        return;
    }
#define SYM(field, name)                                                                                             \
    *(void **)(&api.field) = dlsym(h, name);                                                                         \
    if (api.field == NULL) {                                                                                         \
        snprintf(api.why, sizeof api.why, "%s has no %s", path, name);                                              \
        dlclose(h);                                                                                                  \
        return;                                                                                                      \
    }
    SYM(lib_init, "mosquitto_lib_init")
    SYM(new_, "mosquitto_new")
    SYM(destroy, "mosquitto_destroy")
    SYM(will_set, "mosquitto_will_set")
    SYM(username_pw_set, "mosquitto_username_pw_set")
    SYM(connect_async, "mosquitto_connect_async")
    SYM(disconnect, "mosquitto_disconnect")
    SYM(publish, "mosquitto_publish")
    SYM(subscribe, "mosquitto_subscribe")
    SYM(loop_start, "mosquitto_loop_start")
    SYM(loop_stop, "mosquitto_loop_stop")
    SYM(int_option, "mosquitto_int_option")
    SYM(reconnect_delay_set, "mosquitto_reconnect_delay_set")
    SYM(user_data_set, "mosquitto_user_data_set")
    SYM(tls_set, "mosquitto_tls_set")
    SYM(connect_callback_set, "mosquitto_connect_callback_set")
    SYM(disconnect_callback_set, "mosquitto_disconnect_callback_set")
    SYM(publish_callback_set, "mosquitto_publish_callback_set")
    SYM(message_callback_set, "mosquitto_message_callback_set")
    SYM(log_callback_set, "mosquitto_log_callback_set")
    SYM(strerror_, "mosquitto_strerror")
    SYM(connack_string, "mosquitto_connack_string")
#undef SYM
    int rc = api.lib_init();
    if (rc != MOSQ_ERR_SUCCESS) {
        snprintf(api.why, sizeof api.why, "mosquitto_lib_init failed: %s", api.strerror_(rc));
        return;
    }
    api.loaded = 1;
}

int hrm_load(char *why, size_t why_size) {
    pthread_once(&once, load);
    if (!api.loaded && why != NULL && why_size > 0) snprintf(why, why_size, "%s", api.why);
    return api.loaded;
}

struct mosquitto *hrm_new(const char *id, bool clean_session, void *obj) { return api.new_(id, clean_session, obj); }
void hrm_destroy(struct mosquitto *mosq) { api.destroy(mosq); }
int hrm_will_set(struct mosquitto *mosq, const char *topic, int payloadlen, const void *payload, int qos, bool retain) {
    return api.will_set(mosq, topic, payloadlen, payload, qos, retain);
}
int hrm_username_pw_set(struct mosquitto *mosq, const char *username, const char *password) {
    return api.username_pw_set(mosq, username, password);
}
int hrm_connect_async(struct mosquitto *mosq, const char *host, int port, int keepalive) {
    return api.connect_async(mosq, host, port, keepalive);
}
int hrm_disconnect(struct mosquitto *mosq) { return api.disconnect(mosq); }
int hrm_publish(struct mosquitto *mosq, int *mid, const char *topic, int payloadlen, const void *payload, int qos,
                bool retain) {
    return api.publish(mosq, mid, topic, payloadlen, payload, qos, retain);
}
int hrm_subscribe(struct mosquitto *mosq, int *mid, const char *sub, int qos) { return api.subscribe(mosq, mid, sub, qos); }
int hrm_loop_start(struct mosquitto *mosq) { return api.loop_start(mosq); }
int hrm_loop_stop(struct mosquitto *mosq, bool force) { return api.loop_stop(mosq, force); }
int hrm_int_option(struct mosquitto *mosq, enum mosq_opt_t option, int value) {
    return api.int_option(mosq, option, value);
}
int hrm_reconnect_delay_set(struct mosquitto *mosq, unsigned int reconnect_delay, unsigned int reconnect_delay_max,
                            bool reconnect_exponential_backoff) {
    return api.reconnect_delay_set(mosq, reconnect_delay, reconnect_delay_max, reconnect_exponential_backoff);
}
void hrm_user_data_set(struct mosquitto *mosq, void *obj) { api.user_data_set(mosq, obj); }
int hrm_tls_set(struct mosquitto *mosq, const char *cafile, const char *capath, const char *certfile,
                const char *keyfile, int (*pw_callback)(char *buf, int size, int rwflag, void *userdata)) {
    return api.tls_set(mosq, cafile, capath, certfile, keyfile, pw_callback);
}
void hrm_connect_callback_set(struct mosquitto *mosq, void (*on_connect)(struct mosquitto *, void *, int)) {
    api.connect_callback_set(mosq, on_connect);
}
void hrm_disconnect_callback_set(struct mosquitto *mosq, void (*on_disconnect)(struct mosquitto *, void *, int)) {
    api.disconnect_callback_set(mosq, on_disconnect);
}
void hrm_publish_callback_set(struct mosquitto *mosq, void (*on_publish)(struct mosquitto *, void *, int)) {
    api.publish_callback_set(mosq, on_publish);
}
void hrm_message_callback_set(struct mosquitto *mosq,
                              void (*on_message)(struct mosquitto *, void *, const struct mosquitto_message *)) {
    api.message_callback_set(mosq, on_message);
}
void hrm_log_callback_set(struct mosquitto *mosq, void (*on_log)(struct mosquitto *, void *, int, const char *)) {
    api.log_callback_set(mosq, on_log);
}
const char *hrm_strerror(int mosq_errno) { return api.strerror_(mosq_errno); }
const char *hrm_connack_string(int connack_code) { return api.connack_string(connack_code); }
