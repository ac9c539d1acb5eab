"""SFU instructions of a constant operand run as ptxas compiles them: evaluated at compile time
(flashsim.numerics.sfu_folding, flashsim.ptx.constants). The oracle is ptxas itself: the immediate its SASS stores."""

import re
import subprocess

import numpy as np
import pytest

import flashsim.ptx as P
from flashsim.numerics import sfu_approx
from flashsim.numerics.sfu_folding import folded

FORMS = ["rsqrt.approx.f32", "rsqrt.approx.ftz.f32", "rcp.approx.f32", "sqrt.approx.f32", "ex2.approx.f32",
         "ex2.approx.ftz.f32", "lg2.approx.f32", "sin.approx.f32", "cos.approx.f32"]  # fmt: skip
VALUES = [128.0, 3.0, 0.3, 1e-40, -1e-40, 1e38, -140.0, 200.0, 0.0, -0.0, -2.0, 1e10]


def _kernel(form: str, x: np.float32, twice: bool = False) -> str:
    define = f"mov.f32 %f1, 0f{np.float32(x).view(np.uint32):08X};"
    if twice:  # a second definition: ptxas may still know it, flashsim no longer claims to
        define = "ld.global.f32 %f1, [%rd1];\n" + define
    return f""".version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{{
.reg .f32 %f<4>;
.reg .b64 %rd<2>;
ld.param.u64 %rd1, [p];
{define}
{form} %f2, %f1;
st.global.f32 [%rd1], %f2;
ret;
}}
"""


def _run(ptx: str) -> int:
    out = np.zeros(1, np.float32)
    P.launch(P.load(ptx, contraction="none").kernel("k"), 1, 1, [out])
    return int(out.view(np.uint32)[0])


def test_rsqrt_of_128_is_the_constant_ptxas_stores_not_the_mufu():
    # MUFU.RSQ(128) = 0x3DB504F2; ptxas folds nvcc's rsqrtf(128.0f) to the correctly rounded 0x3DB504F3
    assert _run(_kernel("rsqrt.approx.f32", np.float32(128))) == 0x3DB504F3
    mufu = sfu_approx.model_of("rsqrt.approx.f32")(np.array([np.float32(128).view(np.uint32)], np.uint32))
    assert int(mufu[0]) == 0x3DB504F2


@pytest.mark.parametrize("form", FORMS)
def test_folded_forms_in_the_simulator(form):
    model = sfu_approx.model_of(form)
    for v in VALUES:
        x = np.float32(v)
        want = folded(form, int(x.view(np.uint32)))
        if want is None:  # left to the SFU
            want = int(model(np.array([x.view(np.uint32)], np.uint32))[0])
        assert _run(_kernel(form, x)) == want, (form, v)


def test_a_register_with_two_definitions_runs_the_sfu():
    x = np.float32(128)
    out = np.array([x], np.float32)
    P.launch(P.load(_kernel("rsqrt.approx.f32", x, twice=True), contraction="none").kernel("k"), 1, 1, [out])
    assert int(out.view(np.uint32)[0]) == 0x3DB504F2


def _immediate(sass: str) -> int | None:
    """The f32 bits one kernel's SASS stores (None where a MUFU still runs)."""
    if "MUFU" in sass:
        return None
    if re.search(r"STG\.E\s+desc\[\w+\]\[R\d+\.64\],\s*RZ", sass):
        return 0
    number = lambda t, f: f(float(t.strip().replace("+INF", "inf").replace("INF", "inf")))
    h = re.search(r"HFMA2\.MMA\s+R\d+,\s*-RZ,\s*RZ,\s*([^,]+),\s*([^;]+);", sass)
    if h:  # two f16 halves
        half = lambda t: int(number(t, np.float16).view(np.uint16))
        return (half(h.group(1)) << 16) | half(h.group(2))
    m = re.search(r"(?:MOV|IMAD\.MOV\.U32)\s+R\d+,\s*(?:RZ,\s*RZ,\s*)?(0x[0-9a-f]+|[-+]?INF|-?[0-9.e+\-]+)\s*;", sass)
    text = m.group(1)
    return int(text, 16) if text.startswith("0x") else int(number(text, np.float32).view(np.uint32))


@pytest.mark.parametrize("form", FORMS)
def test_folding_rule_against_ptxas(form, tmp_path):
    import shutil

    from flashsim.gpu.build import cuda_tool

    if shutil.which("ptxas") is None:
        pytest.skip("needs ptxas on PATH (a CUDA toolkit)")
    try:
        nvdisasm = cuda_tool("nvdisasm")
    except Exception as exc:  # noqa: BLE001 - the tool's absence, whatever form it takes
        pytest.skip(f"needs nvdisasm (the test extra): {exc}")
    # one module, one kernel per value: one ptxas run per form
    kernels = [_kernel(form, np.float32(v)).split(".address_size 64\n")[1].replace("entry k(", f"entry k{i}(")
               for i, v in enumerate(VALUES)]  # fmt: skip
    (tmp_path / "k.ptx").write_text(".version 8.0\n.target sm_90\n.address_size 64\n" + "".join(kernels))
    subprocess.run(
        ["ptxas", "-arch=sm_90", "-O3", str(tmp_path / "k.ptx"), "-o", str(tmp_path / "k.cubin")], check=True
    )
    sass = subprocess.run([nvdisasm, "-c", str(tmp_path / "k.cubin")], capture_output=True, text=True).stdout
    bodies = {
        int(m.group(1)): m.group(2)
        for m in re.finditer(r"\.text\.k(\d+):\n(.*?)(?=\.L_x_\d+:\n\s+/\*\w+\*/\s+BRA)", sass, re.S)
    }
    assert sorted(bodies) == list(range(len(VALUES)))
    for i, v in enumerate(VALUES):
        bits = int(np.float32(v).view(np.uint32))
        assert _immediate(bodies[i]) == folded(form, bits), (form, v)
