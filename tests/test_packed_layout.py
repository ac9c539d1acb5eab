"""flashsim.gpu.packed's C structures for the driver's launch configuration have cuda.h's layout: each field's
offset and each structure's size against the header itself (a C program compiled with the system's compiler), and
the fields written through cuda.bindings' own CUlaunchConfig / CUlaunchAttribute read back at the same bytes."""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import types

import pytest

from flashsim.gpu import packed
from flashsim.gpu.build import cuda_include_dirs

_CONFIG = ("gridDimX", "gridDimY", "gridDimZ", "blockDimX", "blockDimY", "blockDimZ", "sharedMemBytes")
_OFFSETS = {  # (ctypes structure, C type name, fields whose offsets are compared)
    "config": (packed.LaunchConfig, "CUlaunchConfig", (*_CONFIG, "hStream", "attrs", "numAttrs")),
    "attribute": (packed.LaunchAttribute, "CUlaunchAttribute", ("id", "value")),
}


def _ours() -> dict:
    out = {}
    for _, (struct, cname, fields) in _OFFSETS.items():
        out[f"sizeof {cname}"] = ctypes.sizeof(struct)
        out[f"alignof {cname}"] = ctypes.alignment(struct)
        out.update({f"{cname}.{f}": getattr(struct, f).offset for f in fields})
    out["sizeof CUlaunchAttributeValue"] = ctypes.sizeof(packed.LaunchAttributeValue)
    out["CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION"] = (
        packed.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    )
    return out


def test_the_structures_have_cuda_h_layout(tmp_path):
    """sizeof, alignof and offsetof of every field, printed by a C program that includes the toolkit's cuda.h."""
    cc = shutil.which("cc") or shutil.which("gcc")
    inc = next((d for d in cuda_include_dirs() if os.path.isfile(os.path.join(d, "cuda.h"))), None)
    if cc is None or inc is None:
        pytest.skip("needs a C compiler and the CUDA toolkit's cuda.h")
    lines = []
    for _, (_, cname, fields) in _OFFSETS.items():
        lines.append(f'printf("sizeof {cname} %zu\\n", sizeof({cname}));')
        lines.append(f'printf("alignof {cname} %zu\\n", _Alignof({cname}));')
        lines += [f'printf("{cname}.{f} %zu\\n", offsetof({cname}, {f}));' for f in fields]
    lines.append('printf("sizeof CUlaunchAttributeValue %zu\\n", sizeof(CUlaunchAttributeValue));')
    lines.append(
        'printf("CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION %d\\n", '
        "(int)CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);"
    )
    src = tmp_path / "layout.c"
    src.write_text(
        "#include <stddef.h>\n#include <stdio.h>\n#include <cuda.h>\nint main(void) {\n"
        + "\n".join(lines)
        + "\nreturn 0; }\n"
    )
    exe = tmp_path / "layout"
    subprocess.run([cc, "-std=c11", f"-I{inc}", "-o", str(exe), str(src)], check=True, capture_output=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    header = {k: int(v) for k, v in (line.rsplit(" ", 1) for line in out.splitlines())}
    assert header == _ours()
    assert header["sizeof CUlaunchConfig"] == 56 and header["sizeof CUlaunchAttribute"] == 72


def test_cuda_bindings_structures_read_back_through_ours():
    """Fields written through cuda.bindings' CUlaunchConfig (two attributes) land where ours reads them."""
    driver = pytest.importorskip("cuda.bindings.driver")
    c = driver.CUlaunchConfig()
    for i, name in enumerate(_CONFIG):
        setattr(c, name, 1000 + i)
    c.hStream = 0x1122_3344_5566_7788
    attrs = []
    for ident, value in ((packed.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, 1), (2, 7)):  # 2: COOPERATIVE
        a = driver.CUlaunchAttribute()
        a.id = driver.CUlaunchAttributeID(ident)
        a.value.programmaticStreamSerializationAllowed = value  # the union's first int, as .cooperative is
        attrs.append(a)
    c.attrs = attrs
    c.numAttrs = 2
    ours = packed.LaunchConfig.from_address(c.getPtr())
    assert [getattr(ours, n) for n in _CONFIG] == [1000 + i for i in range(len(_CONFIG))]
    assert ours.hStream == 0x1122_3344_5566_7788 and ours.numAttrs == 2
    read = [(ours.attrs[i].id, ours.attrs[i].value.programmaticStreamSerializationAllowed) for i in range(2)]
    assert read == [(6, 1), (2, 7)]


def test_ours_are_what_cuda_core_builds():
    """c_config of a programmatic launch: the same fields as cuda.core's native configuration for it."""
    lc = pytest.importorskip("cuda.core._launch_config")
    from cuda.core import LaunchConfig

    for pss in (False, True):
        config = LaunchConfig(
            grid=(3, 2, 5), block=(128, 2, 1), shmem_size=70_000, programmatic_stream_serialization=pss
        )
        ours, _ = packed.c_config(config)
        ref = lc._to_native_launch_config(config)
        assert [getattr(ours, n) for n in (*_CONFIG, "numAttrs")] == [getattr(ref, n) for n in (*_CONFIG, "numAttrs")]
        got = [
            (ours.attrs[i].id, ours.attrs[i].value.programmaticStreamSerializationAllowed) for i in range(ours.numAttrs)
        ]
        assert got == [(int(a.id), a.value.programmaticStreamSerializationAllowed) for a in ref.attrs]
    with pytest.raises(ValueError, match="no thread-block clusters"):
        packed.c_config(types.SimpleNamespace(grid=(2, 1, 1), block=(32, 1, 1), shmem_size=0, cluster=(2, 1, 1)))
    with pytest.raises(ValueError, match="no cooperative launch"):
        packed.c_config(types.SimpleNamespace(grid=(2, 1, 1), block=(32, 1, 1), shmem_size=0, is_cooperative=True))
