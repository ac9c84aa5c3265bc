/* Live or periodic progress lines. */
#include "train/progress.h"

#include <stdarg.h>
#include <unistd.h>

#include "base/clock.h"

void pn_progress_start(pn_progress *p, FILE *out, long first_step, long total_steps,
                       double every_s, bool allow_live)
{
    *p = (pn_progress){out, allow_live && isatty(fileno(out)) == 1, false, first_step,
                       total_steps, pn_now(), pn_now(), every_s};
}

static void format_eta(double seconds, char *buf, size_t cap)
{
    long s = seconds > 0 && seconds < 1e8 ? (long)(seconds + 0.5) : 0;
    if (s >= 3600)
        snprintf(buf, cap, "%ldh%02ldm", s / 3600, s / 60 % 60);
    else
        snprintf(buf, cap, "%ldm%02lds", s / 60, s % 60);
}

void pn_progress_duration(double seconds, char *buf, size_t cap)
{
    if (seconds >= 1.0)
        snprintf(buf, cap, "%.1f s", seconds);
    else if (seconds >= 0.01) /* "0.0 s" said nothing of a short epoch */
        snprintf(buf, cap, "%.0f ms", 1e3 * seconds);
    else
        snprintf(buf, cap, "%.2f ms", 1e3 * (seconds > 0 ? seconds : 0.0));
}

void pn_progress_step(pn_progress *p, long step, long epoch, double loss, double samples_per_s,
                      int tokens_per_sample)
{
    double now = pn_now();
    bool last = step >= p->total_steps;
    if (!last && now - p->last_print < (p->live ? 0.2 : p->every_s)) return;
    p->last_print = now;
    double done = (double)(step - p->first_step), left = (double)(p->total_steps - step);
    char eta[32];
    format_eta(done > 0 ? (now - p->start) / done * left : 0, eta, sizeof eta);
    char tokens[48] = "";
    if (tokens_per_sample > 1)
        snprintf(tokens, sizeof tokens, "  %.0f tokens/s", samples_per_s * tokens_per_sample);
    fprintf(p->out, "%sstep %ld/%ld  epoch %ld  loss %.4f  %.0f samples/s%s  ETA %s%s",
            p->live ? "\r\033[K" : "", step, p->total_steps, epoch, loss, samples_per_s, tokens,
            eta, p->live ? "" : "\n");
    p->line_open = p->live;
    fflush(p->out);
}

void pn_progress_eval(pn_progress *p, double started, long done, long total)
{
    double now = pn_now(), every = p->live ? 0.2 : p->every_s;
    if (done <= 0 || done >= total || now - started < every || now - p->last_print < every)
        return;
    p->last_print = now;
    char eta[32];
    format_eta((now - started) / (double)done * (double)(total - done), eta, sizeof eta);
    fprintf(p->out, "%sevaluating: %ld/%ld samples  %.0f samples/s  ETA %s%s",
            p->live ? "\r\033[K" : "", done, total, (double)done / (now - started), eta,
            p->live ? "" : "\n");
    p->line_open = p->live;
    fflush(p->out);
}

void pn_progress_print(pn_progress *p, const char *fmt, ...)
{
    if (p->line_open) fputs("\r\033[K", p->out);
    p->line_open = false;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(p->out, fmt, ap);
    va_end(ap);
    fputc('\n', p->out);
    fflush(p->out);
}

void pn_progress_finish(pn_progress *p)
{
    if (p->line_open) fputc('\n', p->out);
    p->line_open = false;
    fflush(p->out);
}
