// libmosquitto (Debian: libmosquitto-dev), the Eclipse Mosquitto project's MQTT 3.1.1/5 client library, imported
// once for MQTTSink. Nothing here speaks MQTT by hand: connection, keep-alive, reconnection, QoS 1 retransmission
// and TLS are libmosquitto's.
#include <mosquitto.h>
