/* File-system questions (path.h). */
#include "base/path.h"

#include <sys/stat.h>

bool pn_path_same_file(const char *a, const char *b)
{
    struct stat x, y;
    return a && b && stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_dev == y.st_dev &&
           x.st_ino == y.st_ino;
}
