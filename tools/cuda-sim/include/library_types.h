/* library_types.h of pipenet's CUDA stand-in (tools/cuda-sim): the data types the
 * CUDA libraries name (cuBLAS GemmEx's operands), with CUDA's names and numbers. Only
 * those pipenet uses, and their neighbours a wrong choice would name. */
#ifndef PN_CUDA_SIM_LIBRARY_TYPES_H
#define PN_CUDA_SIM_LIBRARY_TYPES_H

typedef enum cudaDataType_t {
    CUDA_R_32F = 0,
    CUDA_R_64F = 1,
    CUDA_R_16F = 2,
    CUDA_R_8I = 3,
    CUDA_R_32I = 10,
    CUDA_R_16BF = 14
} cudaDataType;
typedef enum cudaDataType_t cudaDataType_t;

#endif
