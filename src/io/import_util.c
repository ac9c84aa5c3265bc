/* The importers' shared file handling (import_util.h): output directories and the
 * temporary-name-then-rename of every file they write (base/out_file.h). */
#include "io/import_util.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/out_file.h"

const char *const pn_import_splits[2] = {"train", "test"};

int pn_import_output(const char *out_dir, int split, char *path, size_t cap)
{
    if ((size_t)snprintf(path, cap, "%s/%s.h5", out_dir, pn_import_splits[split]) >= cap)
        return pn_error_set(PN_ERR_INVALID, "path too long: %s/%s.h5", out_dir,
                            pn_import_splits[split]);
    return PN_OK;
}

int pn_import_make_dirs(const char *dir)
{
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s", dir) >= sizeof path)
        return pn_error_set(PN_ERR_INVALID, "path too long: %s", dir);
    for (char *p = path + 1;; p++) {
        bool end = *p == '\0';
        if (*p != '/' && !end) continue;
        *p = '\0';
        struct stat st;
        if (mkdir(path, 0777) != 0 && (errno != EEXIST || stat(path, &st) != 0 ||
                                       !S_ISDIR(st.st_mode)))
            return pn_error_set(PN_ERR_IO, "cannot create directory '%s': %s", path,
                                errno == EEXIST ? "not a directory" : strerror(errno));
        if (end) return 0;
        *p = '/';
    }
}

int pn_import_tmp_name(const char *out, char *tmp, size_t cap)
{
    return pn_out_temp_name(out, tmp, cap);
}

int pn_import_finish(const char *tmp, const char *out, int rc)
{
    if (rc < 0) {
        unlink(tmp);
        return rc;
    }
    return pn_out_rename(tmp, out, "--out");
}
