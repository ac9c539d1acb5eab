/* cuTensorMapEncodeTiled for host programs run for the PTX simulator (flashsim.ptx.hostshim).
 *
 * A host program (CUTLASS's, FlashAttention-3's...) builds its kernel's parameters, TMA descriptors inside, with the
 * driver's cuTensorMapEncodeTiled. Linked against this file instead of libcuda (the program calls the function by
 * name: CUTLASS with CUTLASS_ENABLE_DIRECT_CUDA_DRIVER_CALL), each call appends one JSON line with its arguments to
 * the file $FLASHSIM_TENSORMAP_LOG, and then, by $FLASHSIM_TENSORMAP_MODE:
 *   "tag" (the default): the 128-byte map gets the tag "FSHOSTTM", the call's index (u32 little-endian) and zeros,
 *       which flashsim.ptx.hostshim replaces by flashsim.ptx.tensor_map_tiled's map of the same arguments; no driver
 *       is needed, so this runs on a machine without a GPU;
 *   "forward": the driver's own cuTensorMapEncodeTiled (libcuda.so.1, opened at the first call) encodes the map, so
 *       the same program runs for real on a GPU and its log says what it asked for.
 * The types are spelled here as cuda.h declares them (enums are ints, cuuint32_t / cuuint64_t fixed-width), so
 * the file compiles with any C compiler, without the CUDA headers.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int CUresult;
typedef CUresult (*encode_fn)(void *, int, uint32_t, void *, const uint64_t *, const uint64_t *, const uint32_t *,
                              const uint32_t *, int, int, int, int);

enum { SHIM_OK = 0, SHIM_INVALID_VALUE = 1, SHIM_NOT_FOUND = 500 };

static unsigned calls;

static void record(FILE *f, unsigned index, int data_type, uint32_t rank, void *address, const uint64_t *dims,
                   const uint64_t *strides, const uint32_t *box, const uint32_t *element_strides, int interleave,
                   int swizzle, int l2, int oob) {
    fprintf(f, "{\"index\": %u, \"data_type\": %d, \"rank\": %u, \"global_address\": %llu, \"global_dim\": [", index,
            data_type, rank, (unsigned long long)(uintptr_t)address);
    for (uint32_t i = 0; i < rank; ++i) fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)dims[i]);
    fprintf(f, "], \"global_strides\": [");
    for (uint32_t i = 0; i + 1 < rank; ++i) fprintf(f, "%s%llu", i ? ", " : "", (unsigned long long)strides[i]);
    fprintf(f, "], \"box_dim\": [");
    for (uint32_t i = 0; i < rank; ++i) fprintf(f, "%s%u", i ? ", " : "", box[i]);
    fprintf(f, "], \"element_strides\": [");
    for (uint32_t i = 0; i < rank; ++i) fprintf(f, "%s%u", i ? ", " : "", element_strides[i]);
    fprintf(f, "], \"interleave\": %d, \"swizzle\": %d, \"l2_promotion\": %d, \"oob_fill\": %d}\n", interleave,
            swizzle, l2, oob);
}

CUresult cuTensorMapEncodeTiled(void *map, int data_type, uint32_t rank, void *address, const uint64_t *dims,
                                const uint64_t *strides, const uint32_t *box, const uint32_t *element_strides,
                                int interleave, int swizzle, int l2, int oob) {
    if (!map || rank < 1 || rank > 5 || !dims || (rank > 1 && !strides) || !box || !element_strides)
        return SHIM_INVALID_VALUE;
    unsigned index = calls++;
    const char *log = getenv("FLASHSIM_TENSORMAP_LOG");
    if (log && *log) {
        FILE *f = fopen(log, "a");
        if (!f) return SHIM_INVALID_VALUE;
        record(f, index, data_type, rank, address, dims, strides, box, element_strides, interleave, swizzle, l2, oob);
        fclose(f);
    }
    const char *mode = getenv("FLASHSIM_TENSORMAP_MODE");
    if (mode && strcmp(mode, "forward") == 0) {
        static encode_fn real;
        if (!real) {
            void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
            real = lib ? (encode_fn)dlsym(lib, "cuTensorMapEncodeTiled") : 0;
            if (!real) return SHIM_NOT_FOUND;
        }
        return real(map, data_type, rank, address, dims, strides, box, element_strides, interleave, swizzle, l2,
                    oob);
    }
    if (mode && *mode && strcmp(mode, "tag") != 0) return SHIM_INVALID_VALUE;
    memset(map, 0, 128);
    memcpy(map, "FSHOSTTM", 8);
    memcpy((char *)map + 8, &index, 4); /* little-endian on every host nvcc targets */
    return SHIM_OK;
}
