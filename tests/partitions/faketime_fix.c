/* Preloaded before Debian's libfaketime 0.9.10 when a daemon's wall clock is skewed
 * (tests/partitions/cluster.py, skew_environment).  That libfaketime rewrites an
 * absolute CLOCK_MONOTONIC deadline of clock_nanosleep as if it were fake time even
 * when FAKETIME_DONT_FAKE_MONOTONIC leaves the monotonic clock real, and the kernel
 * answers EINVAL: Python 3.11's time.sleep, which sleeps that way, fails (libfaketime
 * issue 426, fixed after 0.9.10).  Here a monotonic sleep goes straight to the kernel;
 * every other clock goes on to libfaketime, which translates it as it should. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef int (*nanosleep_fn)(clockid_t, int, const struct timespec *, struct timespec *);

int clock_nanosleep(clockid_t clock_id, int flags, const struct timespec *req, struct timespec *rem) {
    if (clock_id == CLOCK_MONOTONIC) {
        /* clock_nanosleep returns its error rather than setting errno */
        return syscall(SYS_clock_nanosleep, clock_id, flags, req, rem) == -1 ? errno : 0;
    }
    static nanosleep_fn next;
    if (next == NULL) {
        next = (nanosleep_fn)dlsym(RTLD_NEXT, "clock_nanosleep");
        if (next == NULL) {
            return ENOSYS;
        }
    }
    return next(clock_id, flags, req, rem);
}
