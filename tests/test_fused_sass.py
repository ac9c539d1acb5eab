"""tools/fused_sass.py's parsing, on small hand-made inputs (the tool itself needs pip's triton, which CI lacks):
an operation's location goes to its innermost emulator frame, coded into a line number; the SASS's loops are found
from their backward branches and the inner ones weighted by their trip counts."""

from __future__ import annotations

import importlib.util
import os

import pytest

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools", "fused_sass.py")
spec = importlib.util.spec_from_file_location("fused_sass", _PATH)
fused_sass = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fused_sass)

MODULE = """#loc = loc(unknown)
#loc1 = loc("/x/flashsim/numerics/xp.py":57:11 to :45)
#loc2 = loc("/x/flashsim/numerics/rounding.py":221:8 to :29)
#loc3 = loc("/x/flashsim/emulator/engine_pallas.py":120:33 to 121:71)
#loc4 = loc(callsite(#loc1 at #loc2))
#loc5 = loc(callsite(#loc4 at #loc3))
#loc6 = loc("bitcast_convert_type:"(#loc5))
#loc7 = loc("/x/site-packages/jax/_src/core.py":10:1)
module @k {
  %0 = arith.addi %a, %b : i32 loc(#loc6)
  %1 = arith.addi %a, %b : i32 loc(#loc3)
  %2 = arith.addi %a, %b : i32 loc(#loc7)
} loc(#loc)
"""


def test_an_operation_is_charged_to_its_innermost_emulator_frame():
    out = fused_sass.relocate(MODULE)
    code = {name: (i + 1) * 10000 for i, name in enumerate(fused_sass.FILES)}
    lines = [l for l in out.splitlines() if "arith.addi" in l]
    # xp.py's shim counts for its caller (rounding.py:221); a frame of the engine alone is the engine's; none: 0
    assert lines[0].endswith(f'loc("k.py":{code["rounding.py"] + 221}:0)')
    assert lines[1].endswith(f'loc("k.py":{code["engine_pallas.py"] + 120}:0)')
    assert lines[2].endswith('loc("k.py":0:0)')
    assert out.splitlines()[0] == "#loc = loc(unknown)"  # the location table itself is left alone


def _sass(body: list[str]) -> str:
    out = []
    for i, item in enumerate(body):
        if item.startswith(".L"):
            out.append(f"{item}:")
        elif item.startswith("line "):
            out.append(f'\t//## File "<unknown>", line {item.split()[1]}')
        else:
            out.append(f"        /*{i * 16:04x}*/                   {item} ;")
    return "\n".join(out)


def test_loops_are_weighted_by_their_trip_counts():
    code = 4 * 10000  # tensorcore.py
    sass = _sass(
        [
            "line 0",
            "MOV R1, R2",
            ".L_x_0",
            f"line {code + 7}",
            "FMUL R1, R2, R3",
            ".L_x_1",
            f"line {code + 9}",
            "IADD3 R1, R2, R3, RZ",
            "@P0 BRA `(.L_x_1)",
            ".L_x_2",
            "FFMA R1, R2, R3, R4",
            "FFMA R1, R2, R3, R4",
            "@P1 BRA `(.L_x_2)",
            "@P2 BRA `(.L_x_0)",
            "EXIT",
        ]
    )
    rows = fused_sass.sass_rows(sass)
    res = fused_sass.analyse(rows, trips=[8, 4])
    # outer loop: FMUL, IADD3, BRA, FFMA, FFMA, BRA, BRA; the first inner loop (IADD3, BRA) x 8, the second x 4
    assert res["loops"] == [2, 3]
    assert res["total"] == 1 + 2 * 8 + 3 * 4 + 1
    assert res["per_op"]["IADD3"] == 8 and res["per_op"]["FFMA"] == 8 and res["per_op"]["FMUL"] == 1
    assert res["per_line"][("tensorcore.py", 9)] == 2 * 8 + 3 * 4 + 1
    with pytest.raises(RuntimeError, match="no loop"):
        fused_sass.analyse(fused_sass.sass_rows(_sass(["MOV R1, R2", "EXIT"])), trips=[])
