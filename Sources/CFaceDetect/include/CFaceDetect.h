// CFaceDetect: OpenCV's cascade face detector (objdetect, C++) behind a small C API that Swift can import.
//
// This target is only the API and a loader (loader.c); the OpenCV code is the CFaceDetectOpenCV target, a shared
// library opened on the first cfd_cascade_open, so that processes without a camera never map OpenCV.
//
// Debian: libopencv-objdetect-dev (headers and libraries), opencv-data (the cascade files under
// /usr/share/opencv4/). Every C++ exception is caught here and returned as a status code with a message.
#ifndef C_FACE_DETECT_H
#define C_FACE_DETECT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Status codes of every call.
typedef enum {
    CFD_OK = 0,
    /// The cascade file does not exist.
    CFD_FILE_NOT_FOUND = 1,
    /// The cascade file exists but cannot be read (permissions, a directory).
    CFD_FILE_NOT_READABLE = 2,
    /// OpenCV could not load the file as a cascade.
    CFD_INVALID_CASCADE = 3,
    /// The image size, row stride or search region is impossible.
    CFD_BAD_FRAME = 4,
    /// Another argument is out of range (null pointer, scale factor, sizes).
    CFD_BAD_ARGUMENT = 5,
    /// OpenCV raised an exception while detecting.
    CFD_OPENCV_ERROR = 6,
    /// The OpenCV side (libHRGatewayOpenCV.so) or one of OpenCV's own libraries could not be loaded.
    CFD_LIBRARY_UNAVAILABLE = 7,
} cfd_status;

typedef struct {
    int32_t x;
    int32_t y;
    int32_t width;
    int32_t height;
} cfd_rect;

/// One loaded cascade. Not thread-safe: use one from one thread at a time.
typedef struct cfd_cascade cfd_cascade;

/// Loads a cascade XML file. On failure `*out` is NULL and `message` (if not NULL) holds the reason.
/// Also limits OpenCV to one thread in this process (detection runs on the caller's thread only).
int cfd_cascade_open(const char *path, cfd_cascade **out, char *message, size_t message_size);

void cfd_cascade_close(cfd_cascade *cascade);

/// Window size the cascade was trained on (the smallest face it can find), in pixels.
int32_t cfd_cascade_window(const cfd_cascade *cascade);

/// Finds faces in an 8-bit grey image inside `search` (image coordinates; clipped to the image), with sizes
/// min_size ... max_size pixels (max_size 0: no limit). Writes up to `capacity` boxes to `out` (image coordinates),
/// the number found (which may exceed `capacity`) to `*count`.
int cfd_cascade_detect(
    cfd_cascade *cascade, const uint8_t *pixels, int32_t width, int32_t height, int32_t bytes_per_row,
    cfd_rect search, int32_t min_size, int32_t max_size, double scale_factor, int32_t min_neighbors,
    cfd_rect *out, int32_t capacity, int32_t *count, char *message, size_t message_size);

#ifdef __cplusplus
}
#endif

#endif
