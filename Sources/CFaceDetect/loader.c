// CFaceDetect's C API, forwarded to the OpenCV side (libHRGatewayOpenCV.so, target CFaceDetectOpenCV), which is
// opened with dlopen on the first cfd_cascade_open. A process that never detects a face never maps OpenCV.
//
// The library is looked for, in order:
//   1. $HR_GATEWAY_OPENCV_LIBRARY (a path), when set;
//   2. next to the running executable (SwiftPM puts it beside hr-gateway in .build/<configuration>/);
//   3. ../lib/hr-gateway/ relative to the executable's directory (an installed layout, /usr/bin + /usr/lib);
//   4. the dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache).
// When none loads, cfd_cascade_open returns CFD_LIBRARY_UNAVAILABLE with what was tried and the loader's reason
// (for instance a missing libopencv_objdetect.so.406).
#include "CFaceDetect.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CFD_LIBRARY_NAME "libHRGatewayOpenCV.so"

typedef int (*open_fn)(const char *, cfd_cascade **, char *, size_t);
typedef void (*close_fn)(cfd_cascade *);
typedef int32_t (*window_fn)(const cfd_cascade *);
typedef int (*detect_fn)(cfd_cascade *, const uint8_t *, int32_t, int32_t, int32_t, cfd_rect, int32_t, int32_t,
                         double, int32_t, cfd_rect *, int32_t, int32_t *, char *, size_t);

// Written once under pthread_once, read-only afterwards.
static struct {
    open_fn open;
    close_fn close;
    window_fn window;
    detect_fn detect;
    char failure[1024];
} api;
static pthread_once_t api_once = PTHREAD_ONCE_INIT;

static void append(char *buffer, size_t size, const char *text) {
    size_t used = strlen(buffer);
    if (used + 1 < size) snprintf(buffer + used, size - used, "%s", text);
}

// Tries one candidate; on failure adds "path: reason" to api.failure.
static void *try_open(const char *path) {
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle != NULL) return handle;
    const char *why = dlerror();
    if (api.failure[0] != '\0') append(api.failure, sizeof api.failure, "; ");
    append(api.failure, sizeof api.failure, why != NULL ? why : path);
    return NULL;
}

static void load(void) {
    void *handle = NULL;
    const char *configured = getenv("HR_GATEWAY_OPENCV_LIBRARY");
    if (configured != NULL && configured[0] != '\0') {
        handle = try_open(configured);
    } else {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0) {
            exe[n] = '\0';
            char *slash = strrchr(exe, '/');
            if (slash != NULL) {
                *slash = '\0';
                char path[PATH_MAX + 64];
                snprintf(path, sizeof path, "%s/" CFD_LIBRARY_NAME, exe);
                int beside = access(path, F_OK) == 0;
                if (beside) handle = try_open(path);
                if (handle == NULL) {
                    snprintf(path, sizeof path, "%s/../lib/hr-gateway/" CFD_LIBRARY_NAME, exe);
                    if (access(path, F_OK) == 0) {
                        handle = try_open(path);
                    } else if (!beside) {
                        // Neither file exists: say where it was looked for, then the loader's own search answers.
                        snprintf(api.failure, sizeof api.failure, "not in %s nor in %s/../lib/hr-gateway", exe, exe);
                    }
                }
            }
        }
        if (handle == NULL) handle = try_open(CFD_LIBRARY_NAME);
    }
    if (handle == NULL) return;
    api.open = (open_fn)dlsym(handle, "cfd_impl_cascade_open");
    api.close = (close_fn)dlsym(handle, "cfd_impl_cascade_close");
    api.window = (window_fn)dlsym(handle, "cfd_impl_cascade_window");
    api.detect = (detect_fn)dlsym(handle, "cfd_impl_cascade_detect");
    if (api.open == NULL || api.close == NULL || api.window == NULL || api.detect == NULL) {
        api.open = NULL;
        snprintf(api.failure, sizeof api.failure, "%s lacks the cfd_impl_* functions (a library of another version?)",
                 CFD_LIBRARY_NAME);
    }
}

int cfd_cascade_open(const char *path, cfd_cascade **out, char *message, size_t message_size) {
    if (out == NULL) return CFD_BAD_ARGUMENT;
    *out = NULL;
    pthread_once(&api_once, load);
    if (api.open == NULL) {
        if (message != NULL && message_size > 0) {
            snprintf(message, message_size, "cannot load the face detector library " CFD_LIBRARY_NAME " (%s)",
                     api.failure[0] != '\0' ? api.failure : "not found");
        }
        return CFD_LIBRARY_UNAVAILABLE;
    }
    return api.open(path, out, message, message_size);
}

// A cascade exists only if cfd_cascade_open succeeded, so the library is loaded for the calls below.
void cfd_cascade_close(cfd_cascade *cascade) {
    if (cascade != NULL) api.close(cascade);
}

int32_t cfd_cascade_window(const cfd_cascade *cascade) { return cascade != NULL ? api.window(cascade) : 0; }

int cfd_cascade_detect(
    cfd_cascade *cascade, const uint8_t *pixels, int32_t width, int32_t height, int32_t bytes_per_row,
    cfd_rect search, int32_t min_size, int32_t max_size, double scale_factor, int32_t min_neighbors,
    cfd_rect *out, int32_t capacity, int32_t *count, char *message, size_t message_size) {
    if (cascade == NULL) {
        if (count != NULL) *count = 0;
        if (message != NULL && message_size > 0) snprintf(message, message_size, "null cascade");
        return CFD_BAD_ARGUMENT;
    }
    return api.detect(cascade, pixels, width, height, bytes_per_row, search, min_size, max_size, scale_factor,
                      min_neighbors, out, capacity, count, message, message_size);
}
