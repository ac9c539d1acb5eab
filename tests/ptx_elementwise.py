"""One-instruction PTX kernels for the float and cvt tests: each thread loads its operands, runs the instruction
under test and stores the result (predicates as bits: p in bit 0, q in bit 1). Many forms share one module, so
one parse serves a whole test file."""

from __future__ import annotations

import numpy as np

from flashsim.ptx import launch, load

REG = {8: "%c", 16: "%h", 32: "%r", 64: "%rd"}
BLOCK = 128


def _kernel(name: str, insn: str, in_bits, out_bits: int, preds: int) -> str:
    n_in = len(in_bits)
    params = ", ".join([f".param .u64 p{i}" for i in range(n_in)] + [".param .u64 po", ".param .u32 n"])
    body = [
        f".visible .entry {name}({params})",
        "{",
        "  .reg .b8 %c<8>; .reg .b16 %h<8>; .reg .b32 %r<24>; .reg .b64 %rd<24>; .reg .pred %p<8>;",
        "  mov.u32 %r20, %tid.x; mov.u32 %r21, %ctaid.x; mov.u32 %r22, %ntid.x; mad.lo.u32 %r23, %r21, %r22, %r20;",
        "  ld.param.u32 %r19, [n]; setp.ge.u32 %p7, %r23, %r19; @%p7 bra DONE;",
    ]
    names = []
    for i, b in enumerate(in_bits):
        body.append(f"  ld.param.u64 %rd{10 + i}, [p{i}]; mul.wide.u32 %rd20, %r23, {b // 8};")
        body.append(f"  add.u64 %rd{10 + i}, %rd{10 + i}, %rd20; ld.global.b{b} {REG[b]}{i}, [%rd{10 + i}];")
        names.append(f"{REG[b]}{i}")
    out = f"{REG[out_bits]}5"
    body.append("  " + insn.format(*names, d=out, p="%p1", q="%p2"))
    if preds:
        body.append("  selp.b32 %r5, 1, 0, %p1;")
        if preds == 2:
            body.append("  selp.b32 %r6, 2, 0, %p2; or.b32 %r5, %r5, %r6;")
    body.append(f"  ld.param.u64 %rd15, [po]; mul.wide.u32 %rd20, %r23, {out_bits // 8}; add.u64 %rd15, %rd15, %rd20;")
    body += [f"  st.global.b{out_bits} [%rd15], {out};", "DONE:", "  ret;", "}"]
    return "\n".join(body)


class Forms:
    """Kernels ``k0``, ``k1``, ... of one PTX module, one per form (instruction template, input widths, output
    width, predicate count), built for and run with the numerics of ``arch``; ``run(i, *arrays)`` launches form i on
    arrays of its input widths."""

    def __init__(self, forms, contraction: str = "none", arch: str = "sm_90"):
        self.forms = list(forms)
        target = {"sm_100": "sm_100a", "sm_120": "sm_120a"}.get(arch, arch)  # the arch-specific forms need the a
        text = [".version 8.3" if arch == "sm_90" else ".version 8.8", f".target {target}", ".address_size 64"]
        text += [_kernel(f"k{i}", *f) for i, f in enumerate(self.forms)]
        self.module = load("\n".join(text), arch=arch, contraction=contraction)

    def run(self, i: int, *arrays) -> np.ndarray:
        _, in_bits, out_bits, preds = self.forms[i]
        arrays = [np.ascontiguousarray(a, np.dtype(f"u{b // 8}")) for a, b in zip(arrays, in_bits)]
        n = len(arrays[0])
        out = np.zeros(n, np.dtype(f"u{out_bits // 8}"))
        launch(self.module.kernel(f"k{i}"), (n + BLOCK - 1) // BLOCK, BLOCK, [*arrays, out, np.uint32(n)])
        return out
