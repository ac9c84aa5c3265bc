/* File-system questions (path.h): identity by device and inode, never by the text of
 * a path, so that "./x", "x", links and other spellings of one file are one file. */
#include "base/path.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"

bool pn_path_same_file(const char *a, const char *b)
{
    struct stat x, y;
    return a && b && stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev &&
           x.st_ino == y.st_ino;
}

/* Splits path into its directory and its last name (trailing '/' dropped): "x" is
 * "." and "x", "/x" is "/" and "x". False when path does not fit. */
static bool split(const char *path, char *dir, char *name)
{
    char copy[PATH_MAX];
    if ((size_t)snprintf(copy, sizeof copy, "%s", path) >= sizeof copy) return false;
    size_t n = strlen(copy);
    while (n > 1 && copy[n - 1] == '/') copy[--n] = '\0';
    char *slash = strrchr(copy, '/');
    strcpy(name, slash ? slash + 1 : copy);
    if (!slash) strcpy(dir, ".");
    else if (slash == copy) strcpy(dir, "/");
    else *slash = '\0', strcpy(dir, copy);
    return true;
}

bool pn_path_same_target(const char *a, const char *b)
{
    if (!a || !b || !a[0] || !b[0]) return false;
    struct stat x, y;
    bool a_there = stat(a, &x) == 0, b_there = stat(b, &y) == 0;
    if (a_there || b_there) return a_there && b_there && x.st_dev == y.st_dev &&
                                   x.st_ino == y.st_ino;
    char dir_a[PATH_MAX], name_a[PATH_MAX], dir_b[PATH_MAX], name_b[PATH_MAX];
    if (!split(a, dir_a, name_a) || !split(b, dir_b, name_b) || strcmp(name_a, name_b))
        return false;
    return pn_path_same_file(dir_a, dir_b) || !strcmp(dir_a, dir_b);
}

bool pn_path_in_dir(const char *path, const char *dir, const char *prefix)
{
    char resolved[PATH_MAX], parent[PATH_MAX], name[PATH_MAX];
    if (!path || !dir || !path[0] || !dir[0]) return false;
    if (realpath(path, resolved)) path = resolved; /* a link into dir is in dir */
    return split(path, parent, name) && !strncmp(name, prefix, strlen(prefix)) &&
           pn_path_same_file(parent, dir);
}

/* Whether the file st is open as this program's fd. */
static bool is_open_as(const struct stat *st, int fd)
{
    struct stat open;
    return fstat(fd, &open) == 0 && open.st_dev == st->st_dev && open.st_ino == st->st_ino;
}

int pn_path_std_stream(const char *path)
{
    struct stat st;
    if (!path || stat(path, &st) != 0) return -1;
    return is_open_as(&st, STDOUT_FILENO) ? STDOUT_FILENO
           : is_open_as(&st, STDERR_FILENO) ? STDERR_FILENO : -1;
}

bool pn_path_is_stream(const char *path)
{
    struct stat st;
    if (!path || stat(path, &st) != 0 || S_ISDIR(st.st_mode)) return false;
    return !S_ISREG(st.st_mode) || pn_path_std_stream(path) >= 0;
}

int pn_path_check_output(const char *option, const char *path, const pn_named_path *inputs,
                         int n, bool streams_ok)
{
    for (int i = 0; i < n; i++)
        if (inputs[i].path && pn_path_same_target(path, inputs[i].path))
            return pn_error_set(PN_ERR_INVALID, "%s '%s' is %s: writing it would replace it; "
                                "choose another name", option, path, inputs[i].what);
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return pn_error_set(PN_ERR_INVALID, "%s '%s' is a directory: expected a file name",
                            option, path);
    if (!streams_ok && pn_path_is_stream(path))
        return pn_error_set(PN_ERR_INVALID, "%s '%s' is not a regular file (a stream or a "
                            "device): this output must be a file; choose a file name",
                            option, path);
    return PN_OK;
}
