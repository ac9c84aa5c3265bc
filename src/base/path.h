/* File-system questions the commands ask about their arguments. */
#ifndef PN_PATH_H
#define PN_PATH_H

#include <stdbool.h>

/* Whether a and b name one existing file (same device and inode: links, "./x" and
 * "x" included). An output that is one of the inputs would replace it. */
bool pn_path_same_file(const char *a, const char *b);

#endif
