/* Stop signals (stop_signal.h): an async-signal-safe flag. */
#include "base/stop_signal.h"

#include <signal.h>
#include <string.h>

static volatile sig_atomic_t received;

static void on_stop_signal(int sig)
{
    if (!received) received = sig;
}

void pn_stop_signals_catch(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sa.sa_flags = SA_RESTART; /* a read or write in progress goes on */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGUSR1, &sa, NULL);
    signal(SIGXFSZ, SIG_IGN);
}

void pn_stop_signals_catch_at_start(void)
{
    pn_stop_signals_catch();
    sigset_t stops;
    sigemptyset(&stops);
    sigaddset(&stops, SIGTERM);
    sigaddset(&stops, SIGUSR1);
    sigprocmask(SIG_UNBLOCK, &stops, NULL); /* a pending one is handled here */
}

int pn_stop_signal(void) { return received; }

const char *pn_stop_signal_name(int sig)
{
    return sig == SIGTERM ? "SIGTERM" : sig == SIGUSR1 ? "SIGUSR1" : "a signal";
}
