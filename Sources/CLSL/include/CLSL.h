// The part of liblsl's C API (lsl_c.h) that hr-gateway uses, loaded at run time: liblsl is not in Debian, and a
// gateway without it must still run. Types are opaque pointers, as in lsl_c.h.
#ifndef CLSL_H
#define CLSL_H

#include <stddef.h>
#include <stdint.h>

typedef struct hrl_streaminfo_ *hrl_streaminfo;
typedef struct hrl_outlet_ *hrl_outlet;
typedef struct hrl_xml_ *hrl_xml;

// lsl_channel_format_t values.
enum { HRL_FLOAT32 = 1, HRL_DOUBLE64 = 2, HRL_STRING = 3, HRL_INT32 = 4 };

// Loads liblsl once: $HR_GATEWAY_LIBLSL (a path) when set, else the dynamic loader's search for liblsl.so,
// liblsl.so.2 and liblsl.so.1, else `candidates` (a NUL-separated, double-NUL-terminated list of paths, such as
// pylsl's bundled copy). Returns 1 when loaded; otherwise 0 with what was tried in `why`. The path loaded is copied
// into `loaded`.
int hrl_load(const char *candidates, char *loaded, size_t loaded_size, char *why, size_t why_size);

int32_t hrl_library_version(void);
double hrl_local_clock(void);
hrl_streaminfo hrl_create_streaminfo(const char *name, const char *type, int32_t channels, double rate, int32_t format,
                                     const char *source_id);
void hrl_destroy_streaminfo(hrl_streaminfo info);
hrl_xml hrl_get_desc(hrl_streaminfo info);
hrl_xml hrl_append_child(hrl_xml parent, const char *name);
hrl_xml hrl_append_child_value(hrl_xml parent, const char *name, const char *value);
hrl_outlet hrl_create_outlet(hrl_streaminfo info, int32_t chunk_size, int32_t max_buffered_seconds);
void hrl_destroy_outlet(hrl_outlet outlet);
// Samples interleaved (channels × count), one time stamp per sample (lsl_local_clock's domain). 0 on success.
int32_t hrl_push_chunk(hrl_outlet outlet, const double *data, unsigned long elements, const double *timestamps,
                       int32_t pushthrough);
// One sample of a one-channel string stream (a marker), with its time stamp. 0 on success.
int32_t hrl_push_string(hrl_outlet outlet, const char *text, double timestamp);
int32_t hrl_have_consumers(hrl_outlet outlet);

#endif
