/* Output files put in place whole (out_file.h): a temporary name, fsync, rename,
 * fsync of the directory; streams written in place. */
#include "base/out_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/path.h"

static int cannot(const char *option, const char *path, const char *what)
{
    return pn_error_set(PN_ERR_IO, "%s %s: cannot %s: %s", option, path, what, strerror(errno));
}

int pn_out_temp_name(const char *path, char *tmp, size_t cap)
{
    if ((size_t)snprintf(tmp, cap, "%s.tmp-%ld", path, (long)getpid()) >= cap)
        return pn_error_set(PN_ERR_INVALID, "%s: the path is too long", path);
    return PN_OK;
}

/* Into out: path, or the file it names when path is a link (so the link stays). */
static int final_name(const char *path, char *out, size_t cap)
{
    struct stat st;
    char resolved[PATH_MAX];
    if (lstat(path, &st) == 0 && S_ISLNK(st.st_mode) && realpath(path, resolved)) path = resolved;
    if ((size_t)snprintf(out, cap, "%s", path) >= cap)
        return pn_error_set(PN_ERR_INVALID, "%s: the path is too long", path);
    return PN_OK;
}

/* The directory holding path ("." when path has no '/'). */
static void parent_dir(const char *path, char *out, size_t cap)
{
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(out, cap, ".");
    else if (slash == path) snprintf(out, cap, "/");
    else snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

/* fsyncs an open file or directory; file systems that cannot sync a directory say
 * EINVAL, which loses nothing that they could keep. */
static int sync_fd(int fd, const char *option, const char *path, const char *what)
{
    if (fsync(fd) != 0 && errno != EINVAL) return cannot(option, path, what);
    return PN_OK;
}

/* Renames the synced tmp to path and syncs the directory, so that the new name
 * survives a crash; removes tmp when the rename fails. */
static int put_in_place(const char *tmp, const char *path, const char *option)
{
    if (rename(tmp, path) != 0) {
        int rc = cannot(option, path, "rename the new file into place");
        unlink(tmp);
        return rc;
    }
    char dir[PATH_MAX];
    parent_dir(path, dir, sizeof dir);
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd < 0) return cannot(option, path, "open its directory to sync it");
    int rc = sync_fd(fd, option, path, "sync its directory");
    close(fd);
    return rc;
}

int pn_out_rename(const char *tmp, const char *path, const char *option)
{
    int fd = open(tmp, O_RDONLY);
    int rc = fd < 0 ? cannot(option, path, "open the new file to sync it")
                    : sync_fd(fd, option, path, "write the new file to disk");
    if (fd >= 0) close(fd);
    if (rc < 0) {
        unlink(tmp);
        return rc;
    }
    return put_in_place(tmp, path, option);
}

FILE *pn_out_append_stream(const char *path)
{
    int std = pn_path_std_stream(path);
    if (std < 0) return fopen(path, "a");
    int copy = dup(std);
    FILE *f = copy < 0 ? NULL : fdopen(copy, "w"); /* "w" on a descriptor truncates nothing */
    if (!f && copy >= 0) close(copy);
    return f;
}

int pn_out_open(pn_out_file *o, const char *path, const char *option)
{
    memset(o, 0, sizeof *o);
    o->option = option;
    if ((size_t)snprintf(o->path, sizeof o->path, "%s", path) >= sizeof o->path)
        return pn_error_set(PN_ERR_INVALID, "%s %s: the path is too long", option, path);
    if (pn_path_is_stream(path)) { /* appended to: a redirected stdout keeps its start */
        if (!(o->f = pn_out_append_stream(path)))
            return cannot(option, path, "open it for writing");
        return PN_OK;
    }
    PN_TRY(final_name(path, o->path, sizeof o->path));
    PN_TRY(pn_out_temp_name(o->path, o->tmp, sizeof o->tmp));
    if (!(o->f = fopen(o->tmp, "w"))) return cannot(option, path, "create a file there");
    struct stat old; /* the new file keeps the old one's permissions */
    if (stat(o->path, &old) == 0) (void)fchmod(fileno(o->f), old.st_mode & 07777);
    return PN_OK;
}

int pn_out_commit(pn_out_file *o)
{
    if (!o->f) return pn_error_set(PN_ERR_INTERNAL, "%s %s: not open", o->option, o->path);
    int rc = PN_OK;
    if (ferror(o->f) || fflush(o->f) != 0) rc = cannot(o->option, o->path, "write");
    if (rc == PN_OK && o->tmp[0])
        rc = sync_fd(fileno(o->f), o->option, o->path, "write the new file to disk");
    if (fclose(o->f) != 0 && rc == PN_OK) rc = cannot(o->option, o->path, "write");
    o->f = NULL;
    if (!o->tmp[0]) return rc; /* a stream: nothing to put in place */
    if (rc < 0) {
        unlink(o->tmp);
        return rc;
    }
    return put_in_place(o->tmp, o->path, o->option);
}

void pn_out_abandon(pn_out_file *o)
{
    if (o->f) fclose(o->f);
    o->f = NULL;
    if (o->tmp[0]) unlink(o->tmp);
}

int pn_out_check(const char *path, const char *option)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        errno = EISDIR;
        return cannot(option, path, "write it");
    }
    if (pn_path_is_stream(path))
        return access(path, W_OK) == 0 ? PN_OK : cannot(option, path, "write it");
    pn_out_file o;
    PN_TRY(pn_out_open(&o, path, option));
    pn_out_abandon(&o);
    return PN_OK;
}
