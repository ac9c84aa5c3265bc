/* Finding, opening and checking the CUDA module (cuda_module.h). One attempt per
 * process: its outcome, a descriptor or a message, is kept and given to every
 * later caller. */
#include "config.h"

#include "math/cuda_module.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"

#ifndef PN_PKGLIBDIR
#define PN_PKGLIBDIR "/usr/local/lib/pipenet" /* Makefile.am passes $(pkglibdir) */
#endif

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const pn_cuda_module *module;
static int status = PN_OK;
static char message[1024];
static char module_path[PATH_MAX];

bool pn_cuda_module_built(void)
{
#ifdef PN_HAVE_CUDA
    return true;
#else
    return false;
#endif
}

bool pn_cuda_module_built_with_nccl(void)
{
#ifdef PN_HAVE_NCCL
    return true;
#else
    return false;
#endif
}

/* dir/PN_CUDA_MODULE_FILE into out; false when it does not fit. */
static bool join(char *out, size_t cap, const char *dir)
{
    int n = snprintf(out, cap, "%s/%s", dir, PN_CUDA_MODULE_FILE);
    return n > 0 && (size_t)n < cap;
}

/* The folder of the running program, or false when /proc cannot say. */
static bool program_dir(char *out, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", out, cap - 1);
    if (n <= 0) return false;
    out[n] = '\0';
    char *slash = strrchr(out, '/');
    if (!slash) return false;
    *slash = '\0';
    return true;
}

/* The places searched when PIPENET_CUDA_MODULE is not set, in order: beside the
 * program, then the installed one. Returns how many (at most 2). */
static int search_places(char places[2][PATH_MAX])
{
    char dir[PATH_MAX];
    int n = 0;
    if (program_dir(dir, sizeof dir) && join(places[n], PATH_MAX, dir)) n++;
    if (join(places[n], PATH_MAX, PN_PKGLIBDIR) && (n == 0 || strcmp(places[0], places[n])))
        n++;
    return n;
}

static const char *explicit_path(void)
{
    const char *env = getenv("PIPENET_CUDA_MODULE");
    return env && env[0] ? env : NULL;
}

bool pn_cuda_module_present(void)
{
    if (!pn_cuda_module_built()) return false;
    if (explicit_path()) return true;
    char places[2][PATH_MAX];
    int n = search_places(places);
    for (int i = 0; i < n; i++)
        if (access(places[i], F_OK) == 0) return true;
    return false;
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    status = PN_ERR_UNSUPPORTED;
}

/* The file to open into module_path, or false after fail() saying where it looked. */
static bool find(void)
{
    const char *env = explicit_path();
    if (env) {
        snprintf(module_path, sizeof module_path, "%s", env);
        if (access(module_path, R_OK) == 0) return true;
        fail("cannot read the CUDA module %s (PIPENET_CUDA_MODULE): %s", module_path,
             strerror(errno));
        return false;
    }
    char places[2][PATH_MAX];
    int n = search_places(places);
    for (int i = 0; i < n; i++)
        if (access(places[i], F_OK) == 0) {
            memcpy(module_path, places[i], sizeof module_path);
            return true;
        }
    fail("the CUDA module is missing: no %s%s%s (install it, or set PIPENET_CUDA_MODULE to "
         "its path)", places[0], n > 1 ? " nor " : "", n > 1 ? places[1] : "");
    return false;
}

/* Whether d was built from this pipenet; else fail() saying how it differs. Its
 * sizes are read only once its ABI and version say where they are. */
static bool matches(const pn_cuda_module *d)
{
    if (d->abi != PN_CUDA_MODULE_ABI || !d->version || strcmp(d->version, PACKAGE_VERSION)) {
        fail("the CUDA module %s was built for another pipenet (%s, module ABI %d) than this "
             "one (%s, ABI %d): rebuild or reinstall it", module_path,
             d->version ? d->version : "no version", d->abi, PACKAGE_VERSION,
             (int)PN_CUDA_MODULE_ABI);
        return false;
    }
    if (d->descriptor_size == sizeof(pn_cuda_module) && d->backend_size == sizeof(pn_backend) &&
        d->matrix_size == sizeof(pn_matrix))
        return true;
    fail("the CUDA module %s was built from another source of pipenet %s: its descriptor, "
         "backend table and matrix are %zu, %zu and %zu bytes, this pipenet's %zu, %zu and %zu: "
         "rebuild or reinstall it", module_path, PACKAGE_VERSION, d->descriptor_size,
         d->backend_size, d->matrix_size, sizeof(pn_cuda_module), sizeof(pn_backend),
         sizeof(pn_matrix));
    return false;
}

static void load(void)
{
    if (!pn_cuda_module_built()) {
        fail("this pipenet was built without CUDA (./configure found no CUDA toolkit, or was "
             "given --without-cuda)");
        return;
    }
    if (!find()) return;
    /* RTLD_NOW: a symbol the program does not export fails here, by name, instead of
     * ending the run at its first call */
    void *handle = dlopen(module_path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        fail("cannot load the CUDA module %s: %s", module_path, dlerror());
        return;
    }
    const pn_cuda_module *d = dlsym(handle, PN_CUDA_MODULE_ENTRY_NAME);
    if (!d) {
        fail("%s is not a pipenet CUDA module: %s", module_path, dlerror());
    } else if (matches(d)) {
        module = d; /* never closed: its tables and memory live as long as the process */
        return;
    }
    dlclose(handle);
}

int pn_cuda_module_get(const pn_cuda_module **out)
{
    pthread_once(&once, load);
    *out = module;
    return module ? PN_OK : pn_error_set(status, "%s", message);
}

const char *pn_cuda_module_path(void) { return module_path; }
