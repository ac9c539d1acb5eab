"""The special-function unit bit for bit: ``ex2.approx.ftz.f32`` and ``rcp.approx.ftz.f32``.

Model (ANCHORS section 3, pinned down on the GPU by ``python -m flashsim.gpu.capture.sfu``):

- ex2: flush a subnormal x to 0, clamp to [-255, 255], turn x into a fixed-point integer
  n = R(x * 2^23) (R, the rounding, is measured: toward zero on the H200 per ANCHORS); with
  k = n >> 23 and f = n mod 2^23 the result is 2^k * g[f], g the unit's value on [1, 2) read off a
  table of 2^23 captured results ("twos" mode). If the negative side turns out not to mirror the
  positive one, a second table over x = -f * 2^-23 is used instead ("signmag" mode). A biased result
  exponent <= 0 flushes (ftz), >= 255 overflows; NaN and +-inf results are measured constants.
- rcp: the mantissa of 1/x depends on the mantissa of x only: a table of 2^23 results over [1, 2),
  the exponent shifted by 127 - e; zero, inf, NaN and underflowed results are measured constants.

Tables ship as package data (``flashsim/data/sfu/sfu_tables_sm90.npz``) or come from the user cache
(``flashsim calibrate``), see flashsim.calibration. Each table is stored as its signed difference
from the correctly rounded function (a few distinct small integers), lzma- or zlib-compressed, with
a sha256 of the decoded bits that is checked on load. Without any table the functions fall back to
the correctly rounded result (with the same ftz/special rules) and warn once: not bit-exact.
"""
from __future__ import annotations

import hashlib
import json
import zlib
from dataclasses import dataclass, field
from decimal import Decimal, localcontext
from functools import lru_cache

import numpy as np

from .. import calibration
from ..arch import get_arch

TABLE_BITS = 23
TABLE_SIZE = 1 << TABLE_BITS
MASK = TABLE_SIZE - 1
FORMAT_VERSION = 1
CANONICAL_NAN = 0x7FFFFFFF
POS_INF = 0x7F800000
NEG_INF = 0xFF800000
QUIET_BIT = 0x00400000
NEG_MODES = ("twos", "signmag")
ROUNDINGS = ("rz", "rd", "ru", "rn")
NAN_MODES = ("const", "quiet")
_ROUND = {"rz": np.trunc, "rd": np.floor, "ru": np.ceil, "rn": np.rint}

__all__ = ["ex2", "rcp", "Ex2Model", "RcpModel", "SfuTables", "load_tables", "reload",
           "exp2_correctly_rounded", "rcp_correctly_rounded", "ex2_table_inputs", "rcp_table_inputs", "reference_table",
           "encode_table", "decode_table", "write_tables", "read_tables"]


# -- input checking --------------------------------------------------------------------------------

def _as_f32(x, name: str = "x") -> np.ndarray:
    """x as a float32 ndarray (0-d for a numpy scalar); ValueError for anything else."""
    if isinstance(x, np.generic) and x.dtype == np.float32:
        return np.asarray(x)
    if not isinstance(x, np.ndarray):
        raise ValueError(f"{name} must be a float32 numpy array, got {type(x).__name__}")
    if x.dtype != np.float32:
        raise ValueError(f"{name} must have dtype float32 (the SFU works on f32), got {x.dtype}")
    return x


def _bits_of(x: np.ndarray) -> np.ndarray:
    """The uint32 bit patterns of float32 ``x``, same shape (0-d stays 0-d)."""
    return np.ascontiguousarray(x).reshape(x.shape).view(np.uint32)


def _wrap(bits: np.ndarray, like) -> np.ndarray | np.float32:
    out = bits.astype(np.uint32, copy=False).view(np.float32)
    return out[()] if isinstance(like, np.generic) else out


# -- correctly rounded references (deterministic on every platform) --------------------------------

def _round_f64_to_f32(v: np.ndarray, exact_value) -> np.ndarray:
    """Correctly rounded f32 bits of exact values approximated by finite positive f64 ``v``.

    A libm result can be a few f64 ulps off, which matters only where v lies near an f32 rounding
    boundary (its 29 low mantissa bits near 2^28); there ``exact_value(i) -> Decimal`` settles the
    rounding. Only normal f32 results are meant (callers flush or clamp the rest).
    """
    with np.errstate(over="ignore", under="ignore"):
        r = v.astype(np.float32).view(np.uint32)          # round to nearest even
    low = (v.view(np.uint64) & np.uint64((1 << 29) - 1)).astype(np.int64) - (1 << 28)
    for i in np.flatnonzero(np.abs(low) < (1 << 9)):
        down = int(r[i]) - (1 if float(r.view(np.float32)[i]) > v[i] else 0)
        lo, hi = np.array([down, down + 1], dtype=np.uint32).view(np.float32).astype(np.float64)
        r[i] = down + (exact_value(int(i)) > Decimal((lo + hi) / 2))
    return r


def _exp2_decimal(y: float) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 60
        return (Decimal(y) * Decimal(2).ln()).exp()


def exp2_correctly_rounded(x: np.ndarray) -> np.ndarray:
    """Bits (uint32) of 2^x correctly rounded to f32, x float32 or float64 (exactly representable).

    Results outside the normal f32 range are not special-cased here (see ``_fallback_ex2``).
    """
    x64 = np.asarray(x, dtype=np.float64).ravel()
    with np.errstate(over="ignore", under="ignore"):
        v = np.exp2(np.clip(x64, -1000.0, 1000.0))
    ok = np.isfinite(v) & (v > 0)
    safe = np.where(ok, v, 1.0)
    bits = _round_f64_to_f32(safe, lambda i: _exp2_decimal(float(x64[i])))
    return bits.reshape(np.shape(x))


def rcp_correctly_rounded(x: np.ndarray) -> np.ndarray:
    """Bits (uint32) of 1/x correctly rounded to f32 for float32 x.

    One f64 division suffices: for a 24-bit significand the exact quotient is never within 2^-53
    (relative) of an f32 rounding boundary unless it is exact, so rounding twice cannot go wrong.
    """
    x64 = np.asarray(x, dtype=np.float32).astype(np.float64)
    with np.errstate(divide="ignore", over="ignore", under="ignore", invalid="ignore"):
        return (1.0 / x64).astype(np.float32).view(np.uint32)


def ex2_table_inputs(negative: bool = False) -> np.ndarray:
    """The 2^23 inputs whose results form an ex2 table: +-f * 2^-23 for f = 0 .. 2^23 - 1 (float32)."""
    f = np.arange(TABLE_SIZE, dtype=np.float32) * np.float32(2.0 ** -TABLE_BITS)
    return -f if negative else f


def rcp_table_inputs() -> np.ndarray:
    """The 2^23 inputs of the rcp table: every float32 in [1, 2)."""
    return (np.arange(TABLE_SIZE, dtype=np.uint32) | np.uint32(0x3F800000)).view(np.float32)


_REFERENCES = {
    "ex2_pos": lambda: exp2_correctly_rounded(ex2_table_inputs(False)),
    "ex2_neg": lambda: exp2_correctly_rounded(ex2_table_inputs(True)),
    "rcp": lambda: rcp_correctly_rounded(rcp_table_inputs()),
}


@lru_cache(maxsize=None)
def reference_table(name: str) -> np.ndarray:
    """The correctly rounded table ``name`` ("ex2_pos", "ex2_neg", "rcp") that stored tables are relative to
    (read-only, cached)."""
    if name not in _REFERENCES:
        raise ValueError(f"name must be one of {sorted(_REFERENCES)}, got {name!r}")
    bits = _REFERENCES[name]()
    bits.flags.writeable = False
    return bits


# -- table codec -----------------------------------------------------------------------------------

def _sha256(bits: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(bits, dtype="<u4").tobytes()).hexdigest()


def _compress(raw: bytes, codec: str = "best") -> tuple[bytes, str]:
    """Compress ``raw`` with zlib, lzma or whichever of the two is smaller ("best": slow, for captures)."""
    if codec not in ("zlib", "lzma", "best"):
        raise ValueError(f"codec must be 'zlib', 'lzma' or 'best', got {codec!r}")
    out = {}
    if codec in ("zlib", "best"):
        out["zlib"] = zlib.compress(raw, 9)
    if codec in ("lzma", "best"):
        try:
            import lzma
            out["lzma"] = lzma.compress(raw, preset=6)
        except ImportError:                       # some Python builds lack lzma
            if codec == "lzma":
                raise
    name = min(out, key=lambda k: len(out[k]))
    return out[name], name


def _decompress(data: bytes, codec: str) -> bytes:
    if codec == "zlib":
        return zlib.decompress(data)
    if codec == "lzma":
        import lzma
        return lzma.decompress(data)
    raise ValueError(f"unknown table codec {codec!r} (expected 'lzma' or 'zlib')")


def encode_table(name: str, bits: np.ndarray, codec: str = "best") -> dict[str, np.ndarray]:
    """npz entries storing table ``name`` ("ex2_pos", "ex2_neg", "rcp") as compressed differences
    from the correctly rounded function (``codec``: "zlib", "lzma" or "best" of both)."""
    bits = np.asarray(bits)
    if bits.shape != (TABLE_SIZE,) or bits.dtype != np.uint32:
        raise ValueError(f"bits must be a uint32 array of shape ({TABLE_SIZE},), got {bits.dtype} {bits.shape}")
    delta = bits.astype(np.int64) - reference_table(name).astype(np.int64)
    dtype = next(d for d in (np.int8, np.int16, np.int32, np.int64)
                 if np.iinfo(d).min <= delta.min() and delta.max() <= np.iinfo(d).max)
    data, codec = _compress(delta.astype(np.dtype(dtype).newbyteorder("<")).tobytes(), codec)
    return {f"{name}__data": np.frombuffer(data, dtype=np.uint8), f"{name}__codec": np.array(codec),
            f"{name}__dtype": np.array(np.dtype(dtype).name), f"{name}__sha256": np.array(_sha256(bits))}


def decode_table(name: str, entries) -> np.ndarray:
    """The uint32 table ``name`` from npz ``entries``; ValueError if its sha256 does not match."""
    raw = _decompress(bytes(entries[f"{name}__data"]), str(entries[f"{name}__codec"]))
    delta = np.frombuffer(raw, dtype=np.dtype(str(entries[f"{name}__dtype"])).newbyteorder("<"))
    if delta.shape != (TABLE_SIZE,):
        raise ValueError(f"table {name!r}: expected {TABLE_SIZE} entries, found {delta.shape[0]}")
    bits = (reference_table(name).astype(np.int64) + delta).astype(np.uint32)
    if _sha256(bits) != str(entries[f"{name}__sha256"]):
        raise ValueError(f"table {name!r}: decoded bits do not match the stored sha256 (corrupt file, "
                         "or this platform's exp2 reference differs)")
    return bits


# -- the models ------------------------------------------------------------------------------------

def _check_choice(params: dict, key: str, choices) -> None:
    if params.get(key) not in choices:
        raise ValueError(f"params[{key!r}] must be one of {choices}, got {params.get(key)!r}")


def _nan_result(bits: np.ndarray, params: dict) -> np.ndarray:
    if params["nan_mode"] == "quiet":
        return bits | np.uint32(QUIET_BIT)
    return np.full(bits.shape, params["nan_bits"], dtype=np.uint32)


@dataclass
class Ex2Model:
    """ex2.approx.ftz.f32 from a table of g over the 2^23 fractions (see the module docstring).

    params: neg_mode ("twos" | "signmag"), rounding ("rz" | "rd" | "ru" | "rn": of x * 2^23, of |x| * 2^23
    in signmag mode), nan_mode ("const" | "quiet"), nan_bits, underflow_bits, overflow_bits,
    pinf_bits, ninf_bits (results for x = +inf / -inf).
    """
    pos: np.ndarray                      # uint32 bits of ex2(f * 2^-23), f = 0 .. 2^23-1
    neg: np.ndarray | None = None        # uint32 bits of ex2(-f * 2^-23) (signmag mode only)
    params: dict = field(default_factory=dict)

    DEFAULTS = {"neg_mode": "twos", "rounding": "rz", "nan_mode": "const", "nan_bits": CANONICAL_NAN,
                "underflow_bits": 0, "overflow_bits": POS_INF, "pinf_bits": POS_INF, "ninf_bits": 0}

    def __post_init__(self):
        self.params = {**self.DEFAULTS, **self.params}
        _check_choice(self.params, "neg_mode", NEG_MODES)
        _check_choice(self.params, "rounding", ROUNDINGS)
        _check_choice(self.params, "nan_mode", NAN_MODES)
        if self.params["neg_mode"] == "signmag" and self.neg is None:
            raise ValueError("neg: signmag mode needs the negative table")

    def bits(self, xbits: np.ndarray) -> np.ndarray:
        """Result bits for input bits (uint32 array, any shape).

        Works in float32 / int32: x * 2^23 is exact for |x| <= 255, and the result is g's bits plus k in the
        exponent field, with the biased exponent checked for flush (<= 0) and overflow (>= 255).
        """
        p = self.params
        b = np.asarray(xbits, dtype=np.uint32)
        expo = b & np.uint32(POS_INF)
        special = expo == POS_INF
        x = np.clip(b.view(np.float32), np.float32(-255), np.float32(255))
        np.putmask(x, (expo == 0) | special, np.float32(0))          # ftz input; specials are patched below
        signmag = p["neg_mode"] == "signmag"
        if signmag:
            np.abs(x, out=x)
        x *= np.float32(TABLE_SIZE)
        _ROUND[p["rounding"]](x, out=x)
        n = x.astype(np.int32)
        k = n >> TABLE_BITS
        g = self.pos[n & MASK]
        if signmag:
            negative = b >= np.uint32(0x80000000)
            g = np.where(negative, self.neg[n & MASK], g)
            np.negative(k, out=k, where=negative)
        exponent = (g >> TABLE_BITS).astype(np.int32) + k              # biased exponent of the result
        out = g + (k << TABLE_BITS).view(np.uint32)                    # modulo 2^32: right wherever it is used
        np.putmask(out, exponent <= 0, np.uint32(p["underflow_bits"]))
        np.putmask(out, exponent >= 255, np.uint32(p["overflow_bits"]))
        if special.any():
            nan = special & ((b & MASK) != 0)
            out = np.where(special, np.where(b >> 31, np.uint32(p["ninf_bits"]), np.uint32(p["pinf_bits"])), out)
            out = np.where(nan, _nan_result(b, p), out)
        return out

    def __call__(self, x):
        return _wrap(self.bits(_bits_of(_as_f32(x))), x)


@dataclass
class RcpModel:
    """rcp.approx.ftz.f32 from a table of the results over [1, 2) (see the module docstring).

    params: nan_mode, nan_bits, and the measured constants zero_pos_bits / zero_neg_bits (x = +-0 or
    subnormal), inf_pos_bits / inf_neg_bits (x = +-inf), underflow_pos_bits / underflow_neg_bits.
    """
    table: np.ndarray                    # uint32 bits of rcp(1 + f * 2^-23), f = 0 .. 2^23-1
    params: dict = field(default_factory=dict)

    DEFAULTS = {"nan_mode": "const", "nan_bits": CANONICAL_NAN, "zero_pos_bits": POS_INF,
                "zero_neg_bits": NEG_INF, "inf_pos_bits": 0, "inf_neg_bits": 0x80000000,
                "underflow_pos_bits": 0, "underflow_neg_bits": 0x80000000}

    def __post_init__(self):
        self.params = {**self.DEFAULTS, **self.params}
        _check_choice(self.params, "nan_mode", NAN_MODES)

    def bits(self, xbits: np.ndarray) -> np.ndarray:
        """Result bits for input bits (uint32 array, any shape)."""
        p = self.params
        b = np.asarray(xbits, dtype=np.uint32)
        e = ((b >> 23) & 0xFF).astype(np.int32)
        neg = b >= np.uint32(0x80000000)
        g = self.table[b & MASK]
        shift = 127 - e
        exponent = (g >> TABLE_BITS).astype(np.int32) + shift          # biased exponent of the result
        out = (g + (shift << TABLE_BITS).view(np.uint32)) | (b & np.uint32(0x80000000))
        np.putmask(out, exponent >= 255, (b & np.uint32(0x80000000)) | np.uint32(POS_INF))
        np.putmask(out, exponent <= 0, np.where(neg, np.uint32(p["underflow_neg_bits"]),
                                                np.uint32(p["underflow_pos_bits"])))
        np.putmask(out, e == 0, np.where(neg, np.uint32(p["zero_neg_bits"]), np.uint32(p["zero_pos_bits"])))
        special = e == 255
        if special.any():
            np.putmask(out, special, np.where(neg, np.uint32(p["inf_neg_bits"]), np.uint32(p["inf_pos_bits"])))
            nan = special & ((b & MASK) != 0)
            out = np.where(nan, _nan_result(b, p), out)
        return out

    def __call__(self, x):
        return _wrap(self.bits(_bits_of(_as_f32(x))), x)


# -- table files -----------------------------------------------------------------------------------

@dataclass
class SfuTables:
    """Both models of one architecture and where they came from."""
    ex2: Ex2Model
    rcp: RcpModel
    arch: str
    source: str = ""
    meta: dict = field(default_factory=dict)


def write_tables(path, ex2_model: Ex2Model, rcp_model: RcpModel, *, arch: str, meta: dict | None = None,
                 codec: str = "best") -> None:
    """Write both models to ``path`` (npz, about 2-4 MB); ``meta`` (json-able) travels along."""
    entries = {"format": np.array(FORMAT_VERSION), "arch": np.array(get_arch(arch).name),
               "params": np.array(json.dumps({"ex2": ex2_model.params, "rcp": rcp_model.params})),
               "meta": np.array(json.dumps(meta or {}))}
    entries.update(encode_table("ex2_pos", ex2_model.pos, codec))
    if ex2_model.params["neg_mode"] == "signmag":
        entries.update(encode_table("ex2_neg", ex2_model.neg, codec))
    entries.update(encode_table("rcp", rcp_model.table, codec))
    with open(path, "wb") as fh:
        np.savez(fh, **entries)


def read_tables(path, source: str = "") -> SfuTables:
    """Read a file written by ``write_tables``; ValueError on a bad or corrupt file."""
    with np.load(path, allow_pickle=False) as z:
        if int(z["format"]) != FORMAT_VERSION:
            raise ValueError(f"{path}: table format {int(z['format'])}, this flashsim reads {FORMAT_VERSION}")
        params = json.loads(str(z["params"]))
        pos = decode_table("ex2_pos", z)
        neg = decode_table("ex2_neg", z) if "ex2_neg__data" in z.files else None
        tables = SfuTables(Ex2Model(pos, neg, params["ex2"]), RcpModel(decode_table("rcp", z), params["rcp"]),
                           arch=str(z["arch"]), source=source or str(path), meta=json.loads(str(z["meta"])))
    return tables


_LOADED: dict = {}


def load_tables(arch="sm_90") -> SfuTables | None:
    """The tables for ``arch`` in calibration load order (cached per process); None if there are none."""
    name = get_arch(arch).name
    if name not in _LOADED:
        found = calibration.locate("sfu", name)
        _LOADED[name] = None if found is None else read_tables(found.path, source=f"{found.source}:{found.path}")
        reference_table.cache_clear()             # 32 MB each; only decoding needs them
    return _LOADED[name]


def _warn_unvalidated(tables: SfuTables, fn: str) -> None:
    if tables.meta.get("exact", {}).get(fn) is False:
        calibration.warn_once(("unvalidated", fn, tables.arch),
                              f"{fn} model: the {tables.arch} tables ({tables.source}) did not reproduce every GPU "
                              "result when captured (see their summary): not bit-exact")


def model_status(arch="sm_90") -> str:
    """One line for reports: which ex2 model the emulator uses for ``arch`` and whether it was exact on silicon."""
    tables = load_tables(arch)
    if tables is None:
        return "no calibration table: correctly rounded exp2 (NOT bit-exact; run `flashsim calibrate` on the GPU)"
    exact = tables.meta.get("exact", {}).get("ex2")
    verdict = {True: "reproduced every checked GPU result", False: "did NOT reproduce every GPU result"}.get(
        exact, "validation unknown")
    return f"{tables.arch} table from {tables.source}: {verdict}"


def reload() -> None:
    """Forget loaded tables (after ``flashsim calibrate`` wrote new ones in this process)."""
    _LOADED.clear()


# -- fallbacks: correctly rounded, same special rules ----------------------------------------------

def _fallback_ex2(b: np.ndarray) -> np.ndarray:
    e = (b >> 23) & 0xFF
    x = np.where(e == 0, np.float32(0), b.view(np.float32))
    finite = e != 255
    xs = np.where(finite, np.clip(x, np.float32(-200), np.float32(200)), np.float32(0))
    r = exp2_correctly_rounded(xs).astype(np.int64)
    r = np.where(xs < -127, 0, np.where(xs >= 128, POS_INF, r))
    r = np.where(r < (1 << 23), 0, np.minimum(r, POS_INF))
    nan = ~finite & ((b & MASK) != 0)
    r = np.where(~finite, np.where(b >> 31, 0, POS_INF), r)
    return np.where(nan, CANONICAL_NAN, r).astype(np.uint32)


def _fallback_rcp(b: np.ndarray) -> np.ndarray:
    e = (b >> 23) & 0xFF
    sign = b & np.uint32(0x80000000)
    r = rcp_correctly_rounded(b.view(np.float32))
    r = np.where((r & 0x7FFFFFFF) < (1 << 23), sign, r)              # ftz result (also +-inf -> +-0)
    r = np.where(e == 0, sign | np.uint32(POS_INF), r)               # ftz input: +-0 -> +-inf
    nan = (e == 255) & ((b & MASK) != 0)
    return np.where(nan, np.uint32(CANONICAL_NAN), r).astype(np.uint32)


# -- public API ------------------------------------------------------------------------------------

def _apply(x, arch, name: str, fallback, what: str):
    """The table model ``name`` ("ex2" / "rcp") of ``arch`` on float32 ``x``; without tables, the correctly
    rounded ``fallback`` with a one-time warning."""
    b = _bits_of(_as_f32(x))
    tables = load_tables(arch)
    if tables is None:
        calibration.warn_once(("fallback", name), f"{name} model: no calibration table, using correctly rounded "
                              f"{what}: not bit-exact (run `flashsim calibrate` on the GPU)")
        return _wrap(fallback(b), x)
    _warn_unvalidated(tables, name)
    return _wrap(getattr(tables, name).bits(b), x)


def ex2(x, arch="sm_90"):
    """The bits of ``ex2.approx.ftz.f32`` on ``arch``: float32 numpy array (any shape) in, float32 out."""
    return _apply(x, arch, "ex2", _fallback_ex2, "exp2")


def rcp(x, arch="sm_90"):
    """The bits of ``rcp.approx.ftz.f32`` on ``arch``: float32 numpy array (any shape) in, float32 out."""
    return _apply(x, arch, "rcp", _fallback_rcp, "1/x")
