#include "CSystemCalls.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

static int closed_at_start = 0;

// Runs before main and before the Swift runtime opens descriptors of its own (Dispatch's eventfd and epoll).
__attribute__((constructor)) static void hrg_open_standard_descriptors(void) {
    for (int fd = 0; fd <= 2; fd++) {
        if (fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
        // open() takes the lowest free number: this one, as the lower ones are open by now.
        int opened = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
        if (opened == fd) {
            closed_at_start |= 1 << fd;
        } else if (opened >= 0) {
            close(opened);
        }
    }
}

int hrg_closed_standard_descriptors(void) { return closed_at_start; }
