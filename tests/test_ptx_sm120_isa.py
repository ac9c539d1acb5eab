"""What each arch accepts in flashsim.ptx, as ptxas 13.0 decides it: small PTX probes assembled for sm_80, sm_89,
sm_90a, sm_100a and sm_120a (flashsim's "sm_90", "sm_100", "sm_120" are the arch-specific targets), their recorded
outcomes checked against ptxas and against the simulator's refusals (flashsim.ptx.isa's table); the listing
flashsim.ptx.isa.forms(arch) and ``flashsim ptx isa``; the 99 KB shared-memory cap of compute capability 12.0 at
launch; and the Hopper forms sm_120a keeps (TMA, the mbarrier .sem / .scope forms, setmaxnreg) running with
arch="sm_120"."""

from __future__ import annotations

import re
import shutil
import subprocess

import numpy as np
import pytest
from test_ptx_hopper_sync import BOUNDS, MBARRIER, SETMAXNREG
from test_ptx_tma import _load_case, _map, _multicast_ptx, expected_load

import flashsim.ptx as P
from flashsim.cli import main
from flashsim.ptx import isa
from flashsim.ptx.probes import tma as T

TARGETS = {"sm_80": "sm_80", "sm_89": "sm_89", "sm_90": "sm_90a", "sm_100": "sm_100a", "sm_120": "sm_120a"}
ALL = frozenset(TARGETS)
SM90 = frozenset({"sm_90", "sm_100", "sm_120"})
SM100 = frozenset({"sm_100", "sm_120"})

# (instruction, the flashsim archs whose target ptxas 13.0 accepts it): recorded from ptxas 13.0 (V13.0.88)
PROBES = [
    ("wgmma.fence.sync.aligned;", {"sm_90"}),
    ("wgmma.commit_group.sync.aligned;", {"sm_90"}),
    ("wgmma.wait_group.sync.aligned 0;", {"sm_90"}),
    ("tcgen05.fence::before_thread_sync;", {"sm_100"}),
    ("setmaxnreg.inc.sync.aligned.u32 232;", SM90),
    ("setmaxnreg.dec.sync.aligned.u32 40;", SM90),
    ("mbarrier.init.shared::cta.b64 [sm], 1;", ALL),
    ("mbarrier.arrive.shared::cta.b64 %rd0, [sm];", ALL),
    ("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 %rd0, [sm], 16;", SM90),
    ("mbarrier.arrive.relaxed.cta.shared::cta.b64 %rd0, [sm];", SM90),
    ("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [sm];", SM90),
    ("mbarrier.try_wait.parity.shared::cta.b64 %p0, [sm], 0;", SM90),
    ("mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 %p0, [sm], 0;", SM90),
    ("mbarrier.try_wait.parity.relaxed.cta.shared::cta.b64 %p0, [sm], 0;", SM90),
    (
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [sm], [%rd1, {%r0, %r1}], [sm];",
        SM90,
    ),
    (
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [sm], [%rd1, {%r0, %r1}], [sm], %h0;",
        SM90,
    ),
    ("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd1, {%r0, %r1}], [sm];", SM90),
    ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [sm], [%rd1], 16, [sm];", SM90),
    ("cp.async.bulk.commit_group;", SM90),
    ("cp.async.bulk.wait_group.read 0;", SM90),
    ("fence.proxy.async.shared::cta;", SM90),
    ("fence.mbarrier_init.release.cluster;", SM90),
    ("elect.sync %r0|%p0, 0xffffffff;", SM90),
    ("griddepcontrol.wait;", SM90),
    ("mapa.shared::cluster.u32 %r0, %r1, 1;", SM90),
    ("barrier.cluster.arrive;", SM90),
    ("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%r7], {%r0};", SM90),
    ("add.rn.f32x2 %rd0, %rd1, %rd2;", SM100),
    ("max.f32 %f0, %f1, %f2, %f3;", SM100),
    ("cvt.rn.satfinite.e4m3x2.f32 %h0, %f0, %f1;", {"sm_89", *SM90}),
    ("cvt.rn.satfinite.e2m1x2.f32 %c0, %f0, %f1;", SM100),
    ("cvt.rz.satfinite.ue8m0x2.f32 %h0, %f0, %f1;", SM100),
    ("ldmatrix.sync.aligned.m16n16.x1.trans.shared.b8 {%r0, %r1}, [%r7];", SM100),
    ("ldmatrix.sync.aligned.m8n16.x1.shared.b8x16.b4x16_p64 {%r0}, [%r7];", SM100),
    ("stmatrix.sync.aligned.m16n8.x1.trans.shared.b8 [%r7], {%r0};", SM100),
    ("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%r0, %r1, %r2, %r3}, [%r7];", ALL),
    (
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%f0,%f1,%f2,%f3}, {%r0,%r1,%r2,%r3}, {%r4,%r5}, "
        "{%f4,%f5,%f6,%f7};",
        ALL,
    ),
]
NOT_SIMULATED = {
    "tcgen05.fence::before_thread_sync;"
}  # accepted by ptxas, no builder: "not implemented" where accepted


def probe_module(insn: str, target: str) -> str:
    return "\n".join(
        [".version 8.8", f".target {target}", ".address_size 64", ".visible .entry k(.param .u64 p)", "{"]
        + [
            "  .reg .b8 %c<4>; .reg .b16 %h<4>; .reg .b32 %r<8>; .reg .f32 %f<8>; .reg .b64 %rd<4>; .reg .pred %p<2>;",
            "  .shared .align 128 .b8 sm[4096];",
            "  " + insn,
            "  ret;",
            "}",
        ]
    )


def arch_refusals(insn: str, arch: str) -> list[str]:
    """The simulator's refusals of ``insn`` for ``arch``: the messages of the instructions it cannot run."""
    program = P.load(probe_module(insn, TARGETS[arch]), arch=arch).kernel("k").program
    return [str(e) for e in program.unsupported]


@pytest.mark.parametrize("insn, accepted", PROBES, ids=[p[0].split()[0] for p in PROBES])
@pytest.mark.parametrize("arch", list(TARGETS))
def test_the_simulator_refuses_what_ptxas_refuses(insn, accepted, arch):
    found = arch_refusals(insn, arch)
    if arch in accepted:
        if insn in NOT_SIMULATED:
            assert found and all("not implemented" in m for m in found), found
        else:
            assert not found, found
    else:
        assert found and all(f"refused on {arch}" in m for m in found), found


needs_ptxas = pytest.mark.skipif(shutil.which("ptxas") is None, reason="ptxas (CUDA 13.0) is not on PATH")


@needs_ptxas
@pytest.mark.parametrize("insn, accepted", PROBES, ids=[p[0].split()[0] for p in PROBES])
def test_recorded_outcomes_are_ptxas(insn, accepted, tmp_path):
    """The recorded table is what ptxas 13.0 says today, target by target."""
    for arch, target in TARGETS.items():
        path = tmp_path / f"{target}.ptx"
        path.write_text(probe_module(insn, target))
        done = subprocess.run(
            ["ptxas", f"-arch={target}", str(path), "-o", "/dev/null"], capture_output=True, text=True
        )
        assert (done.returncode == 0) == (arch in accepted), f"{target}: {done.stderr.strip()}"


# -- the listing ------------------------------------------------------------------------------------------------------


def test_forms_lists_the_table():
    sm120, sm90 = isa.forms("sm_120"), isa.forms("sm_90")
    assert "wgmma" not in " ".join(sm120["accepted"]) and any(f.startswith("wgmma ") for f in sm120["refused"])
    assert any(f.startswith("tcgen05 ") for f in sm120["refused"])
    assert any(f.startswith("wgmma") for f in sm90["accepted"])
    for form in ("cvt.e2m1x2", "cvt.ue8m0x2", "ldmatrix.m8n16", "ldmatrix.m16n16", "stmatrix.m16n8", "add.f32x2"):
        assert any(f.startswith(form + " ") for f in sm120["accepted"]), form
        assert any(f.startswith(form + " ") for f in sm90["refused"]), form
    assert any(f.startswith("setmaxnreg") for f in sm120["accepted"])
    assert any(f.startswith("setmaxnreg") for f in isa.forms("sm_89")["refused"])
    assert {"cp", "mbarrier", "mma", "ldmatrix"} <= {f.split(" ")[0].split(".")[0] for f in sm120["accepted"]}
    assert isa.forms("sm_120a") == sm120


def test_forms_come_from_the_registered_table():
    """Every restricted form is listed once per arch, accepted or refused as its Requirement says; every registered
    opcode not refused as a whole is listed."""
    for arch in TARGETS:
        table = isa.forms(arch)
        for reqs in isa._REQUIRES.values():
            for r in reqs:
                listed = [f for f in table["accepted"] + table["refused"] if f.startswith(r.form + "  [")]
                if r.accepts(arch) and not (r.modifiers or r.name):
                    continue  # an opcode accepted as a whole is listed as the opcode
                if r.accepts(arch) and r.opcode not in isa._BUILDERS and r.opcode not in isa._FORMS:
                    continue  # accepted, but no builder: not listed as accepted
                assert len(listed) == 1 and (listed[0] in table["accepted"]) == r.accepts(arch), (arch, r.form)
        for name in isa.opcodes():
            opcode, _, modifier = name.split(" ")[0].partition(".")
            reqs = isa._REQUIRES.get(opcode, ())
            binding = [r for r in reqs if r.name is None and (not r.modifiers or f".{modifier}" in r.modifiers)]
            if not modifier:  # a whole opcode: only its opcode-wide rule binds it
                binding = [r for r in binding if not r.modifiers]
            assert (name in table["accepted"]) == all(r.accepts(arch) for r in binding), (arch, name)


def test_cli_lists_the_forms(capsys):
    assert main(["ptx", "isa", "--arch", "sm_120"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == isa.forms("sm_120")["accepted"]
    assert main(["ptx", "isa", "--arch", "sm_120", "--refused"]) == 0
    assert capsys.readouterr().out.splitlines() == isa.forms("sm_120")["refused"]
    assert main(["ptx", "isa", "--arch", "sm_7"]) == 2
    assert capsys.readouterr().err.strip().startswith("flashsim ptx: unknown arch 'sm_7'")


# -- shared memory: 99 KB a block on compute capability 12.0 ---------------------------------------------------------

SMEM = """.version 8.8
.target sm_120a
.address_size 64
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<2>; .reg .b64 %rd<2>;
  .shared .align 16 .b8 fixed[1024];
  mov.u32 %r0, %dynamic_smem_size;
  ld.param.u64 %rd0, [out];
  st.global.u32 [%rd0], %r0;
  ret;
}
"""


def test_sm120_shared_memory_cap_is_99_kb():
    """CUDA's compute capability 12.x: 100 KB of shared memory per SM (cuda_occupancy.h's carve-outs stop at 100 KB),
    99 KB = 101376 bytes opt-in per block; static and dynamic shared memory together."""
    kernel = P.load(SMEM, arch="sm_120").kernel("k")
    out = np.zeros(1, np.uint32)
    P.launch(kernel, 1, 32, [out], shared_mem=101376 - 1024)
    assert out[0] == 101376 - 1024
    with pytest.raises(
        P.LaunchError,
        match=r"101377 bytes of shared memory per block \(1024 static \+ 100353 dynamic\) "
        r"past sm_120's 101376 \(99 KB, the most a block may opt in to on compute capability 12\.0\)",
    ):
        P.launch(kernel, 1, 32, [out], shared_mem=101376 - 1023)
    P.launch(P.load(SMEM, arch="sm_90").kernel("k"), 1, 32, [out], shared_mem=101376)  # sm_90 allows 227 KB


# -- the Hopper forms sm_120a keeps, run with arch="sm_120" ------------------------------------------------------------


def for_sm120a(ptx_text: str) -> str:
    """The same PTX for sm_120a (PTX ISA 8.7+ names that target)."""
    ptx_text = re.sub(r"^\.version \d+\.\d+", ".version 8.8", ptx_text, count=1, flags=re.M)
    return re.sub(r"^\.target sm_\w+", ".target sm_120a", ptx_text, count=1, flags=re.M)


def test_tma_pipeline_runs_on_sm_120():
    """TMA loads completing on mbarriers (expect_tx, parity waits), the bytes bit-equal."""
    tiles = 6
    x = np.arange(tiles * 8 * 32, dtype=np.float32).reshape(tiles * 8, 32) * np.float32(0.5)
    tm = P.tensor_map_tiled(x, data_type="FLOAT32", global_dim=(32, tiles * 8), global_strides=(128,), box_dim=(32, 8))
    out = np.zeros_like(x)
    mod = P.load(for_sm120a(T.pipeline_ptx(tiles)), arch="sm_120")
    P.launch(mod.kernel("pipeline"), 1, 64, [np.frombuffer(tm.bytes, np.uint8).copy(), out], check="racecheck")
    assert np.array_equal(out, x)


@needs_ptxas
def test_ptxas_assembles_the_tma_pipeline_for_sm_120a(tmp_path):
    path = tmp_path / "pipeline.ptx"
    path.write_text(for_sm120a(T.pipeline_ptx(6)))
    done = subprocess.run(["ptxas", "-arch=sm_120a", str(path), "-o", "/dev/null"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "arrive, wait",
    [
        (
            "mbarrier.arrive.release.cta.shared::cta.b64 %rd7, [bar];",
            "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 %p2, [bar], 0;",
        ),
        (
            "mbarrier.arrive.relaxed.cta.shared::cta.b64 %rd7, [bar];",
            "mbarrier.try_wait.parity.relaxed.cta.shared::cta.b64 %p2, [bar], 0;",
        ),
        (
            "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [bar];",
            "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 %p2, [bar], 0;",
        ),
    ],
)
def test_mbarrier_sem_scope_forms_run_on_sm_120(arrive, wait):
    head = ".version 8.8\n.target sm_120a\n.address_size 64\n"
    kernel = P.load(head + MBARRIER.format(arrive=arrive, wait=wait), arch="sm_120", contraction="none").kernel("k")
    out = np.zeros(32, np.uint32)
    P.launch(kernel, 1, 64, [out], check="racecheck")
    assert out.tolist() == (np.arange(32) * 7).tolist()


def test_tma_multicast_runs_on_sm_120():
    """cp.async.bulk.tensor ... .multicast::cluster, which ptxas accepts for sm_120a: with ctaMask 1 (a launch without
    clusters is a cluster of one CTA) the box lands as the plain copy's."""
    case = _load_case(name="mc")
    a = T.arrays(case)
    out = np.zeros(T.load_out_bytes(case), np.uint8)
    args = [_map(case, a["tensor"]), out, np.int32(0), np.int32(8)]
    P.launch(P.load(for_sm120a(_multicast_ptx(case, 1)), arch="sm_120").kernel("tma_load"), 1, 128, args)
    assert np.array_equal(out[: T.smem_bytes(case)], expected_load(case, a["tensor"]))


@pytest.mark.parametrize("consumer, producer", [(240, 24), (232, 40)])
def test_setmaxnreg_register_split_runs_on_sm_120(consumer, producer):
    """FlashAttention-3's split of 64K registers (SageAttention3 keeps it on sm_120a): the producer warpgroup gives
    registers back, the consumers take them."""
    text = ".version 8.8\n.target sm_120a\n.address_size 64\n" + SETMAXNREG.format(
        directives=BOUNDS, consumer=consumer, producer=producer
    )
    out = np.zeros(384, np.uint32)
    report = P.launch(P.load(text, arch="sm_120", contraction="none").kernel("k"), 2, 384, [out])
    assert out.tolist() == (np.arange(384) // 128).tolist()
    assert report.counts["setmaxnreg.inc.sync.aligned.u32"] > 0
