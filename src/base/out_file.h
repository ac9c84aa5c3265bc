/* Output files that replace what their path held only once they are whole: written
 * under a temporary name beside the final one ("<path>.tmp-<pid>", so a rename never
 * crosses file systems), flushed to disk, renamed over the final name, and the
 * directory flushed too; so a failed or killed run leaves the old file, and a crash
 * never leaves half a file under the final name. A path that is a stream
 * (base/path.h: a FIFO, a device, this program's stdout) is written in place instead,
 * since renaming over it would replace the device or the link. A link to a regular
 * file is followed: the file it names is replaced and the link stays. */
#ifndef PN_OUT_FILE_H
#define PN_OUT_FILE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

typedef struct pn_out_file {
    FILE *f;                    /* what to write to */
    const char *option;         /* for messages: "--trace" */
    char path[PATH_MAX];        /* the final name (a link's target) */
    char tmp[PATH_MAX + 32];    /* the temporary name; "" when written in place */
} pn_out_file;

/* Opens path for writing: its temporary file, or the stream itself (appending).
 * option names the output in messages ("--trace PATH: cannot ..."). */
int pn_out_open(pn_out_file *o, const char *path, const char *option);

/* Flushes and closes o, then puts the temporary file in place (pn_out_rename). On
 * failure the temporary file is removed and the path keeps what it held. */
int pn_out_commit(pn_out_file *o);

/* Closes o and removes its temporary file: the path keeps what it held. */
void pn_out_abandon(pn_out_file *o);

/* Whether pn_out_open would succeed, leaving nothing behind: a temporary file can be
 * made beside path, or the stream can be written (it is not opened: a FIFO would
 * wait for a reader). */
int pn_out_check(const char *path, const char *option);

/* Opens the stream path for appending. This program's stdout or stderr is written
 * through a copy of its descriptor, so that both share one offset: reopened by name
 * (/proc/self/fd/1) it would get an offset of its own, and what one writes the other
 * would overwrite when stdout was redirected to a file with '>'. NULL with errno. */
FILE *pn_out_append_stream(const char *path);

/* For writers that make the temporary file themselves (HDF5): "<path>.tmp-<pid>". */
int pn_out_temp_name(const char *path, char *tmp, size_t cap);

/* fsyncs tmp, renames it to path and fsyncs path's directory; on failure removes tmp. */
int pn_out_rename(const char *tmp, const char *path, const char *option);

#endif
