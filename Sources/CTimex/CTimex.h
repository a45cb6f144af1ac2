// The kernel's clock discipline (glibc's <sys/timex.h>, which Swift's Glibc module leaves out): whether an NTP client
// has synchronized the system clock, as `timedatectl` reads it.
#include <sys/timex.h>
