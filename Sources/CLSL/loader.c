// liblsl through dlopen: see CLSL.h. Every entry point is resolved at load; a library missing one is refused.
#include "CLSL.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int32_t (*version_fn)(void);
typedef double (*clock_fn)(void);
typedef void *(*create_info_fn)(const char *, const char *, int32_t, double, int32_t, const char *);
typedef void (*destroy_fn)(void *);
typedef void *(*desc_fn)(void *);
typedef void *(*child_fn)(void *, const char *);
typedef void *(*child_value_fn)(void *, const char *, const char *);
typedef void *(*create_outlet_fn)(void *, int32_t, int32_t);
typedef int32_t (*push_fn)(void *, const double *, unsigned long, const double *, int32_t);
typedef int32_t (*push_str_fn)(void *, const char **, double);
typedef int32_t (*consumers_fn)(void *);

// Written under the mutex by the first successful hrl_load, read-only afterwards.
static struct {
    int loaded;
    version_fn version;
    clock_fn clock;
    create_info_fn create_info;
    destroy_fn destroy_info;
    desc_fn desc;
    child_fn child;
    child_value_fn child_value;
    create_outlet_fn create_outlet;
    destroy_fn destroy_outlet;
    push_fn push;
    push_str_fn push_str;
    consumers_fn consumers;
    char path[1024];
} api;
static pthread_mutex_t api_lock = PTHREAD_MUTEX_INITIALIZER;

static void append(char *buffer, size_t size, const char *text) {
    size_t used = strlen(buffer);
    if (used + 1 < size) snprintf(buffer + used, size - used, "%s", text);
}

static int bind_symbols(void *h, char *why, size_t why_size) {
#define SYM(field, type, name)                                                                                       \
    api.field = (type)dlsym(h, name);                                                                                \
    if (api.field == NULL) {                                                                                         \
        append(why, why_size, "; it has no " name);                                                                  \
        return 0;                                                                                                    \
    }
    SYM(version, version_fn, "lsl_library_version")
    SYM(clock, clock_fn, "lsl_local_clock")
    SYM(create_info, create_info_fn, "lsl_create_streaminfo")
    SYM(destroy_info, destroy_fn, "lsl_destroy_streaminfo")
    SYM(desc, desc_fn, "lsl_get_desc")
    SYM(child, child_fn, "lsl_append_child")
    SYM(child_value, child_value_fn, "lsl_append_child_value")
    SYM(create_outlet, create_outlet_fn, "lsl_create_outlet")
    SYM(destroy_outlet, destroy_fn, "lsl_destroy_outlet")
    SYM(push, push_fn, "lsl_push_chunk_dtnp")
    SYM(push_str, push_str_fn, "lsl_push_sample_strt")
    SYM(consumers, consumers_fn, "lsl_have_consumers")
#undef SYM
    return 1;
}

static int try_path(const char *path, char *why, size_t why_size) {
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        const char *e = dlerror();
        if (why[0] != '\0') append(why, why_size, "; ");
        append(why, why_size, e != NULL ? e : path);
        return 0;
    }
    if (!bind_symbols(h, why, why_size)) {
        dlclose(h);
        return 0;
    }
    snprintf(api.path, sizeof api.path, "%s", path);
    api.loaded = 1;
    return 1;
}

int hrl_load(const char *candidates, char *loaded, size_t loaded_size, char *why, size_t why_size) {
    pthread_mutex_lock(&api_lock);
    if (!api.loaded) {
        if (why_size > 0) why[0] = '\0';
        const char *configured = getenv("HR_GATEWAY_LIBLSL");
        if (configured != NULL && configured[0] != '\0') {
            try_path(configured, why, why_size);
        } else {
            const char *names[] = {"liblsl.so", "liblsl.so.2", "liblsl.so.1"};
            for (size_t i = 0; i < 3 && !api.loaded; i++) try_path(names[i], why, why_size);
            for (const char *c = candidates; c != NULL && *c != '\0' && !api.loaded; c += strlen(c) + 1) {
                try_path(c, why, why_size);
            }
        }
    }
    int ok = api.loaded;
    if (ok && loaded_size > 0) snprintf(loaded, loaded_size, "%s", api.path);
    pthread_mutex_unlock(&api_lock);
    return ok;
}

int32_t hrl_library_version(void) { return api.loaded ? api.version() : 0; }
double hrl_local_clock(void) { return api.loaded ? api.clock() : 0; }

hrl_streaminfo hrl_create_streaminfo(const char *name, const char *type, int32_t channels, double rate, int32_t format,
                                     const char *source_id) {
    return api.loaded ? (hrl_streaminfo)api.create_info(name, type, channels, rate, format, source_id) : NULL;
}
void hrl_destroy_streaminfo(hrl_streaminfo info) {
    if (api.loaded && info != NULL) api.destroy_info(info);
}
hrl_xml hrl_get_desc(hrl_streaminfo info) { return api.loaded ? (hrl_xml)api.desc(info) : NULL; }
hrl_xml hrl_append_child(hrl_xml parent, const char *name) {
    return api.loaded ? (hrl_xml)api.child(parent, name) : NULL;
}
hrl_xml hrl_append_child_value(hrl_xml parent, const char *name, const char *value) {
    return api.loaded ? (hrl_xml)api.child_value(parent, name, value) : NULL;
}
hrl_outlet hrl_create_outlet(hrl_streaminfo info, int32_t chunk_size, int32_t max_buffered_seconds) {
    return api.loaded ? (hrl_outlet)api.create_outlet(info, chunk_size, max_buffered_seconds) : NULL;
}
void hrl_destroy_outlet(hrl_outlet outlet) {
    if (api.loaded && outlet != NULL) api.destroy_outlet(outlet);
}
int32_t hrl_push_chunk(hrl_outlet outlet, const double *data, unsigned long elements, const double *timestamps,
                       int32_t pushthrough) {
    return api.loaded ? api.push(outlet, data, elements, timestamps, pushthrough) : -1;
}
int32_t hrl_push_string(hrl_outlet outlet, const char *text, double timestamp) {
    return api.loaded ? api.push_str(outlet, &text, timestamp) : -1;
}
int32_t hrl_have_consumers(hrl_outlet outlet) { return api.loaded ? api.consumers(outlet) : 0; }
