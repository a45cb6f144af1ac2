#ifdef __linux__
#ifndef _GNU_SOURCE
#error "CV4L2 must be built with _GNU_SOURCE (set in Package.swift cSettings)"
#endif

#include "CV4L2.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <libv4l2.h>
#include <libv4lconvert.h>
#include <libv4l-plugin.h>

const unsigned long CV4L2_VIDIOC_QUERYCAP = VIDIOC_QUERYCAP;
const unsigned long CV4L2_VIDIOC_ENUM_FMT = VIDIOC_ENUM_FMT;
const unsigned long CV4L2_VIDIOC_G_FMT = VIDIOC_G_FMT;
const unsigned long CV4L2_VIDIOC_S_FMT = VIDIOC_S_FMT;
const unsigned long CV4L2_VIDIOC_TRY_FMT = VIDIOC_TRY_FMT;
const unsigned long CV4L2_VIDIOC_REQBUFS = VIDIOC_REQBUFS;
const unsigned long CV4L2_VIDIOC_QUERYBUF = VIDIOC_QUERYBUF;
const unsigned long CV4L2_VIDIOC_QBUF = VIDIOC_QBUF;
const unsigned long CV4L2_VIDIOC_DQBUF = VIDIOC_DQBUF;
const unsigned long CV4L2_VIDIOC_STREAMON = VIDIOC_STREAMON;
const unsigned long CV4L2_VIDIOC_STREAMOFF = VIDIOC_STREAMOFF;
const unsigned long CV4L2_VIDIOC_G_PARM = VIDIOC_G_PARM;
const unsigned long CV4L2_VIDIOC_S_PARM = VIDIOC_S_PARM;
const unsigned long CV4L2_VIDIOC_G_CTRL = VIDIOC_G_CTRL;
const unsigned long CV4L2_VIDIOC_S_CTRL = VIDIOC_S_CTRL;
const unsigned long CV4L2_VIDIOC_QUERYCTRL = VIDIOC_QUERYCTRL;
const unsigned long CV4L2_VIDIOC_QUERYMENU = VIDIOC_QUERYMENU;
const unsigned long CV4L2_VIDIOC_ENUM_FRAMESIZES = VIDIOC_ENUM_FRAMESIZES;
const unsigned long CV4L2_VIDIOC_ENUM_FRAMEINTERVALS = VIDIOC_ENUM_FRAMEINTERVALS;

const uint32_t CV4L2_PIX_FMT_YUYV = V4L2_PIX_FMT_YUYV;
const uint32_t CV4L2_PIX_FMT_UYVY = V4L2_PIX_FMT_UYVY;
const uint32_t CV4L2_PIX_FMT_MJPEG = V4L2_PIX_FMT_MJPEG;
const uint32_t CV4L2_PIX_FMT_JPEG = V4L2_PIX_FMT_JPEG;
const uint32_t CV4L2_PIX_FMT_RGB24 = V4L2_PIX_FMT_RGB24;
const uint32_t CV4L2_PIX_FMT_BGR24 = V4L2_PIX_FMT_BGR24;
const uint32_t CV4L2_PIX_FMT_YUV420 = V4L2_PIX_FMT_YUV420;
const uint32_t CV4L2_PIX_FMT_NV12 = V4L2_PIX_FMT_NV12;
const uint32_t CV4L2_PIX_FMT_GREY = V4L2_PIX_FMT_GREY;
const uint32_t CV4L2_PIX_FMT_H264 = V4L2_PIX_FMT_H264;

const uint32_t CV4L2_CID_BRIGHTNESS = V4L2_CID_BRIGHTNESS;
const uint32_t CV4L2_CID_AUTO_WHITE_BALANCE = V4L2_CID_AUTO_WHITE_BALANCE;
const uint32_t CV4L2_CID_WHITE_BALANCE_TEMPERATURE = V4L2_CID_WHITE_BALANCE_TEMPERATURE;
const uint32_t CV4L2_CID_AUTOGAIN = V4L2_CID_AUTOGAIN;
const uint32_t CV4L2_CID_GAIN = V4L2_CID_GAIN;
const uint32_t CV4L2_CID_EXPOSURE = V4L2_CID_EXPOSURE;
const uint32_t CV4L2_CID_POWER_LINE_FREQUENCY = V4L2_CID_POWER_LINE_FREQUENCY;
const uint32_t CV4L2_CID_BACKLIGHT_COMPENSATION = V4L2_CID_BACKLIGHT_COMPENSATION;
const uint32_t CV4L2_CID_EXPOSURE_AUTO = V4L2_CID_EXPOSURE_AUTO;
const uint32_t CV4L2_CID_EXPOSURE_ABSOLUTE = V4L2_CID_EXPOSURE_ABSOLUTE;
const uint32_t CV4L2_CID_EXPOSURE_AUTO_PRIORITY = V4L2_CID_EXPOSURE_AUTO_PRIORITY;
const uint32_t CV4L2_CTRL_FLAG_NEXT_CTRL = V4L2_CTRL_FLAG_NEXT_CTRL;

int CV4L2_open(const char *path, int flags) {
    return v4l2_open(path, flags);
}

int CV4L2_close(int fd) {
    return v4l2_close(fd);
}

int CV4L2_ioctl(int fd, unsigned long request, void *arg) {
    return v4l2_ioctl(fd, request, arg);
}

void *CV4L2_mmap(int fd, size_t length, int64_t offset) {
    void *address = v4l2_mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, offset);
    return address == MAP_FAILED ? NULL : address;
}

int CV4L2_munmap(void *address, size_t length) {
    return v4l2_munmap(address, length);
}

void CV4L2_silence_log(void) {
    if (v4l2_log_file == NULL) {
        v4l2_log_file = fopen("/dev/null", "w");
    }
}

// MARK: libv4lconvert with fake device ops

struct CV4L2_converter {
    struct v4lconvert_data *data;
};

static void *fake_init(int fd) {
    (void)fd;
    return NULL;
}

static void fake_close(void *priv) {
    (void)priv;
}

// A capture device that answers QUERYCAP and has no formats, sizes or controls: enough for libv4lconvert to set up.
static int fake_ioctl(void *priv, int fd, unsigned long request, void *arg) {
    (void)priv;
    (void)fd;
    if (request == VIDIOC_QUERYCAP) {
        struct v4l2_capability *cap = arg;
        memset(cap, 0, sizeof(*cap));
        strncpy((char *)cap->driver, "cv4l2-convert", sizeof(cap->driver) - 1);
        strncpy((char *)cap->card, "libv4lconvert without a device", sizeof(cap->card) - 1);
        cap->capabilities = V4L2_CAP_VIDEO_CAPTURE | V4L2_CAP_STREAMING;
        cap->device_caps = V4L2_CAP_VIDEO_CAPTURE | V4L2_CAP_STREAMING;
        return 0;
    }
    errno = EINVAL;
    return -1;
}

static ssize_t fake_read(void *priv, int fd, void *buffer, size_t n) {
    (void)priv;
    (void)fd;
    (void)buffer;
    (void)n;
    errno = EINVAL;
    return -1;
}

static ssize_t fake_write(void *priv, int fd, const void *buffer, size_t n) {
    (void)priv;
    (void)fd;
    (void)buffer;
    (void)n;
    errno = EINVAL;
    return -1;
}

static const struct libv4l_dev_ops fake_ops = {
    .init = fake_init,
    .close = fake_close,
    .ioctl = fake_ioctl,
    .read = fake_read,
    .write = fake_write,
};

CV4L2_converter *CV4L2_converter_create(void) {
    struct v4lconvert_data *data = v4lconvert_create_with_dev_ops(-1, NULL, &fake_ops);
    if (data == NULL) {
        return NULL;
    }
    CV4L2_converter *converter = malloc(sizeof(*converter));
    if (converter == NULL) {
        v4lconvert_destroy(data);
        return NULL;
    }
    converter->data = data;
    return converter;
}

void CV4L2_converter_destroy(CV4L2_converter *converter) {
    if (converter == NULL) {
        return;
    }
    v4lconvert_destroy(converter->data);
    free(converter);
}

int CV4L2_converter_convert(CV4L2_converter *converter, const struct v4l2_format *src_fmt,
                            const struct v4l2_format *dst_fmt, const void *src, int src_size, void *dst, int dst_size) {
    // libv4lconvert takes non-const pointers but reads only from the source and the formats.
    return v4lconvert_convert(converter->data, (struct v4l2_format *)src_fmt, (struct v4l2_format *)dst_fmt,
                              (unsigned char *)src, src_size, (unsigned char *)dst, dst_size);
}

const char *CV4L2_converter_error(CV4L2_converter *converter) {
    return v4lconvert_get_error_message(converter->data);
}

#endif // __linux__
