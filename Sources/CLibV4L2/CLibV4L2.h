// Links libv4l2 and libv4lconvert (found through pkg-config `libv4l2`, Debian package libv4l-dev).
// Swift never imports this module directly: CV4L2 wraps what is needed with prefixed symbols.
#ifndef C_LIB_V4L2_H
#define C_LIB_V4L2_H
#ifdef __linux__
#include <libv4l2.h>
#endif
#endif
