"""The serving cases of ``flashsim verify --serving``: the KV-cache and variable-length calls, GPU against the
emulator bit for bit, each case regenerable from its description (so captures store outputs only).

A ``ServingCase`` names the call (a KV cache, contiguous or paged, or a variable-length batch), its shapes, the
keys each row holds, its options, num_splits, the input kind (case_inputs.make_case_inputs: normal, wide, adversarial)
and the seed. ``inputs()`` builds the call's arrays: q and the keys from make_case_inputs, cache rows laid into
pages in a seeded random order (``pages="shuffled"``), or with row 1's first page entry pointing at row 0's first
page (``pages="shared"``: one page read by two sequences), varlen rows packed from per-sequence lengths.
``serving_cases`` is the built-in set: decode (Nq = 1, GQA packed, every split choice), speculative decoding
(Nq > 1, causal), pages of 16 and 256 in random order, a shared page, rows of 0 and 1 keys, splits that hold no key
for a row (short rows in a long cache, a window left of most splits, causal where a split is all masked), MQA and
group 1, head dims 64 / 128 / 256, bf16, soft-capping, f16 and f16x2 P@V; varlen with empty and long sequences,
causal, windows and GQA; decodes whose warps split the keys inside the block (warp_split).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import asdict, dataclass, field

import numpy as np

from .. import provenance, tuning
from ..config import KernelConfig
from ..diff import compare
from ..emulator import engine_serving
from ..overflow import first_flagged
from ..serving.problem import (
    check_indices,
    index_of,
    prepare_kvcache,
    prepare_varlen,
    serving_options,
    warp_split_form,
)
from .case_inputs import make_case_inputs

SERVING_KINDS = ("normal", "wide", "adversarial")


@dataclass(frozen=True)
class ServingCase:
    """One serving verify case (module docstring). kvcache: ``nq`` query rows, a cache of ``n_cache`` keys per row
    (``page_size`` > 0: pages, ``pages`` "shuffled" or "shared"), ``seqlens`` the keys each row holds (None: all);
    varlen: per-sequence ``q_lens`` and ``k_lens``. ``options``: causal, window_size, softcap, pv_accum, dtype."""

    call: str  # "kvcache" | "varlen"
    heads: int
    heads_kv: int
    head_dim: int
    kind: str = "normal"
    seed: int = 0
    nq: int = 1
    n_cache: int = 0
    seqlens: tuple | None = None
    page_size: int = 0
    pages: str = "shuffled"
    num_splits: int | None = None
    q_lens: tuple = ()
    k_lens: tuple = ()
    options: dict = field(default_factory=dict)
    seqlens_given: bool = True  # kvcache: pass cache_seqlens (else every row holds its whole cache)
    warp_split: int = 1  # kvcache, > 1: that many warps split each row's keys inside the block (problem_of)
    stages: int = 0  # with warp_split: its rings' stages (0: the one-warp tiling's; the paged rule deepens them)
    sha: str | None = None

    @property
    def batch(self) -> int:
        return len(self.seqlens) if self.call == "kvcache" else len(self.q_lens)

    def name(self) -> str:
        o = self.options
        extra = [
            f"kv{self.heads_kv}" if self.heads_kv != self.heads else "",
            o.get("dtype", "f16") if o.get("dtype", "f16") != "f16" else "",
            "causal" if o.get("causal") else "",
            f"win{list(o['window_size'])}" if o.get("window_size") else "",
            f"cap{o['softcap']:g}" if o.get("softcap") else "",
            o.get("pv_accum", "f32"),
        ]
        if self.call == "kvcache":
            cache = f"pages{self.page_size}{'' if self.pages == 'shuffled' else '-shared'}" if self.page_size else ""
            lens = f"len{list(self.seqlens)}" if self.seqlens_given else "full"
            head = f"kvcache B{self.batch} Nq{self.nq} N{self.n_cache} {cache} {lens}"
            head += f" splits={self.num_splits if self.num_splits is not None else 'auto'}"
            head += f" warp_split={self.warp_split}" if self.warp_split > 1 else ""
            head += f" stages={self.stages}" if self.stages else ""
        else:
            head = f"varlen q{list(self.q_lens)} k{list(self.k_lens)}"
        return " ".join([head, f"H{self.heads} d{self.head_dim}", *[e for e in extra if e], self.kind, f"s{self.seed}"])

    def arrays(self) -> dict:
        """The call's arrays (numpy): q, k / k_cache, v / v_cache and the index arrays, regenerated from the case."""
        dtype = self.options.get("dtype", "f16")
        h, hk, d = self.heads, self.heads_kv, self.head_dim
        if self.call == "varlen":
            cq = np.concatenate([[0], np.cumsum(self.q_lens)]).astype(np.int32)
            ck = np.concatenate([[0], np.cumsum(self.k_lens)]).astype(np.int32)
            q, k, v = make_case_inputs(
                self.kind,
                1,
                h,
                max(int(cq[-1]), 1),
                max(int(ck[-1]), 1),
                d,
                self.seed,
                heads_kv=hk,
                dtype=dtype,
                layout="bnhd",
            )
            return dict(
                q=q[0, : cq[-1]],
                k=k[0, : ck[-1]],
                v=v[0, : ck[-1]],
                cu_seqlens_q=cq,
                cu_seqlens_k=ck,
                max_seqlen_q=int(max(self.q_lens, default=0)),
                max_seqlen_k=int(max(self.k_lens, default=0)),
            )
        b = self.batch
        q, k, v = make_case_inputs(
            self.kind, b, h, self.nq, self.n_cache, d, self.seed, heads_kv=hk, dtype=dtype, layout="bnhd"
        )
        out = dict(q=q, k_cache=k, v_cache=v)
        if self.seqlens_given:
            out["cache_seqlens"] = np.asarray(self.seqlens, np.int32)
        if self.page_size:
            ps = self.page_size
            per_row = -(-self.n_cache // ps)
            rng = np.random.default_rng(self.seed + 1000)
            num_pages = b * per_row + 3  # three pages no row uses
            table = rng.permutation(num_pages)[: b * per_row].reshape(b, per_row).astype(np.int32)
            if self.pages == "shared" and b > 1:
                table[1, 0] = table[0, 0]  # row 1 reads row 0's first page (a shared prefix)
            pad = per_row * ps - self.n_cache
            kp, vp = (np.pad(x, ((0, 0), (0, pad), (0, 0), (0, 0))) for x in (k, v))
            k_pages = rng.standard_normal((num_pages, ps, hk, d)).astype(k.dtype)  # unused pages: noise
            v_pages = rng.standard_normal((num_pages, ps, hk, d)).astype(k.dtype)
            for row in range(b):
                for j in range(per_row):
                    if self.pages == "shared" and row == 1 and j == 0:
                        continue  # its entry is row 0's page
                    k_pages[table[row, j]] = kp[row, j * ps : (j + 1) * ps]
                    v_pages[table[row, j]] = vp[row, j * ps : (j + 1) * ps]
            out.update(k_cache=k_pages, v_cache=v_pages, block_table=table)
        return out

    def call_kwargs(self) -> dict:
        """The options of the call (flashsim.attention_with_kvcache / attention_varlen)."""
        o = {key: value for key, value in self.options.items() if key != "dtype"}
        if "window_size" in o:
            o["window_size"] = tuple(o["window_size"])
        if self.call == "kvcache":
            o["num_splits"] = self.num_splits
        return o


def inputs_sha256(arrays: dict) -> str:
    """Fingerprint of a case's arrays (in the call's order), so saved outputs are compared with the same inputs."""
    h = hashlib.sha256()
    for name in sorted(arrays):
        x = arrays[name]
        h.update(name.encode() + (np.ascontiguousarray(x).tobytes() if isinstance(x, np.ndarray) else str(x).encode()))
    return h.hexdigest()


def problem_of(case: ServingCase, arrays: dict, arch: str, sm_count=None):
    """(ServingProblem, SequenceIndex) of ``case`` on ``arch`` (the GPU's SMs for its split choice). A case with
    ``warp_split`` W > 1 runs the one-warp decode's tiling in its warp_split form (warp_split_form: the form the
    default decode takes where flashsim.tuning's rule applies), with num_splits S > 1 across blocks too."""
    kw = case.call_kwargs()

    def options(config=None):
        return serving_options(
            kw.get("causal"),
            kw.get("pv_accum"),
            config,
            kw.get("softmax_scale"),
            kw.get("window_size"),
            kw.get("softcap"),
            None,
            None,
        )

    if case.call == "kvcache":

        def prepare(num_splits, opts):
            return prepare_kvcache(
                arrays["q"],
                arrays["k_cache"],
                arrays["v_cache"],
                arrays.get("cache_seqlens"),
                arrays.get("block_table"),
                num_splits,
                opts=opts,
                arch=arch,
                sm_count=sm_count,
            )

        if case.warp_split > 1:  # num_splits None: the warps' parts merged in the block; S: S x W parts, combined
            one = prepare(1, options())  # the one-warp decode's tiling
            base = one.config.with_(stages=case.stages) if case.stages else one.config
            wide = warp_split_form(base, arch, case.warp_split)
            if wide is None:
                raise ValueError(f"{case.name()}: no kv tile fits {case.warp_split} rings in a block of {arch}")
            prob = prepare(kw["num_splits"], options(wide))
        else:
            prob = prepare(kw["num_splits"], options())
        index = index_of(cache_seqlens=arrays.get("cache_seqlens"), block_table=arrays.get("block_table"))
    else:
        prob = prepare_varlen(
            arrays["q"],
            arrays["k"],
            arrays["v"],
            arrays["cu_seqlens_q"],
            arrays["cu_seqlens_k"],
            arrays["max_seqlen_q"],
            arrays["max_seqlen_k"],
            opts=options(),
            arch=arch,
        )
        index = index_of(cu_seqlens_q=arrays["cu_seqlens_q"], cu_seqlens_k=arrays["cu_seqlens_k"])
    check_indices(prob, index)
    return prob, index


def _tensors(arrays: dict, call: str):
    names = ("q", "k_cache", "v_cache") if call == "kvcache" else ("q", "k", "v")
    return tuple(arrays[n] for n in names)


def emulator_outputs(case: ServingCase, arrays: dict, prob, index):
    """The emulator's (o, lse, overflow row) for a case (no overflow check: adversarial inputs keep their inf)."""
    o, lse, flag = engine_serving.run(*_tensors(arrays, case.call), prob, index, progress=False)
    return o, lse, first_flagged(flag) if prob.config.pv_mma_f16 else None


def gpu_outputs(case: ServingCase, arrays: dict, prob):
    """The kernel's raw (o, lse, overflow row) on the current GPU."""
    from ..gpu import serving as gs

    names = ("cache_seqlens", "block_table") if case.call == "kvcache" else ("cu_seqlens_q", "cu_seqlens_k")
    return gs.run_host(*_tensors(arrays, case.call), prob, {n: arrays.get(n) for n in names}, raw=True)


def case_meta(name: str, arch: str, case: ServingCase, config: KernelConfig, num_splits: int, arrays: dict) -> dict:
    """What --save-cases stores beside a serving case's outputs: the case, its configuration and the split count
    it ran with (num_splits None resolves on the GPU's SMs: a replay elsewhere uses this count), its inputs' hash
    and the build's provenance (the serving build's PTX holds flash_fwd and flash_combine: tests/test_drift.py)."""
    spec = {k: v for k, v in asdict(case).items() if k != "sha"}
    return dict(
        name=name,
        arch=arch,
        config=config.__dict__,
        serving=spec,
        splits=num_splits,
        inputs_sha256=inputs_sha256(arrays),
        provenance=provenance.fingerprint("flash_fwd", config),
    )


def case_of_meta(meta: dict) -> ServingCase:
    spec = dict(meta["serving"])
    for key in ("seqlens", "q_lens", "k_lens"):
        if spec.get(key) is not None:
            spec[key] = tuple(spec[key])
    return ServingCase(**spec, sha=meta.get("inputs_sha256"))


def is_serving_capture(path) -> bool:
    """Whether the --save-cases file ``path`` holds serving cases (their metas carry "serving")."""
    with np.load(path) as z:
        key = next((k for k in z.files if k.endswith("_meta")), None)
        return key is not None and "serving" in json.loads(str(z[key]))


def is_fused_capture(path) -> bool:
    """Whether the serving capture ``path`` ran the fused-check build (``verify --serving --fused``)."""
    with np.load(path) as z:
        key = next((k for k in z.files if k.endswith("_meta")), None)
        return key is not None and bool(json.loads(str(z[key]))["config"].get("fused", False))


def replay_cases(path) -> list[ServingCase]:
    """The ServingCase of every case saved in ``path``, in order."""
    with np.load(path) as z:
        keys = sorted((k for k in z.files if k.endswith("_meta")), key=lambda k: int(k[1:-5]))
        return [case_of_meta(json.loads(str(z[k]))) for k in keys]


def diff_case(case: ServingCase, arch: str, gpu=True, sm_count=None, fused=False):
    """Run one case both ways: (O diff, LSE diff, gpu outputs, emulator outputs, problem, arrays). ``fused``: the GPU
    runs the fused-check build (KernelConfig.fused, the problem returned with it) where the build has one
    (KernelConfig.has_fused_form); the emulator is the same either way (the check changes no output bit)."""
    arrays = case.arrays()
    prob, index = problem_of(case, arrays, arch, sm_count)
    emu = emulator_outputs(case, arrays, prob, index)
    if fused:
        from ..gpu import serving as gs

        prob = gs.fused(prob) if prob.config.has_fused_form else prob
    got = gpu_outputs(case, arrays, prob) if gpu else emu
    od = compare("O", got[0], emu[0])
    ld = compare("LSE", got[1], emu[1])
    return od, ld, got, emu, prob, arrays


def serving_cases() -> list[ServingCase]:
    """The built-in serving set (module docstring), normal / wide / adversarial inputs."""
    kv = functools.partial(ServingCase, "kvcache")
    var = functools.partial(ServingCase, "varlen")
    nwa = SERVING_KINDS
    cases = []

    def add(make, kinds=("normal", "adversarial"), **kw):
        cases.extend(make(kind=kind, **kw) for kind in kinds)

    # decode: Nq = 1, GQA 4 (packed), rows of 200, 1 and 77 keys in a 256-key cache, every split choice
    for splits in (1, None, 4):
        add(
            kv,
            nwa if splits is None else ("normal", "adversarial"),
            heads=8,
            heads_kv=2,
            head_dim=128,
            nq=1,
            n_cache=256,
            seqlens=(200, 1, 77),
            num_splits=splits,
        )
    add(
        kv,
        heads=8,
        heads_kv=2,
        head_dim=128,
        nq=1,
        n_cache=256,
        seqlens=(200, 1, 77),
        num_splits=3,
        options=dict(dtype="bf16"),
    )
    add(
        kv,
        heads=8,
        heads_kv=2,
        head_dim=128,
        nq=1,
        n_cache=192,
        seqlens=(192, 192),
        seqlens_given=False,
        num_splits=None,
    )  # no cache_seqlens: every row holds its whole cache
    # speculative decoding: Nq = 5 causal (aligned to each row's length), splits
    add(
        kv,
        nwa,
        heads=8,
        heads_kv=2,
        head_dim=128,
        nq=5,
        n_cache=300,
        seqlens=(300, 5, 130),
        num_splits=3,
        options=dict(causal=True),
    )
    add(
        kv,
        heads=4,
        heads_kv=1,
        head_dim=64,
        nq=8,
        n_cache=200,
        seqlens=(200, 64),
        num_splits=None,
        options=dict(causal=True, dtype="bf16"),
    )  # MQA: 32 packed rows, two warps
    # paged: pages of 16 and 256 in random order, a page shared by two rows, rows of 0 and 1 keys
    add(
        kv,
        nwa,
        heads=8,
        heads_kv=2,
        head_dim=128,
        nq=1,
        n_cache=300,
        seqlens=(300, 0, 1, 170),
        page_size=16,
        num_splits=4,
    )
    add(
        kv,
        heads=8,
        heads_kv=2,
        head_dim=128,
        nq=3,
        n_cache=600,
        seqlens=(600, 257),
        page_size=256,
        num_splits=None,
        options=dict(causal=True),
    )
    add(
        kv,
        heads=4,
        heads_kv=4,
        head_dim=64,
        nq=2,
        n_cache=300,
        seqlens=(300, 40, 17),
        page_size=32,
        pages="shared",
        num_splits=2,
    )  # group 1: no packing
    # splits with no visible key for a row: short rows in a long cache, a window left of most splits, causal
    add(kv, heads=8, heads_kv=2, head_dim=128, nq=1, n_cache=512, seqlens=(20, 512, 3), num_splits=8)
    add(
        kv,
        heads=8,
        heads_kv=2,
        head_dim=128,
        nq=4,
        n_cache=400,
        seqlens=(400, 150),
        num_splits=5,
        options=dict(causal=True, window_size=(40, 0)),
    )
    add(
        kv,
        heads=2,
        heads_kv=2,
        head_dim=64,
        nq=70,
        n_cache=200,
        seqlens=(200, 75),
        num_splits=3,
        options=dict(causal=True),
    )  # 70 rows: the first splits hold no key for the early rows of row 1
    # head dims, soft-capping, f16 / f16x2 P@V
    add(
        kv,
        heads=4,
        heads_kv=2,
        head_dim=64,
        nq=1,
        n_cache=500,
        seqlens=(500, 333),
        num_splits=None,
        options=dict(softcap=30.0),
    )
    add(
        kv,
        heads=4,
        heads_kv=2,
        head_dim=256,
        nq=2,
        n_cache=150,
        seqlens=(150, 99),
        num_splits=2,
        options=dict(window_size=(50, 10)),
    )
    add(
        kv,
        heads=8,
        heads_kv=2,
        head_dim=128,
        nq=1,
        n_cache=256,
        seqlens=(256, 100),
        num_splits=2,
        options=dict(pv_accum="f16"),
    )
    add(
        kv,
        heads=8,
        heads_kv=2,
        head_dim=128,
        nq=4,
        n_cache=256,
        seqlens=(256, 100),
        num_splits=None,
        page_size=64,
        options=dict(pv_accum="f16x2", causal=True),
    )
    # warp_split: a block's warps split each row's keys (the default decode where flashsim.tuning's rule applies):
    # shuffled pages of 16 with an empty row and a one-key row, d 64 speculative causal bf16, d 256 with 6 warps of
    # 16-key tiles, 8 warps with soft-capping, 2 with a window left of most of the keys; the contiguous auto cases
    # above take the rule's form too (3 and 4 warps; the paged causal f16x2 auto case, 8 row groups, takes the split
    # call on a GPU of 132 SMs: tuning.WARP_SPLIT_PAGED_MIN_FILL); the paged rule's form (8 warps of 3-stage rings,
    # each ring wrapping) on pages of 64; 3 warps in each of 2 splits. check_capture replays each case in the form it
    # ran, stages included.
    add(
        kv,
        nwa,
        heads=8,
        heads_kv=2,
        head_dim=128,
        nq=1,
        n_cache=300,
        seqlens=(300, 0, 1, 170),
        page_size=16,
        warp_split=3,
    )
    add(
        kv,
        heads=8,
        heads_kv=2,
        head_dim=64,
        nq=3,
        n_cache=500,
        seqlens=(500, 333, 7),
        warp_split=6,
        options=dict(causal=True, dtype="bf16"),
    )
    add(kv, heads=4, heads_kv=2, head_dim=256, nq=1, n_cache=400, seqlens=(400, 150), warp_split=6)
    add(
        kv,
        heads=8,
        heads_kv=2,
        head_dim=128,
        nq=1,
        n_cache=512,
        seqlens=(20, 512, 3),
        warp_split=8,
        options=dict(softcap=30.0),
    )
    add(
        kv,
        heads=8,
        heads_kv=2,
        head_dim=128,
        nq=4,
        n_cache=400,
        seqlens=(400, 150),
        warp_split=2,
        options=dict(causal=True, window_size=(40, 0)),
    )
    add(
        kv,
        heads=8,
        heads_kv=2,
        head_dim=128,
        nq=4,
        n_cache=1000,
        seqlens=(1000, 100),
        page_size=64,
        warp_split=tuning.WARP_SPLIT_PAGED_WARPS,
        stages=tuning.WARP_SPLIT_PAGED_STAGES,
        options=dict(pv_accum="f16x2", causal=True),
    )
    add(  # splits across blocks too: 2 x 3 parts, flash_combine after (its index check a launch of its own)
        kv,
        heads=8,
        heads_kv=2,
        head_dim=128,
        nq=1,
        n_cache=300,
        seqlens=(300, 0, 1, 170),
        page_size=16,
        warp_split=3,
        num_splits=2,
    )
    # varlen: empty and long sequences, causal, windows, GQA
    add(var, nwa, heads=4, heads_kv=2, head_dim=128, q_lens=(3, 0, 130, 1, 64), k_lens=(50, 7, 260, 0, 64))
    add(
        var,
        nwa,
        heads=4,
        heads_kv=2,
        head_dim=128,
        q_lens=(100, 1, 0, 257),
        k_lens=(100, 30, 5, 257),
        options=dict(causal=True),
    )
    add(
        var,
        heads=8,
        heads_kv=1,
        head_dim=64,
        q_lens=(77, 150),
        k_lens=(200, 150),
        options=dict(window_size=(30, 10), dtype="bf16"),
    )
    add(
        var,
        heads=2,
        heads_kv=2,
        head_dim=256,
        q_lens=(40, 0, 33),
        k_lens=(40, 0, 90),
        options=dict(causal=True, softcap=20.0),
    )
    return cases


def run_serving(cases, arch, save_path=None, sm_count=None, out=print, fused=False) -> tuple[bool, list]:
    """Every case GPU against the emulator; print a line each; returns (all bit-equal, results). ``save_path``:
    the captures (outputs, metas) as an npz; ``fused``: the GPU runs the fused-check build (``diff_case``)."""
    results, saved, all_ok = [], {}, True
    width = max([50] + [len(c.name()) + 1 for c in cases])
    fused_note = ", the index check inside flash_fwd (fused)" * fused
    out(f"flashsim verify --serving on {arch}: {len(cases)} cases{fused_note}")
    out(f"{'case':{width}} {'O equal':>9} {'O ulp':>6} {'LSE equal':>10} {'LSE ulp':>8}  first mismatch")
    for case in cases:
        arrays = case.arrays()
        if case.sha is not None and inputs_sha256(arrays) != case.sha:
            raise SystemExit(f"--replay: the inputs of {case.name()} no longer regenerate as recorded")
        od, ld, got, emu, prob, _ = diff_case(case, arch, gpu=True, sm_count=sm_count, fused=fused)
        cfg = prob.config
        where = ""
        for diff in (od, ld):
            if diff.first_index is not None and not where:
                where = f"{diff.name}{list(diff.first_index)} gpu {diff.first_values[0]} emu {diff.first_values[1]}"
        if got[2] != emu[2]:
            where = f"overflow flag: gpu row {got[2]}, emulator row {emu[2]}" + (f"; {where}" if where else "")
        ok = od.ok and ld.ok and got[2] == emu[2]
        all_ok &= ok
        name = case.name()
        out(
            f"{name:{width}} {od.bit_equal_fraction:9.4%} {od.max_ulp:6d} {ld.bit_equal_fraction:10.4%} "
            f"{ld.max_ulp:8d}  {where or '-'}"
        )
        results.append(
            dict(
                case=name,
                config=cfg.__dict__,
                o_equal=od.bit_equal_fraction,
                o_max_ulp=od.max_ulp,
                lse_equal=ld.bit_equal_fraction,
                lse_max_ulp=ld.max_ulp,
                first_mismatch=where,
                overflow_row=got[2],
            )
        )
        if save_path:
            i = len(saved) // 3
            o_saved = got[0].view(np.uint16) if got[0].dtype.name == "bfloat16" else got[0]
            saved.update(
                {
                    f"c{i}_o": o_saved,
                    f"c{i}_lse": got[1],
                    f"c{i}_meta": json.dumps(
                        dict(case_meta(name, arch, case, cfg, prob.num_splits, arrays), overflow_row=got[2])
                    ),
                }
            )
    out(f"verdict: {'every bit agrees' if all_ok else 'MISMATCH'} ({len(results)} serving cases)")
    if save_path:
        np.savez_compressed(save_path, **saved)
        out(f"saved {len(saved) // 3} cases to {save_path}")
    return all_ok, results


def check_capture(path, case_key: str, arch="sm_90") -> dict:
    """Replay one saved serving case of ``path`` on the emulator and compare every bit (tests/test_emulator_silicon:
    the H200's serving captures)."""
    with np.load(path) as z:
        meta = json.loads(str(z[f"{case_key}_meta"]))
        o_gpu, lse_gpu = z[f"{case_key}_o"], z[f"{case_key}_lse"]
    case = case_of_meta(meta)
    ran = KernelConfig(**meta["config"])  # the fused build emulates as the separate launches
    if case.call == "kvcache" and ran.warp_split > 1:  # the warp_split form it ran (the rule's, for the GPU's SMs)
        splits = meta["splits"] if ran.split else None
        case = dataclasses.replace(case, num_splits=splits, warp_split=ran.warp_split, stages=ran.stages)
    elif case.call == "kvcache":  # the split count the GPU chose (for its own SMs)
        case = dataclasses.replace(case, num_splits=meta["splits"])
    arrays = case.arrays()
    assert inputs_sha256(arrays) == meta["inputs_sha256"], "regenerated inputs differ from those the GPU saw"
    prob, index = problem_of(case, arrays, meta["arch"])
    assert prob.config.with_(fused=ran.fused) == ran, (prob.config, meta["config"])
    o, lse, flag = emulator_outputs(case, arrays, prob, index)
    if "overflow_row" in meta:
        assert flag == meta["overflow_row"], (meta["name"], flag, meta["overflow_row"])
    o_bad = np.count_nonzero(o.view(np.uint16) != o_gpu.view(np.uint16))
    lse_bad = np.count_nonzero(lse.view(np.uint32) != lse_gpu.view(np.uint32))
    assert (o_bad, lse_bad) == (0, 0), f"{meta['name']}: {o_bad} of {o.size} O and {lse_bad} LSE elements differ"
    return meta
