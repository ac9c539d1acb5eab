"""The special-function unit bit for bit: ``ex2.approx.ftz.f32`` and ``rcp.approx.ftz.f32``.

Model (PTX ISA, "ex2" / "rcp" for the interface; pinned down on the H200 by ``python -m flashsim.gpu.capture.sfu``:
tests/data/sfu_sample_sm90.npz, flashsim/data/sfu/):

- ex2: flush a subnormal x to 0, clamp to [-255, 255], turn x into a fixed-point integer
  n = R(x * 2^23) (R, the rounding, is measured: toward zero on the H200); with
  k = n >> 23 and f = n mod 2^23 the result is 2^k * g[f], g the unit's value on [1, 2) read off a
  table of 2^23 captured results ("twos" mode). If the negative side turns out not to mirror the
  positive one, a second table over x = -f * 2^-23 is used instead ("signmag" mode). A biased result
  exponent <= 0 flushes (ftz), >= 255 overflows; NaN and +-inf results are measured constants.
- rcp: the mantissa of 1/x depends on the mantissa of x only: a table of 2^23 results over [1, 2),
  the exponent shifted by 127 - e; zero, inf, NaN and underflowed results are measured constants.

The models are written once against the array namespace ``xp`` (flashsim.numerics.xp): ``ex2(x)`` / ``rcp(x)`` on
a numpy array (or numpy scalar) return numpy, on a JAX array (inside jit too) JAX. The float32 steps are exact and
never subnormal (x is normal or 0 after the ftz, |x| * 2^23 < 2^31 is a power-of-two scaling, trunc / floor / ceil /
rint of a float32 are exact), so XLA's flush-to-zero cannot change them; the rest is integer work on the bits and a
table gather (``xp.take``). JAX reads device copies of the tables, made once per model; inside jit they become
constants of the compiled program unless the caller passes them in as jit arguments (``table_arrays``, then
``Target.with_tables`` or the ``arrays`` argument of ``ex2`` / ``rcp``).

Tables ship as package data (``flashsim/data/sfu/sfu_tables_sm90.npz``) or come from the user cache
(``flashsim calibrate``), see flashsim.calibration. Each table is stored as its signed difference
from the correctly rounded function (a few distinct small integers), lzma- or zlib-compressed, with
a sha256 of the decoded bits that is checked when it is decoded. Decoding recomputes the correctly
rounded references, so the decoded tables are cached on disk (``read_tables``). Without any table the
functions fall back to the correctly rounded result (with the same ftz/special rules) and warn once: not
bit-exact.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from dataclasses import dataclass, field
from decimal import Decimal, localcontext
from functools import cache

import numpy as np

from .. import calibration
from ..arch import get_arch
from . import sfu_tanh
from .rounding import f32_to_f64, f64_to_f32
from .target import PLAIN, Target
from .xp import bitcast, errstate, is_numpy, lookup, namespace, require_x64

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
_ROUND = {"rz": "trunc", "rd": "floor", "ru": "ceil", "rn": "round"}  # xp functions; round: half to even

# exp2 estimates within HARD_ULPS float64 ulps of an f32 rounding midpoint are settled exactly (Decimal, on the
# host); libm's and XLA's float64 exp2 are a few ulps off at most. HARD_SLOTS: hard cases resolved per JAX call
# without shipping the whole array to the host.
HARD_ULPS = 1 << 12
HARD_SLOTS = 256

__all__ = [
    "ex2",
    "rcp",
    "Ex2Model",
    "RcpModel",
    "SfuTables",
    "load_tables",
    "reload",
    "table_arrays",
    "exp2_correctly_rounded",
    "rcp_correctly_rounded",
    "ex2_table_inputs",
    "rcp_table_inputs",
    "reference_table",
    "encode_table",
    "decode_table",
    "write_tables",
    "read_tables",
    "tanh",
    "tanh_model",
    "ModelUnavailable",
]


# -- input checking --------------------------------------------------------------------------------


def _as_f32(x, name: str = "x"):
    """x as a float32 array (numpy: ndarray, 0-d for a numpy scalar; JAX: as is); ValueError for anything else."""
    if isinstance(x, np.generic) and x.dtype == np.float32:
        return np.asarray(x)
    if not isinstance(x, np.ndarray) and is_numpy(namespace(x)):
        raise ValueError(f"{name} must be a float32 numpy array, got {type(x).__name__}")
    if x.dtype != np.float32:
        raise ValueError(f"{name} must have dtype float32 (the SFU works on f32), got {x.dtype}")
    return x


def _wrap(bits, like):
    """Result bits as float32 in ``like``'s library (a numpy scalar for a numpy scalar)."""
    out = bitcast(bits, np.float32)
    return out[()] if isinstance(like, np.generic) else out


def _u32(xp, v):
    return xp.asarray(v, dtype=xp.uint32)


# -- correctly rounded exp2 (deterministic on every platform) --------------------------------------


def _exp2_decimal(y: float) -> Decimal:
    with localcontext() as ctx:
        ctx.prec = 60
        return (Decimal(y) * Decimal(2).ln()).exp()


def _exp2_estimate(xp, xs, generic: bool = False):
    """(bits, hard) for float64 xs in [-200, 200]: the f32 bits (uint32) of 2^xs rounded from a float64 estimate,
    and where that estimate lies within HARD_ULPS of an f32 rounding midpoint (there the few ulps a float64 exp2
    may be off could tip the rounding). 2^xs = 2^(xs - k) * 2^k with k = floor(xs): xs - k is exact and the
    scaling by 2^k is done on the exponent bits. Meant for normal f32 results (callers flush or clamp the rest)."""
    k = xp.floor(xs)
    v = xp.exp2(xs - k)
    vb = bitcast(v, np.int64) + (k.astype(xp.int64) << 52)
    low = (vb & ((1 << 29) - 1)) - (1 << 28)
    bits = bitcast(f64_to_f32(bitcast(vb, np.float64), generic=generic), np.uint32)
    return bits, (low < HARD_ULPS) & (low > -HARD_ULPS)


def _settle(bits: np.ndarray, xs: np.ndarray, hard: np.ndarray) -> np.ndarray:
    """numpy: the f32 bits of 2^xs where ``hard``, decided against the exact value (Decimal): of the two f32
    neighbours around the estimate, the one on the exact value's side of their midpoint (no ties: 2^x is
    irrational for the non-integer x that can be hard)."""
    bits = np.array(bits, dtype=np.uint32, copy=True)
    for i in np.flatnonzero(hard):
        x = float(xs.flat[i])
        exact = _exp2_decimal(x)
        r = int(bits.flat[i])
        down = r - (1 if Decimal(float(np.uint32(r).view(np.float32))) > exact else 0)
        lo, hi = np.array([down, down + 1], dtype=np.uint32).view(np.float32).astype(np.float64)
        bits.flat[i] = down + (exact > Decimal((lo + hi) / 2))
    return bits


def exp2_correctly_rounded(x: np.ndarray) -> np.ndarray:
    """Bits (uint32) of 2^x correctly rounded to f32, x float32 or float64 (exactly representable), numpy.

    Meant for normal f32 results: x is clamped to [-200, 200] and results outside the normal f32 range are not
    special-cased here (see ``_fallback_ex2``).
    """
    xs = np.clip(np.asarray(x, dtype=np.float64), -200.0, 200.0)
    xs = np.where(np.isnan(xs), 0.0, xs)
    bits, hard = _exp2_estimate(np, xs)
    return _settle(bits, xs, hard).reshape(np.shape(x))


def rcp_correctly_rounded(x) -> np.ndarray:
    """Bits (uint32) of 1/x correctly rounded to f32 for float32 x (numpy or JAX).

    One f64 division suffices: for a 24-bit significand the exact quotient is never within 2^-53
    (relative) of an f32 rounding boundary unless it is exact, so rounding twice cannot go wrong.
    """
    xp = namespace(x)
    x = xp.asarray(x, dtype=xp.float32)
    with errstate():
        return bitcast(f64_to_f32(1.0 / f32_to_f64(x)), np.uint32)


def ex2_table_inputs(negative: bool = False) -> np.ndarray:
    """The 2^23 inputs whose results form an ex2 table: +-f * 2^-23 for f = 0 .. 2^23 - 1 (float32)."""
    f = np.arange(TABLE_SIZE, dtype=np.float32) * np.float32(2.0**-TABLE_BITS)
    return -f if negative else f


def rcp_table_inputs() -> np.ndarray:
    """The 2^23 inputs of the rcp table: every float32 in [1, 2)."""
    return (np.arange(TABLE_SIZE, dtype=np.uint32) | np.uint32(0x3F800000)).view(np.float32)


_REFERENCES = {
    "ex2_pos": lambda: exp2_correctly_rounded(ex2_table_inputs(False)),
    "ex2_neg": lambda: exp2_correctly_rounded(ex2_table_inputs(True)),
    "rcp": lambda: rcp_correctly_rounded(rcp_table_inputs()),
}


@cache
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
        except ImportError:  # some Python builds lack lzma
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
    dtype = next(
        d
        for d in (np.int8, np.int16, np.int32, np.int64)
        if np.iinfo(d).min <= delta.min() and delta.max() <= np.iinfo(d).max
    )
    data, codec = _compress(delta.astype(np.dtype(dtype).newbyteorder("<")).tobytes(), codec)
    return {
        f"{name}__data": np.frombuffer(data, dtype=np.uint8),
        f"{name}__codec": np.array(codec),
        f"{name}__dtype": np.array(np.dtype(dtype).name),
        f"{name}__sha256": np.array(_sha256(bits)),
    }


def decode_table(name: str, entries) -> np.ndarray:
    """The uint32 table ``name`` from npz ``entries``; ValueError if its sha256 does not match."""
    raw = _decompress(bytes(entries[f"{name}__data"]), str(entries[f"{name}__codec"]))
    delta = np.frombuffer(raw, dtype=np.dtype(str(entries[f"{name}__dtype"])).newbyteorder("<"))
    if delta.shape != (TABLE_SIZE,):
        raise ValueError(f"table {name!r}: expected {TABLE_SIZE} entries, found {delta.shape[0]}")
    bits = (reference_table(name).astype(np.int64) + delta).astype(np.uint32)
    if _sha256(bits) != str(entries[f"{name}__sha256"]):
        raise ValueError(
            f"table {name!r}: decoded bits do not match the stored sha256 (corrupt file, "
            "or this platform's exp2 reference differs)"
        )
    return bits


# -- the models ------------------------------------------------------------------------------------


def _check_choice(params: dict, key: str, choices) -> None:
    if params.get(key) not in choices:
        raise ValueError(f"params[{key!r}] must be one of {choices}, got {params.get(key)!r}")


def _nan_result(xp, b, params: dict):
    if params["nan_mode"] == "quiet":
        return b | QUIET_BIT
    return _u32(xp, params["nan_bits"])


def _input_bits(xbits, arrays):
    """(xp, uint32 bits) of the model input (numpy: anything array-like)."""
    xp = namespace(xbits, *arrays)
    return xp, (np.asarray(xbits, dtype=np.uint32) if is_numpy(xp) else xp.asarray(xbits).astype(xp.uint32))


class _Tables:
    """Mixin: the model's tables in a given array library; JAX device copies are made once (eagerly, even when
    first asked for inside a jit trace) and kept on the model."""

    def arrays(self, xp) -> tuple:
        """The tables the model reads (``_tables()`` order) as arrays of ``xp``."""
        host = self._tables()
        if is_numpy(xp):
            return host
        cache = self.__dict__.setdefault("_device", {})
        if "jax" not in cache:
            import jax

            with jax.ensure_compile_time_eval():
                cache["jax"] = tuple(xp.asarray(np.asarray(t)) for t in host)
        return cache["jax"]


@dataclass(eq=False)
class Ex2Model(_Tables):
    """ex2.approx.ftz.f32 from a table of g over the 2^23 fractions (see the module docstring).

    params: neg_mode ("twos" | "signmag"), rounding ("rz" | "rd" | "ru" | "rn": of x * 2^23, of |x| * 2^23
    in signmag mode), nan_mode ("const" | "quiet"), nan_bits, underflow_bits, overflow_bits,
    pinf_bits, ninf_bits (results for x = +inf / -inf).
    """

    pos: np.ndarray  # uint32 bits of ex2(f * 2^-23), f = 0 .. 2^23-1
    neg: np.ndarray | None = None  # uint32 bits of ex2(-f * 2^-23) (signmag mode only)
    params: dict = field(default_factory=dict)

    DEFAULTS = {
        "neg_mode": "twos",
        "rounding": "rz",
        "nan_mode": "const",
        "nan_bits": CANONICAL_NAN,
        "underflow_bits": 0,
        "overflow_bits": POS_INF,
        "pinf_bits": POS_INF,
        "ninf_bits": 0,
    }

    def __post_init__(self):
        self.params = {**self.DEFAULTS, **self.params}
        _check_choice(self.params, "neg_mode", NEG_MODES)
        _check_choice(self.params, "rounding", ROUNDINGS)
        _check_choice(self.params, "nan_mode", NAN_MODES)
        if self.params["neg_mode"] == "signmag" and self.neg is None:
            raise ValueError("neg: signmag mode needs the negative table")

    def _tables(self) -> tuple:
        return (self.pos, self.neg) if self.params["neg_mode"] == "signmag" else (self.pos,)

    def bits(self, xbits, arrays=None, target: Target = PLAIN):
        """Result bits (uint32) for input bits (uint32 array, any shape; numpy or JAX). ``arrays``: the tables
        as ``arrays(xp)`` gives them (e.g. passed through jit as arguments); default: the model's own. ``target``:
        how the lookups are traced (flashsim.numerics.target).

        x * 2^23 is exact in float32 for |x| <= 255, and the result is g's bits plus k in the exponent field, with
        the biased exponent checked for flush (<= 0) and overflow (>= 255).
        """
        p = self.params
        xp, b = _input_bits(xbits, arrays or ())
        tabs = arrays if arrays else self.arrays(xp)
        pos, neg = tabs[0], tabs[-1]
        expo = b & POS_INF
        special = expo == POS_INF
        x = bitcast(xp.where((expo == 0) | special, _u32(xp, 0), b), np.float32)  # ftz; specials patched below
        x = xp.clip(x, np.float32(-255), np.float32(255))
        signmag = p["neg_mode"] == "signmag"
        if signmag:
            x = xp.abs(x)
        n = getattr(xp, _ROUND[p["rounding"]])(x * np.float32(TABLE_SIZE)).astype(xp.int32)
        k = n >> TABLE_BITS
        f = n & MASK
        if signmag:
            negative = (b >> 31) == 1
            if is_numpy(xp):  # one lookup per element: the table lookups are cache misses (32 MB tables)
                flat = f.reshape(-1)
                g = np.take(neg, flat)
                keep = np.flatnonzero(~negative)
                g[keep] = np.take(pos, flat[keep])
                g = g.reshape(f.shape)
            else:
                g = xp.where(negative, lookup(neg, f, target), lookup(pos, f, target))
            k = xp.where(negative, -k, k)
        else:
            g = lookup(pos, f, target)
        exponent = (g >> TABLE_BITS).astype(xp.int32) + k  # biased exponent of the result
        out = g + bitcast(k << TABLE_BITS, np.uint32)  # modulo 2^32: right wherever it is used
        out = xp.where(exponent <= 0, _u32(xp, p["underflow_bits"]), out)
        out = xp.where(exponent >= 255, _u32(xp, p["overflow_bits"]), out)
        out = xp.where(special, xp.where((b >> 31) == 1, _u32(xp, p["ninf_bits"]), _u32(xp, p["pinf_bits"])), out)
        return xp.where(special & ((b & MASK) != 0), _nan_result(xp, b, p), out)

    def __call__(self, x):
        return _wrap(self.bits(bitcast(_as_f32(x), np.uint32)), x)


@dataclass(eq=False)
class RcpModel(_Tables):
    """rcp.approx.ftz.f32 from a table of the results over [1, 2) (see the module docstring).

    params: nan_mode, nan_bits, and the measured constants zero_pos_bits / zero_neg_bits (x = +-0 or
    subnormal), inf_pos_bits / inf_neg_bits (x = +-inf), underflow_pos_bits / underflow_neg_bits.
    """

    table: np.ndarray  # uint32 bits of rcp(1 + f * 2^-23), f = 0 .. 2^23-1
    params: dict = field(default_factory=dict)

    DEFAULTS = {
        "nan_mode": "const",
        "nan_bits": CANONICAL_NAN,
        "zero_pos_bits": POS_INF,
        "zero_neg_bits": NEG_INF,
        "inf_pos_bits": 0,
        "inf_neg_bits": 0x80000000,
        "underflow_pos_bits": 0,
        "underflow_neg_bits": 0x80000000,
    }

    def __post_init__(self):
        self.params = {**self.DEFAULTS, **self.params}
        _check_choice(self.params, "nan_mode", NAN_MODES)

    def _tables(self) -> tuple:
        return (self.table,)

    def bits(self, xbits, arrays=None, target: Target = PLAIN):
        """Result bits (uint32) for input bits (uint32 array, any shape; numpy or JAX); ``arrays`` and ``target``
        as for Ex2Model.bits."""
        p = self.params
        xp, b = _input_bits(xbits, arrays or ())
        (table,) = arrays if arrays else self.arrays(xp)
        e = ((b >> 23) & 0xFF).astype(xp.int32)
        neg = (b >> 31) == 1
        sign = b & 0x80000000
        g = lookup(table, b & MASK, target)
        shift = 127 - e
        exponent = (g >> TABLE_BITS).astype(xp.int32) + shift  # biased exponent of the result
        out = (g + bitcast(shift << TABLE_BITS, np.uint32)) | sign

        def by_sign(pos_key, neg_key):
            return xp.where(neg, _u32(xp, p[neg_key]), _u32(xp, p[pos_key]))

        out = xp.where(exponent >= 255, sign | POS_INF, out)
        out = xp.where(exponent <= 0, by_sign("underflow_pos_bits", "underflow_neg_bits"), out)
        out = xp.where(e == 0, by_sign("zero_pos_bits", "zero_neg_bits"), out)
        special = e == 255
        out = xp.where(special, by_sign("inf_pos_bits", "inf_neg_bits"), out)
        return xp.where(special & ((b & MASK) != 0), _nan_result(xp, b, p), out)

    def __call__(self, x):
        return _wrap(self.bits(bitcast(_as_f32(x), np.uint32)), x)


# -- table files -----------------------------------------------------------------------------------


@dataclass
class SfuTables:
    """Both models of one architecture and where they came from."""

    ex2: Ex2Model
    rcp: RcpModel
    arch: str
    source: str = ""
    meta: dict = field(default_factory=dict)


def write_tables(
    path, ex2_model: Ex2Model, rcp_model: RcpModel, *, arch: str, meta: dict | None = None, codec: str = "best"
) -> None:
    """Write both models to ``path`` (npz, about 2-4 MB); ``meta`` (json-able) travels along."""
    entries = {
        "format": np.array(FORMAT_VERSION),
        "arch": np.array(get_arch(arch).name),
        "params": np.array(json.dumps({"ex2": ex2_model.params, "rcp": rcp_model.params})),
        "meta": np.array(json.dumps(meta or {})),
    }
    entries.update(encode_table("ex2_pos", ex2_model.pos, codec))
    if ex2_model.params["neg_mode"] == "signmag":
        entries.update(encode_table("ex2_neg", ex2_model.neg, codec))
    entries.update(encode_table("rcp", rcp_model.table, codec))
    with open(path, "wb") as fh:
        np.savez(fh, **entries)


_DECODED_VERSION = 1  # bump when the decoded layout changes: old cache files are then never read


def read_tables(path, source: str = "", *, cache: bool = False) -> SfuTables:
    """Read a file written by ``write_tables``; ValueError on a bad or corrupt file.

    Decoding recomputes the correctly rounded references (about 1.1 s and a 530 MB peak per process, measured
    on this project's CPU), so the decoded uint32 tables are cached in the user cache
    (flashsim.calibration.derived_path: ``$FLASHSIM_CACHE/derived/`` ...), one .npy named by the sha256 of the
    file's bytes: a changed file never meets a stale cache. The first decode checks every table against the
    sha256 stored in the file, then writes the cache atomically; later loads memory-map it (0.003 s and a 44 MB
    peak RSS for the whole process, 43 MB of which is importing flashsim; the pages are read on demand).
    ``load_tables`` (the calibration files) caches; a plain ``read_tables`` of some file does not unless
    ``cache=True``. An unwritable cache only costs the decode.
    """
    digest = calibration.file_sha256(path)
    cache_file = calibration.derived_path(f"sfu_decoded_v{FORMAT_VERSION}.{_DECODED_VERSION}_{digest}.npy")
    with np.load(path, allow_pickle=False) as z:
        if int(z["format"]) != FORMAT_VERSION:
            raise ValueError(f"{path}: table format {int(z['format'])}, this flashsim reads {FORMAT_VERSION}")
        params = json.loads(str(z["params"]))
        names = ["ex2_pos"] + (["ex2_neg"] if "ex2_neg__data" in z.files else []) + ["rcp"]
        stacked = calibration.load_array(cache_file, shape=(len(names), TABLE_SIZE), dtype=np.uint32) if cache else None
        if stacked is None:
            stacked = np.stack([decode_table(name, z) for name in names])
            if cache:
                calibration.save_array(cache_file, stacked)
        tables = {name: np.asarray(stacked[i]) for i, name in enumerate(names)}
        return SfuTables(
            Ex2Model(tables["ex2_pos"], tables.get("ex2_neg"), params["ex2"]),
            RcpModel(tables["rcp"], params["rcp"]),
            arch=str(z["arch"]),
            source=source or str(path),
            meta=json.loads(str(z["meta"])),
        )


_LOADED: dict = {}


def load_tables(arch="sm_90") -> SfuTables | None:
    """The tables for ``arch`` in calibration load order (cached per process); None if there are none."""
    name = get_arch(arch).name
    if name not in _LOADED:
        found = calibration.locate("sfu", name)
        _LOADED[name] = (
            None if found is None else read_tables(found.path, source=f"{found.source}:{found.path}", cache=True)
        )
        reference_table.cache_clear()  # 32 MB each; only decoding needs them
    return _LOADED[name]


def _warn_unvalidated(tables: SfuTables, fn: str) -> None:
    if tables.meta.get("exact", {}).get(fn) is False:
        calibration.warn_once(
            ("unvalidated", fn, tables.arch),
            f"{fn} model: the {tables.arch} tables ({tables.source}) did not reproduce every GPU "
            "result when captured (see their summary): not bit-exact",
        )


def model_status(arch="sm_90") -> str:
    """One line for reports: which ex2 model the emulator uses for ``arch`` and whether it was exact on silicon."""
    tables = load_tables(arch)
    if tables is None:
        return "no calibration table: correctly rounded exp2 (NOT bit-exact; run `flashsim calibrate` on the GPU)"
    exact = tables.meta.get("exact", {}).get("ex2")
    verdict = {True: "reproduced every checked GPU result", False: "did NOT reproduce every GPU result"}.get(
        exact, "validation unknown"
    )
    return f"{tables.arch} table from {tables.source}: {verdict}"


def reload() -> None:
    """Forget loaded tables (after ``flashsim calibrate`` wrote new ones in this process)."""
    _LOADED.clear()


# -- fallbacks: correctly rounded, same special rules ----------------------------------------------


def _fallback_ex2(b, *, generic: bool = False):
    """2^x correctly rounded, with ex2's ftz and special rules, for input bits ``b`` (uint32, numpy or JAX).
    ``generic``: numpy without the conversions' hardware fast paths (the host callback runs on an XLA thread,
    where the CPU flushes subnormals)."""
    xp = namespace(b)
    require_x64(xp)
    b = np.asarray(b, dtype=np.uint32) if is_numpy(xp) else b.astype(xp.uint32)
    e = (b >> 23) & 0xFF
    finite = e != 255
    x = f32_to_f64(bitcast(xp.where((e == 0) | ~finite, _u32(xp, 0), b), np.float32), generic=generic)
    xs = xp.clip(x, -200.0, 200.0)
    est, hard = _exp2_estimate(xp, xs, generic)
    r = est.astype(xp.int64)
    r = xp.where(xs < -126, 0, xp.where(xs >= 128, POS_INF, r))
    r = xp.where(r < (1 << 23), 0, xp.minimum(r, POS_INF))
    r = xp.where(finite, r, xp.where((b >> 31) == 1, 0, POS_INF))
    r = xp.where(~finite & ((b & MASK) != 0), CANONICAL_NAN, r).astype(xp.uint32)
    hard = hard & finite & (xs >= -126) & (xs < 128)
    if is_numpy(xp):
        return _settle(r, xs, hard)
    return _settle_on_host(xp, b, r, hard)


def _settle_on_host(xp, b, r, hard):
    """JAX: the hard cases of ``_fallback_ex2`` recomputed by the numpy routine on the host (jax.pure_callback),
    so their bits are numpy's by construction: up to HARD_SLOTS of them gathered into a small buffer, or the whole
    array when there are more. The callback runs on an XLA thread, whose CPU flags flush subnormals: hence the
    generic (integer) conversions there."""
    import jax
    from jax import lax

    def host(xb):
        return _fallback_ex2(np.asarray(xb, dtype=np.uint32), generic=True)

    flat_x, flat_r, flat_h = xp.reshape(b, (-1,)), xp.reshape(r, (-1,)), xp.reshape(hard, (-1,))
    n = flat_x.shape[0]
    if n == 0:
        return r
    slots = min(HARD_SLOTS, n)
    count = xp.sum(flat_h.astype(xp.int32))

    def few(rr):
        idx = xp.nonzero(flat_h, size=slots, fill_value=n)[0]  # unused slots point past the end
        fixed = jax.pure_callback(host, jax.ShapeDtypeStruct((slots,), xp.uint32), flat_x[xp.minimum(idx, n - 1)])
        return rr.at[idx].set(fixed, mode="drop")

    def every(rr):
        return jax.pure_callback(host, jax.ShapeDtypeStruct(rr.shape, xp.uint32), flat_x)

    flat_r = lax.cond(count == 0, lambda rr: rr, lambda rr: lax.cond(count <= slots, few, every, rr), flat_r)
    return xp.reshape(flat_r, b.shape)


def _fallback_rcp(b):
    """1/x correctly rounded, with rcp's ftz and special rules, for input bits ``b`` (uint32, numpy or JAX)."""
    xp = namespace(b)
    require_x64(xp)
    b = np.asarray(b, dtype=np.uint32) if is_numpy(xp) else b.astype(xp.uint32)
    e = (b >> 23) & 0xFF
    sign = b & 0x80000000
    r = rcp_correctly_rounded(bitcast(b, np.float32))
    r = xp.where((r & 0x7FFFFFFF) < (1 << 23), sign, r)  # ftz result (also +-inf -> +-0)
    r = xp.where(e == 0, sign | POS_INF, r)  # ftz input: +-0 -> +-inf
    return xp.where((e == 255) & ((b & MASK) != 0), _u32(xp, CANONICAL_NAN), r)


# -- public API ------------------------------------------------------------------------------------


def table_arrays(arch="sm_90", name: str = "ex2", xp=np) -> tuple:
    """The tables the ``name`` ("ex2" / "rcp") model of ``arch`` reads, as arrays of ``xp`` (numpy: the host
    arrays; JAX: the model's cached device copies); () without tables (the fallback reads none)."""
    if name not in ("ex2", "rcp"):
        raise ValueError(f"name must be 'ex2' or 'rcp', got {name!r}")
    tables = load_tables(arch)
    return () if tables is None else getattr(tables, name).arrays(xp)


def _apply(x, arch, name: str, fallback, what: str, arrays, target: Target):
    """The table model ``name`` ("ex2" / "rcp") of ``arch`` on float32 ``x``; without tables, the correctly
    rounded ``fallback`` with a one-time warning. The tables read: ``arrays``, else the target's (an engine's
    device copies), else the model's own."""
    b = bitcast(_as_f32(x), np.uint32)
    tables = load_tables(arch)
    if tables is None:
        calibration.warn_once(
            ("fallback", name),
            f"{name} model: no calibration table, using correctly rounded "
            f"{what}: not bit-exact (run `flashsim calibrate` on the GPU)",
        )
        return _wrap(fallback(b), x)
    _warn_unvalidated(tables, name)
    if arrays is None:
        arrays = target.tables(get_arch(arch).name, name)
    return _wrap(getattr(tables, name).bits(b, arrays or None, target), x)


def ex2(x, arch="sm_90", *, arrays=None, target: Target = PLAIN):
    """The bits of ``ex2.approx.ftz.f32`` on ``arch``: float32 in (numpy array or scalar, or JAX array; any
    shape), float32 out in the same library. ``arrays``: the tables to read (``table_arrays``), optional;
    ``target``: the engine's (flashsim.numerics.target), which may hold them."""
    return _apply(x, arch, "ex2", _fallback_ex2, "exp2", arrays, target)


def rcp(x, arch="sm_90", *, arrays=None, target: Target = PLAIN):
    """The bits of ``rcp.approx.ftz.f32`` on ``arch``: float32 in (numpy array or scalar, or JAX array; any
    shape), float32 out in the same library. ``arrays`` and ``target``: as for ``ex2``."""
    return _apply(x, arch, "rcp", _fallback_rcp, "1/x", arrays, target)


def tanh(x, arch="sm_90"):
    """The bits of ``tanh.approx.f32`` on ``arch`` (sm_90 only: flashsim.numerics.sfu_tanh's fitted interpolator):
    float32 in (numpy array or scalar, any shape), float32 out. Numpy only: the interpolator's integer sums are
    numpy int64 work, not written against the JAX namespace."""
    if not is_numpy(namespace(x)):
        raise TypeError("sfu.tanh takes numpy arrays or scalars (the interpolator is not written for JAX)")
    bits = tanh_model(arch)
    return _wrap(bits(np.asarray(_as_f32(x)).view(np.uint32)), x)


def tanh_model(arch):
    """``tanh.approx.f32`` of ``arch`` as a function of f32 bit patterns (uint32 -> uint32), or ModelUnavailable:
    the fitted interpolator exists for the arch it was fitted on only (flashsim.numerics.sfu_tanh.ARCH)."""
    name = get_arch(arch).name
    if name != sfu_tanh.ARCH:
        raise ModelUnavailable(f"tanh.approx.f32: no model for {name} (the interpolator was fitted on {sfu_tanh.ARCH})")
    return sfu_tanh.tanh_f32_bits


class ModelUnavailable(LookupError):
    """No bit-exact model of a form exists for an architecture; the message says why."""
