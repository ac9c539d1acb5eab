"""The emulator against outputs of the real kernel captured on the H200, bit for bit, with no GPU.

tests/data/attn_sm90_*.npz were written by `flashsim verify --save-cases FILE` on the H200 and are re-captured case
for case by `flashsim verify --replay FILE --save-cases FILE` (tools/device_round.sh captures):
  attn_sm90_defaults  the sm_90 defaults (4 warps x 2 m16 tiles), 8 shapes x f32/f16 x normal, wide, adversarial
                      (first made with `verify --kinds normal,wide,adversarial`);
  attn_sm90_w8m1      the same cases on the 8-warp x 1-tile shape, kv_tile 64, 3 stages (first made when that shape
                      was the sm_90 default; today `--warps 8 --m-tiles 1 --kv-tile 64 --stages 3`);
  attn_sm90_specials  the 'specials' kind, seeds 0 and 1 (first made with `verify --kinds specials --seeds 2`; its
                      f16 d=128 cases ran with kv_tile 32 and 3 stages, the default of that day);
  attn_sm90_f16x2     pv_accum "f16x2" on the default shapes, every kind (`verify --pv-accum f16x2 --kinds ...`);
  attn_sm90_variants  the attention variants of `verify --variants` (head dims, bf16, GQA, windows, softcap, bnhd);
  attn_sm90_quant     INT8 attention, `verify --quant` (the quantization pass and the s8 Q K^T, every head dim);
  attn_sm90_serving   the serving cases, `verify --serving` (KV cache, paged, split-KV and its combine, varlen:
                      flashsim.commands.verify_serving; replayed by verify_serving.check_capture).
Per case: the configuration, the kernel's O and LSE, the (kind, shape, seed) that regenerate its inputs (checked
against a sha256 of the inputs the GPU saw) and, since flashsim.provenance, the fingerprint of the kernel build
(tests/test_drift.py checks that it is the current one). flashsim.attention must reproduce every bit.
"""

from __future__ import annotations

import argparse
import json
import pathlib

import numpy as np
import pytest

from flashsim import KernelConfig
from flashsim.commands import verify_serving
from flashsim.commands.verify import case_of_meta, emulator_outputs, inputs_sha256

DATA = pathlib.Path(__file__).parent / "data"


def _case_keys(path):
    with np.load(path) as z:
        keys = {key.split("_")[0] for key in z.files}
    return sorted(keys, key=lambda c: int(c[1:]))


def _cases(serving: bool, fused: bool = False):
    return [
        (path.name, c)
        for path in sorted(DATA.glob("attn_sm90_*.npz"))
        if verify_serving.is_serving_capture(path) == serving
        and (serving and verify_serving.is_fused_capture(path)) == fused
        for c in _case_keys(path)
    ]


CASES = _cases(serving=False)
SERVING_CASES = _cases(serving=True)  # attn_sm90_serving: `flashsim verify --serving --save-cases`
FUSED_CASES = _cases(serving=True, fused=True)  # attn_sm90_serving_fused: `verify --serving --fused --save-cases`


def check_case(path, case, backend="numpy"):
    """Regenerate the inputs of ``case`` in the capture ``path``, run the emulator (``backend``: the numpy engine,
    or "ptx": the kernel's own PTX in flashsim.ptx), compare every bit."""
    with np.load(path) as z:
        meta = json.loads(str(z[f"{case}_meta"]))
        o_gpu, lse_gpu = z[f"{case}_o"], z[f"{case}_lse"]
    c = case_of_meta(meta)
    q, k, v = c.inputs()
    assert inputs_sha256(q, k, v) == meta["inputs_sha256"], "regenerated inputs differ from those the GPU saw"
    o, lse, flagged = emulator_outputs(
        q, k, v, c.config, meta["arch"], backend, window_size=c.window, softcap=c.softcap, layout=c.layout
    )  # raw outputs, no overflow check
    if "overflow_row" in meta:  # the kernel's overflow flag
        assert flagged == meta["overflow_row"], (meta["name"], flagged, meta["overflow_row"])
    o_bad = np.count_nonzero(o.view(np.uint16) != o_gpu.view(np.uint16))
    lse_bad = np.count_nonzero(lse.view(np.uint32) != lse_gpu.view(np.uint32))
    assert (o_bad, lse_bad) == (0, 0), (
        f"{meta['name']}: {o_bad} of {o.size} O and {lse_bad} of {lse.size} LSE elements differ"
    )
    return meta


@pytest.mark.skipif(not CASES, reason="no H200 attention captures in tests/data/attn_sm90_*.npz yet")
@pytest.mark.parametrize("file, case", CASES, ids=[f"{f[10:-4]}-{c}" for f, c in CASES])
def test_emulator_reproduces_the_h200_bits(file, case):
    check_case(DATA / file, case)


def _ptx_sample(per_file: int = 5) -> list:
    """The cases flashsim.ptx reruns: per capture file the cheapest case of each distinct configuration and input
    kind (configuration: accumulator, quant, head dim, element type, window, softcap, layout), at most
    ``per_file``, so that every capture set and its features are sampled at CI cost."""
    out = []
    for path in sorted(DATA.glob("attn_sm90_*.npz")):
        if verify_serving.is_serving_capture(path):
            continue
        with np.load(path) as z:
            metas = {c: json.loads(str(z[f"{c}_meta"])) for c in _case_keys(path)}

        def cost(m):
            b, h, _, nq, nk, d = m["shape"]
            return b * h * -(-nq // 128) * nk * d

        seen, picked = set(), []
        for c, m in sorted(metas.items(), key=lambda cm: (cost(cm[1]), int(cm[0][1:]))):
            cfg = m["config"]
            key = (
                cfg.get("pv_accum"),
                cfg.get("quant"),
                cfg.get("head_dim"),
                cfg.get("dtype"),
                str(m.get("window")),
                m.get("softcap"),
                m.get("layout"),
                m.get("kind"),
            )
            if key not in seen and len(picked) < per_file:
                seen.add(key)
                picked.append((path.name, c))
        out += picked
    return out


PTX_CASES = _ptx_sample() if CASES else []


@pytest.mark.nvrtc  # the kernel's PTX comes from NVRTC
@pytest.mark.parametrize("file, case", PTX_CASES, ids=[f"{f[10:-4]}-{c}" for f, c in PTX_CASES])
def test_ptx_simulator_reproduces_the_h200_bits(file, case):
    """kernel/flash_fwd.cu (and quantize.cu) as PTX in flashsim.ptx: the stored GPU bits, every one."""
    check_case(DATA / file, case, backend="ptx")


@pytest.mark.skipif(not SERVING_CASES, reason="no H200 serving captures in tests/data/attn_sm90_serving.npz yet")
@pytest.mark.parametrize("file, case", SERVING_CASES, ids=[f"{f[10:-4]}-{c}" for f, c in SERVING_CASES])
def test_emulator_reproduces_the_h200_serving_bits(file, case):
    verify_serving.check_capture(DATA / file, case)


@pytest.mark.skipif(
    not FUSED_CASES, reason="no fused-check serving captures in tests/data/attn_sm90_serving_fused.npz yet"
)
def test_the_fused_check_build_gave_the_separate_launches_bits_on_silicon():
    """Each case of the fused capture (the index check inside flash_fwd) against the same case of
    the separate launches' capture, whose every bit the emulator reproduces (above): the same inputs, the same O and
    LSE bits, the same overflow row; a build without a fused form (KernelConfig.has_fused_form) ran with its
    separate check there. (Re-emulating the fused file would only repeat that test.)"""
    files = sorted({f for f, _ in FUSED_CASES})
    plain = {}
    for file in sorted({f for f, _ in SERVING_CASES}):
        with np.load(DATA / file) as z:
            for c in _case_keys(DATA / file):
                meta = json.loads(str(z[f"{c}_meta"]))
                plain[(meta["name"], meta["inputs_sha256"])] = (z[f"{c}_o"], z[f"{c}_lse"], meta.get("overflow_row"))
    compared = 0
    for file in files:
        with np.load(DATA / file) as z:
            for c in _case_keys(DATA / file):
                meta = json.loads(str(z[f"{c}_meta"]))
                ran = KernelConfig(**meta["config"])  # fused wherever the build has a fused form (the rest: its check)
                assert ran.fused == ran.has_fused_form, (file, c)
                o, lse, row = plain[(meta["name"], meta["inputs_sha256"])]
                assert np.array_equal(z[f"{c}_o"].view(np.uint16), o.view(np.uint16)), meta["name"]
                assert np.array_equal(z[f"{c}_lse"].view(np.uint32), lse.view(np.uint32)), meta["name"]
                assert meta.get("overflow_row") == row, meta["name"]
                compared += 1
    assert compared == len(FUSED_CASES)


def test_replay_recaptures_the_same_cases_with_provenance(tmp_path, monkeypatch):
    """`flashsim verify --replay F --save-cases G` on a mocked GPU (the emulator plays the kernel): G holds the cases
    of F (same configurations, shapes, kinds, seeds and inputs), each with the current build's provenance, and the
    reader above accepts it."""
    from flashsim import provenance
    from flashsim.commands import verify
    from flashsim.gpu import runtime as rt

    src = DATA / "attn_sm90_specials.npz"
    if not src.is_file():
        pytest.skip("no tests/data/attn_sm90_specials.npz")
    monkeypatch.setattr(rt, "require_gpu", lambda: None)
    monkeypatch.setattr(rt, "current_arch", lambda: "sm_90")
    monkeypatch.setattr(
        verify, "gpu_outputs", lambda q, k, v, config, **kw: emulator_outputs(q, k, v, config, "sm_90", **kw)
    )
    out = tmp_path / "attn_sm90_specials.npz"
    parser = argparse.ArgumentParser()
    verify.add_arguments(parser)
    assert verify.run(parser.parse_args(["--replay", str(src), "--save-cases", str(out)])) == 0
    old_keys, new_keys = _case_keys(src), _case_keys(out)
    assert new_keys == old_keys
    with np.load(src) as a, np.load(out) as b:
        for case in new_keys:
            old, new = json.loads(str(a[f"{case}_meta"])), json.loads(str(b[f"{case}_meta"]))
            record = new.pop("provenance")
            old.pop("provenance", None)
            new.pop("overflow_row"), old.pop("overflow_row", None)  # new in this format; checked by check_case
            for key in ("window", "softcap", "layout"):  # new with the variants (defaults before)
                if key not in old:
                    new.pop(key)
            old["config"] = KernelConfig(**old["config"]).__dict__  # fields added since keep their defaults
            assert new == old
            assert record == provenance.fingerprint("flash_fwd", KernelConfig(**new["config"]))
            assert np.array_equal(a[f"{case}_o"].view(np.uint16), b[f"{case}_o"].view(np.uint16))
    for case in new_keys[:3]:
        check_case(out, case)
