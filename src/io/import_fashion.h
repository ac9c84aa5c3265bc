/* Fashion-MNIST import: the four gzip IDX files of Debian's dataset-fashion-mnist
 * package (or of the original distribution) become dataset HDF5 files (DESIGN.md
 * section 3): train.h5 and test.h5 with /features float32 [N, 784] scaled to [0, 1],
 * /labels int32 [N] in 0..9, and root attributes `source` and `num_classes`. */
#ifndef PN_IMPORT_FASHION_H
#define PN_IMPORT_FASHION_H

#include "io/import_util.h"

/* Where Debian's dataset-fashion-mnist package installs the IDX files. */
#define PN_FASHION_MNIST_SRC "/usr/share/datasets/fashion-mnist"


/* Converts src_dir/{train,t10k}-{images-idx3,labels-idx1}-ubyte.gz into
 * out_dir/train.h5 and out_dir/test.h5 (out_dir is created if missing; each file is
 * written under a temporary name and renamed when complete). Corrupt or truncated
 * input is refused with a message naming the file. progress may be NULL. */
int pn_import_fashion_mnist(const char *src_dir, const char *out_dir,
                            pn_import_progress progress, void *ctx);

#endif
