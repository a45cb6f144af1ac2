// The C that SystemCalls needs beyond Swift's Glibc module.
#ifndef CSYSTEMCALLS_H
#define CSYSTEMCALLS_H

// The kernel's clock discipline (<sys/timex.h>, which the Glibc module leaves out): whether an NTP client has
// synchronized the system clock, as `timedatectl` reads it.
#include <sys/timex.h>

// Which of standard input, output and error (bits 0, 1, 2) the process started with closed (`<&-`, `>&-`): each
// was opened on /dev/null before anything else ran, so that no file the program opens later takes its number (a
// recording opened as descriptor 1 received the JSON lines meant for standard output, and the runtime's own
// descriptors answered reads and writes with EINVAL).
int hrg_closed_standard_descriptors(void);

// O_TMPFILE, a macro Swift does not import (its value differs between architectures: O_DIRECTORY's does).
#include <fcntl.h>
static inline int hrg_o_tmpfile(void) { return __O_TMPFILE; }  // O_TMPFILE without _GNU_SOURCE (O_DIRECTORY included)

#endif
