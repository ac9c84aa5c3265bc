/* File-system questions the commands ask about their arguments, and the one check of
 * an output path that every command's outputs go through (pn_path_check_output). */
#ifndef PN_PATH_H
#define PN_PATH_H

#include <stdbool.h>

/* Whether a and b name one existing file (same device and inode: links, "./x" and
 * "x" included). An output that is one of the inputs would replace it. */
bool pn_path_same_file(const char *a, const char *b);

/* Whether a and b name one file, or will: one existing file (pn_path_same_file), or,
 * when neither exists yet, one name in one directory (a directory not made yet is
 * compared by its text). */
bool pn_path_same_target(const char *a, const char *b);

/* Whether path (resolved through links when it exists) names an entry of directory
 * dir itself, there yet or not, whose name starts with prefix. */
bool pn_path_in_dir(const char *path, const char *dir, const char *prefix);

/* STDOUT_FILENO or STDERR_FILENO when path is the file open as this program's stdout
 * or stderr (/dev/stdout, /proc/self/fd/2, the file they were redirected to), else -1. */
int pn_path_std_stream(const char *path);

/* Whether path exists as a stream rather than as a file to replace: neither a regular
 * file nor a directory (a FIFO, a character device, a socket, a link to one), or the
 * file that is this program's stdout or stderr (/dev/stdout redirected to a file).
 * It is written in place: renaming a new file over it would replace the device or
 * the link, and cut the file from the descriptors writing it. */
bool pn_path_is_stream(const char *path);

/* An input that an output must not replace, and what it is for messages ("the model
 * file"). */
typedef struct pn_named_path {
    const char *path; /* NULL or "": none */
    const char *what;
} pn_named_path;

/* Checks path, given by option ("--metrics"), before anything is computed or written:
 * PN_ERR_INVALID, with a message naming option and path, when it is one of the n
 * inputs (pn_path_same_target), an existing directory, or, unless streams_ok, a
 * stream (pn_path_is_stream). */
int pn_path_check_output(const char *option, const char *path, const pn_named_path *inputs,
                         int n, bool streams_ok);

#endif
