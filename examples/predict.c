/* predict: runs a pipenet model on the first samples of a dataset file, using only
 * pipenet.h (and plain HDF5 calls to read the file). Prints each sample's predicted
 * class (the largest output) and, when the file has the model's labels, the label
 * and the accuracy; for a binary classifier (sigmoid_xent), each sample's probability
 * of label 1 and, with the labels, the AUC; for a model whose output is no
 * classification's logits (an mse regression), each sample's output values and,
 * with the targets, the RMSE.
 * Build:  mpicc predict.c $(pkg-config --cflags --libs pipenet)
 * usage: predict MODEL.h5 DATA.h5 [N]   (N samples, default 10; 0 for all) */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <pipenet.h>

/* Reads the first n samples (at most) of dataset name of file into a new array of
 * width values per sample (floats, or ints when ids); *n becomes the count read.
 * Returns NULL when the file has no such dataset or it has another shape. */
static void *read_samples(hid_t file, const char *name, int ids, int width, long *n)
{
    if (H5Lexists(file, name, H5P_DEFAULT) <= 0) return NULL;
    hid_t dset = H5Dopen2(file, name, H5P_DEFAULT), space = H5Dget_space(dset);
    hsize_t dims[3] = {0, 1, 1}; /* [N], [N, width] or [N, seq, width] */
    int rank = H5Sget_simple_extent_ndims(space);
    void *data = NULL;
    if (rank >= 1 && rank <= 3 && H5Sget_simple_extent_dims(space, dims, NULL) == rank &&
        dims[1] * dims[2] == (hsize_t)width) {
        if (*n <= 0 || *n > (long)dims[0]) *n = (long)dims[0];
        hsize_t start[3] = {0, 0, 0}, count[3] = {(hsize_t)*n, dims[1], dims[2]};
        hid_t mem = H5Screate_simple(rank, count, NULL);
        data = malloc((size_t)*n * (size_t)width * (ids ? sizeof(int) : sizeof(float)));
        if (data && (H5Sselect_hyperslab(space, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
                     H5Dread(dset, ids ? H5T_NATIVE_INT : H5T_NATIVE_FLOAT, mem, space,
                             H5P_DEFAULT, data) < 0)) {
            free(data);
            data = NULL;
        }
        H5Sclose(mem);
    }
    H5Sclose(space);
    H5Dclose(dset);
    return data;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: %s MODEL.h5 DATA.h5 [N]\n", argv[0]);
        return 2;
    }
    long n = argc == 4 ? atol(argv[3]) : 10;
    pn_model *model;
    if (pn_model_load(&model, argv[1]) != 0) {
        fprintf(stderr, "predict: %s\n", pn_model_error());
        return 1;
    }
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    hid_t file = H5Fopen(argv[2], H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file < 0) {
        fprintf(stderr, "predict: cannot open %s\n", argv[2]);
        pn_model_free(model);
        return 1;
    }

    /* One array per input: the model's float inputs must be in the file; ids inputs
     * (the labels) are used when present. */
    int n_inputs = pn_model_input_count(model), status = 0, labels = -1;
    void **inputs = calloc((size_t)n_inputs, sizeof *inputs);
    for (int i = 0; i < n_inputs && status == 0; i++) {
        const char *dataset = pn_model_input_dataset(model, i);
        int ids = pn_model_input_is_ids(model, i);
        inputs[i] = read_samples(file, dataset, ids, pn_model_input_size(model, i), &n);
        if (!inputs[i] && !ids) {
            fprintf(stderr, "predict: %s has no float32 dataset '%s' of %d values per sample "
                            "for input '%s'\n", argv[2], dataset,
                    pn_model_input_size(model, i), pn_model_input_name(model, i));
            status = 1;
        }
        if (inputs[i] && ids && pn_model_input_size(model, i) == 1) labels = i;
    }
    H5Fclose(file);

    int classes = pn_model_output_size(model, NULL);
    float *scores = status == 0 ? malloc((size_t)n * (size_t)classes * sizeof *scores) : NULL;
    if (status == 0 && pn_model_forward(model, (int)n, (const void *const *)inputs, NULL,
                                        scores) != 0) {
        fprintf(stderr, "predict: %s\n", pn_model_error());
        status = 1;
    }
    int kind = pn_model_classifies(model, NULL), classifies = kind == 1; /* else: raw values */
    for (long s = 0; status == 0 && s < n; s++) {
        const float *row = scores + s * classes;
        int best = 0;
        for (int c = 1; c < classes; c++)
            if (row[c] > row[best]) best = c;
        if (classifies) printf("sample %ld: class %d", s, best);
        else if (kind == 2) printf("sample %ld: p(1) %.6f", s, 1.0 / (1.0 + exp(-row[0])));
        else printf("sample %ld:", s);
        for (int c = 0; !classifies && kind != 2 && c < classes; c++) printf(" %.6g", row[c]);
        if (classifies && labels >= 0) printf(" (label %d)", ((const int *)inputs[labels])[s]);
        printf("\n");
    }
    double loss, accuracy, rmse = pn_model_rmse(model), auc = pn_model_auc(model);
    long rows = status == 0 ? pn_model_loss(model, &loss, &accuracy) : 0;
    if (rows > 0 && !isnan(accuracy))
        printf("%s on %ld samples of %s: accuracy %.2f%%, mean loss %.4f\n",
               pn_model_name(model), n, argv[2], 100.0 * accuracy, loss);
    else if (rows > 0 && !isnan(rmse))
        printf("%s on %ld samples of %s: RMSE %.4f, mean loss %.4f\n", pn_model_name(model), n,
               argv[2], rmse, loss);
    else if (rows > 0 && !isnan(auc))
        printf("%s on %ld samples of %s: AUC %.4f, log-loss %.4f\n", pn_model_name(model), n,
               argv[2], auc, loss);
    for (int i = 0; i < n_inputs; i++) free(inputs[i]);
    free(inputs);
    free(scores);
    pn_model_free(model);
    return status;
}
