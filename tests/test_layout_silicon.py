"""flashsim.layout against the H200: the raw register dump of kernel/capture/layout.cu (tests/data/layout_sm90.npz,
made by ``python3 -m flashsim.gpu.capture.layout --out DIR`` on the GPU; its provenance entry is checked by
tests/test_drift.py). Also, with no GPU: the capture's host logic against a lane-by-lane stand-in, and the capture
kernel compiling for sm_90 and sm_120."""

import json
import pathlib

import numpy as np
import pytest

from flashsim import provenance
from flashsim.gpu.capture import layout as capture
from flashsim.layout import silicon

DATA = pathlib.Path(__file__).parent / "data" / "layout_sm90.npz"
needs_capture = pytest.mark.skipif(not DATA.is_file(), reason="no H200 capture in tests/data yet")


@pytest.fixture(scope="module")
def captured():
    return capture.load(DATA)


@needs_capture
def test_capture_is_from_sm90(captured):
    _, out, slots, arch, device = captured
    assert arch == "sm_90", f"capture made on {device} ({arch})"
    assert out.shape == (32, silicon.nout(slots)) and out.dtype == np.uint32


@needs_capture
@pytest.mark.parametrize("name", [n for n, _ in silicon.SLOTS] + ["p_from_s"])
def test_silicon_matches_the_layout_model(captured, name):
    inputs, out, slots, _, device = captured
    check = {c.name: c for c in silicon.compare(inputs, out, slots)}[name]
    assert check.ok, f"{device}: {check}"


# ---- no GPU needed -------------------------------------------------------------------------


def test_host_logic_against_a_lane_by_lane_stand_in(tmp_path):
    """The --fake run: inputs, slots, packing and comparison agree with an independent scalar reading of PTX."""
    assert capture.main(["--fake", "--out", str(tmp_path)]) == 0
    path = tmp_path / "layout_fake.npz"
    assert path.stat().st_size < 1_000_000
    inputs, out, slots, arch, _ = capture.load(path)
    assert arch == "fake" and all(c.ok for c in silicon.compare(inputs, out, slots))
    with np.load(path) as z:  # the provenance of the build, as every capture file carries it
        assert json.loads(str(z["provenance"])) == provenance.fingerprint(capture.PROVENANCE_NAME)


def swap_two_registers(out, off):
    a = off["ld_a_x4"][0]
    out[:, [a, a + 1]] = out[:, [a + 1, a]]


def rotate_lanes(out, off):
    o = off["o_f32"][0]
    out[:, o] = np.roll(out[:, o], 4)


def flip_one_bit(out, off):
    out[5, off["cvt_f16x2"][0]] ^= 1


def swap_halves(out, off):
    p = off["p"][0]
    out[:, p] = (out[:, p] >> 16) | (out[:, p] << 16)


@pytest.mark.parametrize(
    "fault, slot",
    [(swap_two_registers, "ld_a_x4"), (rotate_lanes, "o_f32"), (flip_one_bit, "cvt_f16x2"), (swap_halves, "p")],
)
def test_a_faulty_dump_is_caught_and_located(fault, slot):
    off = silicon.slot_offsets()

    def corrupt(out):
        out = out.copy()
        fault(out, off)
        return out

    inputs = silicon.make_inputs()
    out = capture.FakeDevice(corrupt=corrupt).run(inputs)
    checks = {c.name: c for c in silicon.compare(inputs, out)}
    assert not checks[slot].ok and "first at lane" in checks[slot].detail
    assert all(c.ok for name, c in checks.items() if name not in (slot, "p_from_s"))


@pytest.mark.nvrtc
@pytest.mark.parametrize("arch", ["sm_90", "sm_120"])
def test_capture_kernel_compiles(arch):
    from flashsim.gpu import build

    b = build.compile_file(capture.KERNEL, arch=arch, defines=provenance.build_defines(capture.PROVENANCE_NAME))
    assert len(b.cubin) > 0
    if b.resources_known:
        e = b.entry("layout_capture")
        assert e.spill_stores == 0 and e.static_smem_bytes == silicon.TILE * len(silicon.TILES) * 2
