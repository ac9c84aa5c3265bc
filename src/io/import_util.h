/* What the importers share: the progress callback the command line passes them, the
 * names of the files they write, creating the output directory, and putting a file
 * written under a temporary name in place. */
#ifndef PN_IMPORT_UTIL_H
#define PN_IMPORT_UTIL_H

#include <stddef.h>

/* Told about each output file once it is complete under its final name. */
typedef void (*pn_import_progress)(const char *path, long samples, void *ctx);

/* The splits every importer writes into its output directory, by index (0: train,
 * 1: test), each as the file <split>.h5 (pn_import_output). */
extern const char *const pn_import_splits[2];

/* out_dir/<split>.h5 into path (cap bytes); a path too long is refused naming it. */
int pn_import_output(const char *out_dir, int split, char *path, size_t cap);

/* mkdir -p: creates dir and any missing parents; an existing non-directory on the
 * way is an error naming it. */
int pn_import_make_dirs(const char *dir);

/* The temporary name out is written under: "<out>.tmp-<pid>" into tmp (cap bytes). */
int pn_import_tmp_name(const char *out, char *tmp, size_t cap);

/* Ends the writing of tmp whose status is rc: on success syncs tmp and renames it to
 * out (base/out_file.h: pn_out_rename); on any failure removes tmp. Returns the
 * status. */
int pn_import_finish(const char *tmp, const char *out, int rc);

#endif
