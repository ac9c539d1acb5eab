"""A host TensorDescriptor as the tensor map Triton's launcher makes of it on targets with TMA (sm_90 and later).

Triton's launcher (triton/backends/nvidia/driver.py ``make_tensordesc_arg`` and driver.c ``fillTMADescriptorTiled``)
calls cuTensorMapEncodeTiled with: the element type from the compiled kernel's descriptor metadata (its device enum
mapped to the host enum; TF32 where the descriptor rounds f32 to tf32), the rank, the base address, the shape and
the byte strides innermost first (the last dimension doubled for padded fp4), the metadata's block size as the box,
element strides 1, no interleave, the metadata's swizzle, L2 promotion 128B, and an out-of-bounds fill of NaN where
the descriptor's padding is "nan" (else none, i.e. zeros). The map is built by flashsim.ptx.tensor_map_tiled, which
takes exactly those arguments.
"""

from __future__ import annotations

from .support import TritonArgumentError

__all__ = ["tensor_map", "DEVICE_TO_HOST_DTYPE"]

# Triton's TMA_DTYPE_DEVICE_TO_HOST: the device-side enum of the metadata against CUtensorMapDataType
DEVICE_TO_HOST_DTYPE = {i: i for i in range(16)} | {8: 10, 9: 8, 10: 9}
TF32 = 11
L2_PROMOTION_128B = 2
OOB_FILL_NAN = 1


def tensor_map(desc, meta: dict, where: str):
    """The tensor map of ``desc`` (a TensorDescriptor whose base is a flashsim.triton Pointer) for the descriptor
    metadata ``meta`` of the compiled kernel."""
    try:
        from ..ptx import tensor_map_tiled
    except ImportError:
        raise TritonArgumentError(
            f"{where}: this target passes TensorDescriptors as TMA tensor maps, and this flashsim has no "
            "flashsim.ptx.tensor_map_tiled to build them (use target='sm_80', where Triton passes them as pointers)"
        ) from None
    if meta.get("is_im2col", False):
        raise TritonArgumentError(f"{where}: im2col tensor descriptors are not supported by flashsim.triton")
    elem_size = int(meta["elem_size"])
    elem_type = TF32 if desc.round_f32_to_tf32 else int(meta["elem_type"])
    shape = [int(s) for s in desc.shape]
    if meta.get("fp4_padded", False):
        shape[-1] *= 2
    strides = [int(s) for s in desc.strides]
    try:
        return _encode(tensor_map_tiled, desc, meta, shape, strides, elem_size, elem_type)
    except ValueError as exc:  # CUDA's rule, named by tensor_map_tiled
        raise TritonArgumentError(f"{where}: the tensor map Triton's launcher would encode is refused: {exc}") from None


def _encode(tensor_map_tiled, desc, meta, shape, strides, elem_size, elem_type):
    return tensor_map_tiled(
        desc.base.array,
        data_type=DEVICE_TO_HOST_DTYPE[elem_type],
        global_dim=shape[::-1],
        global_strides=[s * elem_size for s in strides[:-1]][::-1],
        box_dim=[int(b) for b in meta["block_size"]][::-1],
        element_strides=[1] * len(shape),
        interleave=0,
        swizzle=int(meta["swizzle"]),
        l2_promotion=L2_PROMOTION_128B,
        oob_fill=OOB_FILL_NAN if desc.padding == "nan" else 0,
    )
