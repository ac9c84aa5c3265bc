/* SequenceToBatch planning (see seq_batch.h). */
#include "layers/seq_batch.h"

#include <stdint.h>

#include "base/error.h"

int pn_seq_batch_plan(pn_seq_batch *sb, pn_device dev, int batch, int seq, const int *lengths,
                      bool reverse)
{
    for (int b = 0; lengths && b < batch; b++)
        if (lengths[b] < 1 || lengths[b] > seq)
            return pn_error_set(PN_ERR_INVALID, "sample %d has length %d, outside [1, %d]", b,
                                lengths[b], seq);
    size_t rows = (size_t)batch * (size_t)seq;
    size_t ints = (size_t)batch + 2 * (size_t)seq + 1 + rows;
    PN_TRY(pn_buffer_reserve(&sb->host_buf, pn_device_host(), ints * sizeof(int)));
    PN_TRY(pn_buffer_reserve(&sb->dev_buf, dev, (rows > 0 ? rows : 1) * sizeof(int)));
    sb->batch = batch;
    sb->seq = seq;
    sb->order = sb->host_buf.data;
    sb->offset = sb->order + batch;
    sb->count = sb->offset + seq + 1;
    sb->rows = sb->count + seq;
    sb->index = sb->dev_buf.data;
#define LEN(b) (lengths ? lengths[b] : seq)
    /* stable insertion sort by length, longest first: ties keep sample order */
    for (int b = 0; b < batch; b++) {
        int k = b;
        while (k > 0 && LEN(sb->order[k - 1]) < LEN(b)) {
            sb->order[k] = sb->order[k - 1];
            k--;
        }
        sb->order[k] = b;
    }
    sb->steps = batch > 0 ? LEN(sb->order[0]) : 0;
    int r = 0;
    for (int t = 0; t < seq; t++) {
        sb->offset[t] = r;
        int n = 0;
        while (n < batch && LEN(sb->order[n]) > t) {
            int b = sb->order[n], len = LEN(b);
            sb->rows[r++] = b * seq + (reverse ? len - 1 - t : t);
            n++;
        }
        sb->count[t] = n;
    }
    sb->offset[seq] = r;
    sb->total = r;
#undef LEN
    if (r == 0) return PN_OK;
    return pn_buffer_write(&sb->dev_buf, 0, sb->rows, (size_t)r * sizeof(int));
}

void pn_seq_batch_release(pn_seq_batch *sb)
{
    pn_buffer_release(&sb->host_buf);
    pn_buffer_release(&sb->dev_buf);
    *sb = (pn_seq_batch){0};
}
