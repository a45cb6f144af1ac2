// libmosquitto (Debian: libmosquitto1; headers from libmosquitto-dev), the Eclipse Mosquitto project's MQTT
// 3.1.1/5 client library, wrapped once for MQTTSink. Nothing here speaks MQTT by hand: connection, keep-alive,
// reconnection, QoS 1 retransmission and TLS are libmosquitto's.
//
// The library is opened at run time (dlopen), the first time `--mqtt` needs it, not linked: a gateway that does not
// publish to MQTT never maps it and the OpenSSL it brings (about 2 MB resident), and one without libmosquitto1
// installed still runs. mosquitto.h gives the types and constants; call the hrm_ functions below, never mosquitto_
// ones (they are not linked).
#ifndef CMOSQUITTO_H
#define CMOSQUITTO_H

#include <mosquitto.h>
#include <stddef.h>

// Opens libmosquitto once: $HR_GATEWAY_LIBMOSQUITTO (a path) when set, else libmosquitto.so.1, and initialises it
// (mosquitto_lib_init). Returns 1 when it is ready; otherwise 0 with what went wrong in `why`. Thread-safe; later calls
// return the first outcome.
int hrm_load(char *why, size_t why_size);

struct mosquitto *hrm_new(const char *id, bool clean_session, void *obj);
void hrm_destroy(struct mosquitto *mosq);
int hrm_will_set(struct mosquitto *mosq, const char *topic, int payloadlen, const void *payload, int qos, bool retain);
int hrm_username_pw_set(struct mosquitto *mosq, const char *username, const char *password);
int hrm_connect_async(struct mosquitto *mosq, const char *host, int port, int keepalive);
int hrm_disconnect(struct mosquitto *mosq);
int hrm_publish(struct mosquitto *mosq, int *mid, const char *topic, int payloadlen, const void *payload, int qos,
                bool retain);
int hrm_subscribe(struct mosquitto *mosq, int *mid, const char *sub, int qos);
int hrm_loop_start(struct mosquitto *mosq);
int hrm_loop_stop(struct mosquitto *mosq, bool force);
int hrm_int_option(struct mosquitto *mosq, enum mosq_opt_t option, int value);
int hrm_reconnect_delay_set(struct mosquitto *mosq, unsigned int reconnect_delay, unsigned int reconnect_delay_max,
                            bool reconnect_exponential_backoff);
void hrm_user_data_set(struct mosquitto *mosq, void *obj);
int hrm_tls_set(struct mosquitto *mosq, const char *cafile, const char *capath, const char *certfile,
                const char *keyfile, int (*pw_callback)(char *buf, int size, int rwflag, void *userdata));
void hrm_connect_callback_set(struct mosquitto *mosq, void (*on_connect)(struct mosquitto *, void *, int));
void hrm_disconnect_callback_set(struct mosquitto *mosq, void (*on_disconnect)(struct mosquitto *, void *, int));
void hrm_publish_callback_set(struct mosquitto *mosq, void (*on_publish)(struct mosquitto *, void *, int));
void hrm_message_callback_set(struct mosquitto *mosq,
                              void (*on_message)(struct mosquitto *, void *, const struct mosquitto_message *));
void hrm_log_callback_set(struct mosquitto *mosq, void (*on_log)(struct mosquitto *, void *, int, const char *));
const char *hrm_strerror(int mosq_errno);
const char *hrm_connack_string(int connack_code);

#endif
