"""tools/stall_profile.py's reading of Nsight Compute's source page: each SASS instruction once in a total or a region,
under every line it belongs to in the per-line list (ncu repeats an inlined instruction under each of its lines)."""

import csv

import pytest
from tool_modules import load_tool  # tests/tool_modules.py


@pytest.fixture(scope="module")
def stall_profile():
    return load_tool("stall_profile")


HEADER = [
    "Line No",
    "Source",
    "Address",
    "Source",
    "Warp Stall Sampling (All Samples)",
    "Warp Stall Sampling (Not-issued Samples)",
    "Instructions Executed",
    "stall_wait",
    "stall_wait (Not Issued)",
    "stall_math",
]


def write_page(path, kernels):
    """kernels: [[(line, [(address, sass, samples, executed, wait, math), ...]), ...], ...] as ncu writes them."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        for lines in kernels:
            w.writerow(["File Path", "/x/flashsim.cu"])
            w.writerow(["Function Name", "flash_fwd"])
            w.writerow(HEADER)
            for line, sass in lines:
                w.writerow([str(line), "<Unable to open source file>", "-", "-", "0", "0", "0", "0", "0", "0"])
                for addr, text, samples, executed, wait, math in sass:
                    w.writerow(["", "", addr, text, str(samples), "0", str(executed), str(wait), "0", str(math)])
                w.writerow(["", "", "...", "...", "-", "-", "-", "-", "-", "-"])


def test_an_inlined_instruction_counts_once_in_totals_and_regions(tmp_path, stall_profile):
    # 0x10 is listed under the call site (line 20) and the callee (line 5): one instruction
    page = tmp_path / "page.csv"
    write_page(
        page,
        [
            [
                (5, [("0x10", "MUFU.EX2 R1, R1", 30, 100, 20, 10)]),
                (20, [("0x10", "MUFU.EX2 R1, R1", 30, 100, 20, 10), ("0x20", "FFMA R2, R1, R3, R4", 10, 300, 4, 6)]),
            ],
            [(7, [("0x30", "HMMA.16816.F32 R0, R4, R8, R0", 5, 50, 5, 0)])],
        ],
    )
    kernels = stall_profile.read_source_page(str(page))
    assert len(kernels) == 2
    ins = kernels[0]["instructions"]
    assert sorted(ins) == ["0x10", "0x20"]
    assert ins["0x10"]["lines"] == {5, 20} and ins["0x20"]["lines"] == {20}
    assert sum(i["executed"] for i in ins.values()) == 400
    assert ins["0x20"]["reasons"] == {"stall_wait": 4.0, "stall_math": 6.0}
    assert list(kernels[1]["instructions"]) == ["0x30"]


def test_summary_shares(tmp_path, stall_profile, capsys):
    page = tmp_path / "page.csv"
    write_page(
        page,
        [
            [
                (5, [("0x10", "MUFU.EX2 R1, R1", 30, 100, 20, 10)]),
                (20, [("0x10", "MUFU.EX2 R1, R1", 30, 100, 20, 10), ("0x20", "FFMA R2, R1, R3, R4", 10, 300, 4, 6)]),
            ]
        ],
    )
    src = tmp_path / "k.cu"
    src.write_text("\n".join(f"line {i}" for i in range(1, 30)))
    stall_profile.summary(
        str(page),
        top=5,
        kernel_source=str(src),
        regions={"callee": stall_profile._parse_ranges("1-5"), "both": {5, 20}},
    )
    out = capsys.readouterr().out
    assert "40 stall samples, 400 warp instructions executed" in out
    assert "region callee:  75.0% of the samples,  25.0% of the instructions executed" in out
    assert "region both: 100.0% of the samples, 100.0% of the instructions executed" in out  # not 175%
    assert " 60.0%  stall_wait" in out and " 40.0%  stall_math" in out
    assert "100.0%  100.0%    20  line 20" in out and " 75.0%   25.0%     5  line 5" in out


def test_parse_ranges(stall_profile):
    assert stall_profile._parse_ranges("104,311-313,7") == {7, 104, 311, 312, 313}
