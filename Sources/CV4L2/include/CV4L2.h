// CV4L2: the parts of V4L2 and libv4l2 that Swift cannot import by itself.
//
// - `VIDIOC_*` request codes are `_IOR/_IOW/_IOWR` function-like macros and `V4L2_PIX_FMT_*` use `v4l2_fourcc(...)`;
//   the importer drops both, so they are re-exported here as `extern const` values.
// - Control ids are nested macro arithmetic (`V4L2_CID_CAMERA_CLASS_BASE + 1`); re-exported for the same reason.
// - libv4l2's `v4l2_open` and `v4l2_ioctl` are variadic and marked unavailable in Swift; wrapped with fixed arity.
// - libv4lconvert needs a `struct libv4l_dev_ops` of C function pointers to run without a device node.
//
// The shim can go once Swift imports function-like macros and variadic C functions.
#ifndef C_V4L2_H
#define C_V4L2_H

#ifdef __linux__
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <linux/videodev2.h>

// MARK: Request codes
extern const unsigned long CV4L2_VIDIOC_QUERYCAP;
extern const unsigned long CV4L2_VIDIOC_ENUM_FMT;
extern const unsigned long CV4L2_VIDIOC_G_FMT;
extern const unsigned long CV4L2_VIDIOC_S_FMT;
extern const unsigned long CV4L2_VIDIOC_TRY_FMT;
extern const unsigned long CV4L2_VIDIOC_REQBUFS;
extern const unsigned long CV4L2_VIDIOC_QUERYBUF;
extern const unsigned long CV4L2_VIDIOC_QBUF;
extern const unsigned long CV4L2_VIDIOC_DQBUF;
extern const unsigned long CV4L2_VIDIOC_STREAMON;
extern const unsigned long CV4L2_VIDIOC_STREAMOFF;
extern const unsigned long CV4L2_VIDIOC_G_PARM;
extern const unsigned long CV4L2_VIDIOC_S_PARM;
extern const unsigned long CV4L2_VIDIOC_G_CTRL;
extern const unsigned long CV4L2_VIDIOC_S_CTRL;
extern const unsigned long CV4L2_VIDIOC_QUERYCTRL;
extern const unsigned long CV4L2_VIDIOC_QUERYMENU;
extern const unsigned long CV4L2_VIDIOC_ENUM_FRAMESIZES;
extern const unsigned long CV4L2_VIDIOC_ENUM_FRAMEINTERVALS;

// MARK: Pixel formats (fourcc)
extern const uint32_t CV4L2_PIX_FMT_YUYV;
extern const uint32_t CV4L2_PIX_FMT_UYVY;
extern const uint32_t CV4L2_PIX_FMT_MJPEG;
extern const uint32_t CV4L2_PIX_FMT_JPEG;
extern const uint32_t CV4L2_PIX_FMT_RGB24;
extern const uint32_t CV4L2_PIX_FMT_BGR24;
extern const uint32_t CV4L2_PIX_FMT_YUV420;
extern const uint32_t CV4L2_PIX_FMT_NV12;
extern const uint32_t CV4L2_PIX_FMT_GREY;
extern const uint32_t CV4L2_PIX_FMT_H264;

// MARK: Control ids
extern const uint32_t CV4L2_CID_BRIGHTNESS;
extern const uint32_t CV4L2_CID_AUTO_WHITE_BALANCE;
extern const uint32_t CV4L2_CID_WHITE_BALANCE_TEMPERATURE;
extern const uint32_t CV4L2_CID_AUTOGAIN;
extern const uint32_t CV4L2_CID_GAIN;
extern const uint32_t CV4L2_CID_EXPOSURE;
extern const uint32_t CV4L2_CID_POWER_LINE_FREQUENCY;
extern const uint32_t CV4L2_CID_BACKLIGHT_COMPENSATION;
extern const uint32_t CV4L2_CID_EXPOSURE_AUTO;
extern const uint32_t CV4L2_CID_EXPOSURE_ABSOLUTE;
extern const uint32_t CV4L2_CID_EXPOSURE_AUTO_PRIORITY;
extern const uint32_t CV4L2_CTRL_FLAG_NEXT_CTRL;

// MARK: libv4l2 (fixed-arity wrappers)

/// `v4l2_open(path, flags)`; returns the fd or -1 with errno set.
int CV4L2_open(const char *path, int flags);
/// `v4l2_close`.
int CV4L2_close(int fd);
/// `v4l2_ioctl(fd, request, arg)`; `arg` must point at the request's structure (libv4l2 does not check it).
int CV4L2_ioctl(int fd, unsigned long request, void *arg);
/// `v4l2_mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, offset)`; returns NULL (not MAP_FAILED) on error.
void *CV4L2_mmap(int fd, size_t length, int64_t offset);
/// `v4l2_munmap`.
int CV4L2_munmap(void *address, size_t length);
/// Sends libv4l2's diagnostics to `/dev/null` instead of stderr (it prints its own lines for non-video nodes).
void CV4L2_silence_log(void);

// MARK: libv4lconvert without a device

typedef struct CV4L2_converter CV4L2_converter;

/// A libv4lconvert instance backed by fake device ops (a capture device with no formats or controls), so buffers can
/// be converted with no /dev/video node. Returns NULL if libv4lconvert refuses.
CV4L2_converter *CV4L2_converter_create(void);
void CV4L2_converter_destroy(CV4L2_converter *converter);
/// `v4lconvert_convert`; returns the number of bytes written to `dst` or -1 (see `CV4L2_converter_error`).
int CV4L2_converter_convert(CV4L2_converter *converter, const struct v4l2_format *src_fmt,
                            const struct v4l2_format *dst_fmt, const void *src, int src_size, void *dst, int dst_size);
const char *CV4L2_converter_error(CV4L2_converter *converter);

#endif // __linux__
#endif // C_V4L2_H
