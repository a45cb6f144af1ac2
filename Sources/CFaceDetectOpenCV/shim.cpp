// The OpenCV side of CFaceDetect, built as its own shared library (libHRGatewayOpenCV.so) that CFaceDetect's
// loader opens on first use: OpenCV and what it pulls in (dnn, protobuf, BLAS, X11: about 10 MB resident) are
// mapped only by processes that detect faces, not by every `hr-gateway` that streams a strap.
#include "CFaceDetect.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include <opencv2/core.hpp>
#include <opencv2/objdetect.hpp>

// The loader finds these by name (dlsym); nothing else is exported.
#define CFD_EXPORT __attribute__((visibility("default")))

struct cfd_cascade {
    cv::CascadeClassifier classifier;
    int32_t window = 24;
};

static void put_message(char *message, size_t size, const std::string &text) {
    if (message == nullptr || size == 0) return;
    std::snprintf(message, size, "%s", text.c_str());
}

extern "C" CFD_EXPORT int cfd_impl_cascade_open(const char *path, cfd_cascade **out, char *message,
                                                 size_t message_size) {
    if (out == nullptr) return CFD_BAD_ARGUMENT;
    *out = nullptr;
    if (path == nullptr || path[0] == '\0') {
        put_message(message, message_size, "no cascade path given");
        return CFD_BAD_ARGUMENT;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        int e = errno;
        put_message(message, message_size, std::string(path) + ": " + std::strerror(e));
        return e == ENOENT || e == ENOTDIR ? CFD_FILE_NOT_FOUND : CFD_FILE_NOT_READABLE;
    }
    if (!S_ISREG(st.st_mode) || access(path, R_OK) != 0) {
        put_message(message, message_size, std::string(path) + ": not a readable file");
        return CFD_FILE_NOT_READABLE;
    }
    cfd_cascade *c = new (std::nothrow) cfd_cascade();
    if (c == nullptr) {
        put_message(message, message_size, "out of memory");
        return CFD_OPENCV_ERROR;
    }
    try {
        cv::setNumThreads(1);
        if (!c->classifier.load(path) || c->classifier.empty()) {
            delete c;
            put_message(message, message_size, std::string(path) + ": not an OpenCV cascade classifier file");
            return CFD_INVALID_CASCADE;
        }
        cv::Size w = c->classifier.getOriginalWindowSize();
        c->window = w.width > 0 ? w.width : 24;
    } catch (const std::exception &e) {
        delete c;
        put_message(message, message_size, std::string(path) + ": " + e.what());
        return CFD_INVALID_CASCADE;
    }
    *out = c;
    return CFD_OK;
}

extern "C" CFD_EXPORT void cfd_impl_cascade_close(cfd_cascade *cascade) { delete cascade; }

extern "C" CFD_EXPORT int32_t cfd_impl_cascade_window(const cfd_cascade *cascade) {
    return cascade ? cascade->window : 0;
}

extern "C" CFD_EXPORT int cfd_impl_cascade_detect(
    cfd_cascade *cascade, const uint8_t *pixels, int32_t width, int32_t height, int32_t bytes_per_row,
    cfd_rect search, int32_t min_size, int32_t max_size, double scale_factor, int32_t min_neighbors,
    cfd_rect *out, int32_t capacity, int32_t *count, char *message, size_t message_size) {
    if (count != nullptr) *count = 0;
    if (cascade == nullptr || pixels == nullptr || count == nullptr || (out == nullptr && capacity > 0) || capacity < 0) {
        put_message(message, message_size, "null cascade, image or result pointer");
        return CFD_BAD_ARGUMENT;
    }
    if (width <= 0 || height <= 0 || width > 16384 || height > 16384 || bytes_per_row < width) {
        put_message(message, message_size,
                    "image " + std::to_string(width) + "x" + std::to_string(height) + " with " +
                        std::to_string(bytes_per_row) + " bytes per row is not a valid grey image");
        return CFD_BAD_FRAME;
    }
    if (!(scale_factor > 1.0 && scale_factor <= 2.0) || min_neighbors < 0 || min_size < 0 || max_size < 0 ||
        (max_size > 0 && max_size < min_size)) {
        put_message(message, message_size, "scale factor must be in (1, 2], sizes and neighbours non-negative");
        return CFD_BAD_ARGUMENT;
    }
    int32_t x0 = search.x < 0 ? 0 : search.x, y0 = search.y < 0 ? 0 : search.y;
    int64_t x1 = (int64_t)search.x + search.width, y1 = (int64_t)search.y + search.height;
    if (x1 > width) x1 = width;
    if (y1 > height) y1 = height;
    if (search.width <= 0 || search.height <= 0 || x1 - x0 < cascade->window || y1 - y0 < cascade->window) {
        put_message(message, message_size,
                    "search region " + std::to_string(search.width) + "x" + std::to_string(search.height) + " at (" +
                        std::to_string(search.x) + ", " + std::to_string(search.y) +
                        ") leaves less than the cascade window of " + std::to_string(cascade->window) + " px");
        return CFD_BAD_FRAME;
    }
    try {
        cv::Mat image(height, width, CV_8UC1, const_cast<uint8_t *>(pixels), (size_t)bytes_per_row);
        cv::Mat region = image(cv::Rect(x0, y0, (int)(x1 - x0), (int)(y1 - y0)));
        std::vector<cv::Rect> faces;
        cascade->classifier.detectMultiScale(region, faces, scale_factor, min_neighbors, 0,
                                             cv::Size(min_size, min_size), cv::Size(max_size, max_size));
        *count = (int32_t)faces.size();
        for (size_t i = 0; i < faces.size() && (int32_t)i < capacity; i++) {
            out[i].x = faces[i].x + x0;
            out[i].y = faces[i].y + y0;
            out[i].width = faces[i].width;
            out[i].height = faces[i].height;
        }
    } catch (const std::exception &e) {
        put_message(message, message_size, std::string("OpenCV: ") + e.what());
        return CFD_OPENCV_ERROR;
    }
    return CFD_OK;
}
