/* A stand-in for an ITT collector (Intel VTune's). On their first call,
 * oneDNN's tracing hooks lock their global mutex, load the library that
 * INTEL_LIBITTNOTIFY64 names and call its __itt_api_init. This one takes
 * 0.3 s there, so that another thread that reaches the hooks meanwhile
 * finds the mutex held: test_engine.first_kernels_at_once uses it to make
 * a race on oneDNN's lazy setup show in most runs, not one in a thousand.
 * It installs no entry point, so the hooks stay off. */
#include <time.h>

void __itt_api_init(void *globals, int groups);

void __itt_api_init(void *globals, int groups)
{
    (void)globals;
    (void)groups;
    struct timespec pause = {0, 300 * 1000 * 1000};
    nanosleep(&pause, NULL);
}
