"""Every user error of every subcommand is one line on stderr and exit status 2, never a traceback, and is found
before the work starts; a real bug keeps its traceback.

Most cases run the CLI in-process (``flashsim.cli.main``) and read stderr with capsys; a missing optional
dependency (jax, matplotlib) is simulated in a child process whose ``sys.modules[name] = None`` makes the import
fail, as on an install without that extra.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from flashsim.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]
PLOT = pytest.mark.needs("matplotlib")


def one_line_error(capsys, argv, prefix):
    """Run ``flashsim argv``; assert exit 2 and exactly one stderr line starting with ``prefix``; return that line.
    (argparse's errors exit through SystemExit, the others return the status.)"""
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert rc == 2, (rc, err)
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith(prefix), lines[0]
    return lines[0]


@pytest.fixture
def npy(tmp_path):
    """Paths of .npy files: q, k, v float16 (1, 1, 8, 64), a float32 q, a k of 2 heads, a text file, an .npz."""
    rng = np.random.default_rng(0)
    paths = {}
    for name, dtype in (("q", np.float16), ("k", np.float16), ("v", np.float16), ("q32", np.float32)):
        paths[name] = str(tmp_path / f"{name}.npy")
        np.save(paths[name], rng.standard_normal((1, 1, 8, 64)).astype(dtype))
    paths["k2"] = str(tmp_path / "k2.npy")
    np.save(paths["k2"], np.zeros((1, 2, 8, 64), np.float16))
    (tmp_path / "text.npy").write_text("not an array\n")
    paths["text"] = str(tmp_path / "text.npy")
    np.savez(tmp_path / "arch.npz", q=np.zeros(3))
    paths["npz"] = str(tmp_path / "arch.npz")
    return paths


# (id, argv, what the one line must contain)
EMULATE = [
    ("float32 q", lambda p: ["--q", p["q32"], "--k", p["k"], "--v", p["v"]], ["--q", "float32", "float16"]),
    ("missing file", lambda p: ["--q", "/nonexistent/q.npy", "--k", p["k"], "--v", p["v"]], ["--q", "no such file"]),
    ("not an .npy", lambda p: ["--q", p["text"], "--k", p["k"], "--v", p["v"]], ["--q", "not a .npy"]),
    ("an .npz", lambda p: ["--q", p["npz"], "--k", p["k"], "--v", p["v"]], ["--q", ".npz archive"]),
    ("q without k, v", lambda p: ["--q", p["q"]], ["--q, --k and --v"]),
    ("files and --nq", lambda p: ["--q", p["q"], "--k", p["k"], "--v", p["v"], "--nq", "8"], ["--nq describe"]),
    ("--nq 0", lambda p: ["--nq", "0"], ["--nq must be >= 1"]),
    ("--heads -1", lambda p: ["--heads", "-1"], ["--heads must be >= 1"]),
    ("--nk 0", lambda p: ["--nk", "0"], ["--nk must be >= 1"]),
    ("--scale nan", lambda p: ["--scale", "nan"], ["--scale"]),
    ("--nq abc", lambda p: ["--nq", "abc"], ["--nq", "invalid int value"]),
    ("--head-dim 48", lambda p: ["--head-dim", "48"], ["--head-dim", "invalid choice"]),
    ("--window 3", lambda p: ["--window", "3"], ["--window '3': expected LEFT,RIGHT"]),
    ("--window=-2,4", lambda p: ["--window=-2,4"], ["window_size values must be >= -1"]),
    ("--causal --window 4,2", lambda p: ["--causal", "--window", "4,2"], ["a causal window's right bound is 0"]),
    ("--softcap -1", lambda p: ["--softcap", "-1"], ["softcap must be a finite number >= 0"]),
    ("--kv-heads 3", lambda p: ["--heads", "4", "--kv-heads", "3"], ["Hq=4 must be a multiple of the key/value heads"]),
    ("--kv-heads 0", lambda p: ["--kv-heads", "0"], ["--kv-heads must be >= 1"]),
    ("--quant int4", lambda p: ["--quant", "int4"], ["--quant", "invalid choice"]),
    (
        "--quant int8 --softcap 5",
        lambda p: ["--quant", "int8", "--softcap", "5"],
        ["quant='int8' does not combine with softcap"],
    ),
    ("--k-mean inf", lambda p: ["--k-mean", "inf"], ["--k-mean must be a finite number"]),
    ("--dtype bf16 --pv-accum f16", lambda p: ["--dtype", "bf16", "--pv-accum", "f16"], ["needs float16 inputs"]),
    ("--arch sm_75", lambda p: ["--arch", "sm_75"], ["unknown arch 'sm_75'"]),
    # without matplotlib --plot stops at "--plot needs matplotlib" (test_a_missing_optional_dependency_is_one_line...)
    ("--plot into no folder", lambda p: ["--plot", "/nonexistent/dir/e.png"], ["--plot", "no such folder"], PLOT),
    ("--plot .xyz", lambda p: ["--plot", "e.xyz"], ["--plot", ".png"], PLOT),
    (
        "k's heads differ",
        lambda p: ["--q", p["q"], "--k", p["k2"], "--v", p["k2"]],
        ["must be a multiple of the key/value heads"],
    ),
]


@pytest.mark.parametrize("argv, words", [pytest.param(*c[1:3], id=c[0], marks=c[3:]) for c in EMULATE])
def test_emulate_user_errors(capsys, npy, argv, words):
    line = one_line_error(capsys, ["emulate", *argv(npy)], "flashsim emulate: ")
    for w in words:
        assert w in line, line


def test_emulate_refuses_a_problem_too_large_before_any_work(capsys, monkeypatch):
    """The memory check runs on the shapes before the inputs are even generated: fast, one line, the estimate."""
    monkeypatch.setenv("FLASHSIM_MAX_BYTES", "2000000000")
    line = one_line_error(capsys, ["emulate", "--heads", "64", "--nq", "32768"], "flashsim emulate: ")
    assert "would need about" in line and "estimated" in line and "FLASHSIM_MAX_BYTES" in line


def test_emulate_without_a_tty_draws_no_progress_bar(capsys, monkeypatch):
    """emulate passes progress=None: the bar shows only when stderr is a terminal (it is not under capsys)."""
    import flashsim.commands.emulate as em

    seen = []
    real = em.attention
    monkeypatch.setattr(em, "attention", lambda *a, **kw: seen.append(kw.get("progress", "missing")) or real(*a, **kw))
    assert main(["emulate", "--heads", "1", "--nq", "32", "--head-dim", "64", "--pv-accum", "f32"]) == 0
    out, err = capsys.readouterr()
    assert seen[-1] is None and err == ""  # the warm-up call before it passes progress=False
    assert "ulp = distance from O to the float64 reference rounded to O's type" in out
    assert "O max |error| / max |O|" in out


@PLOT
def test_emulate_plot_draws_every_head_or_the_worst(tmp_path, capsys):
    from flashsim.commands.emulate import MAX_HEADS_SHOWN, _heads_to_show

    for heads in (2, MAX_HEADS_SHOWN + 1):
        path = tmp_path / f"e{heads}.png"
        assert main(["emulate", "--heads", str(heads), "--nq", "32", "--head-dim", "64", "--plot", str(path)]) == 0
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f"plot written to {path}" in capsys.readouterr().out
    o_ref = np.zeros((2, 5, 4, 64))
    o = np.zeros((2, 5, 4, 64), np.float16)
    o[1, 3, 2, 7] = 0.5  # the worst head: batch 1, head 3
    shown = _heads_to_show({"f32": (0.0, o, None, None)}, o_ref)
    assert [(b, h) for b, h, _ in shown[0][1]] == [(1, 3)]
    shown = _heads_to_show({"f32": (0.0, o[:1, :4], None, None)}, o_ref[:1, :4])
    assert [(b, h) for b, h, _ in shown[0][1]] == [(0, h) for h in range(4)]


VERIFY = [
    ("--shape 3 fields", ["--shape", "1,2,3"], "5 or 6 fields"),
    ("--shape not ints", ["--shape", "1,1,a,64,64"], "must be integers"),
    ("--shape zero", ["--shape", "1,1,0,64,64"], "must be >= 1"),
    ("--shape d=48", ["--shape", "1,1,64,64,48"], "D=48"),
    ("--shape causal typo", ["--shape", "1,1,64,64,64,caus"], "6th field"),
    ("--seeds 0", ["--seeds", "0"], "--seeds must be >= 1"),
    ("--kinds unknown", ["--kinds", "normal,weird"], "--kinds"),
    ("--only alone", ["--only"], "--only"),
    ("--replay missing", ["--replay", "/nonexistent.npz"], "--replay: no such file"),
    ("--json no folder", ["--json", "/nonexistent/dir/r.json"], "--json: no such folder"),
]


@pytest.mark.parametrize("argv, word", [c[1:] for c in VERIFY], ids=[c[0] for c in VERIFY])
def test_verify_argument_errors_come_before_the_gpu(capsys, argv, word):
    assert word in one_line_error(capsys, ["verify", *argv], "flashsim verify: ")


def _no_gpu():
    from flashsim.gpu.runtime import gpu_available

    if gpu_available()[0]:
        pytest.skip("a GPU is present: the no-GPU error cannot be shown here")


@pytest.mark.parametrize(
    "argv", [["verify"], ["bench", "kernel"], ["calibrate", "--no-mma"]], ids=["verify", "bench kernel", "calibrate"]
)
def test_no_gpu_is_one_line(capsys, argv):
    _no_gpu()
    if argv[0] == "bench":
        pytest.importorskip("torch", reason="bench kernel asks for torch before the GPU")
    line = one_line_error(capsys, argv, f"flashsim {argv[0]}: ")
    assert "GPU" in line or "cuda" in line.lower(), line


OTHERS = [
    ("calibrate --random-scale 0", ["calibrate", "--random-scale", "0"], "--random-scale"),
    ("calibrate --keep in no folder", ["calibrate", "--keep", "/nonexistent/a/b"], "--keep"),
    ("budget bad kv tile", ["budget", "--kv-tile", "40", "--registers", "estimate"], "kv_tile"),
    ("budget unknown arch", ["budget", "--arch", "sm_75"], "unknown arch"),
    ("budget --plot .xyz", ["budget", "--registers", "estimate", "--plot", "b.xyz"], "--plot"),
    ("prove unknown proof", ["prove", "--only", "nope"], "nope"),
    ("bench unknown what", ["bench", "nothing"], "invalid choice"),
    ("unknown option", ["budget", "--frobnicate"], "unrecognized arguments"),
]


@pytest.mark.parametrize("argv, word", [c[1:] for c in OTHERS], ids=[c[0] for c in OTHERS])
def test_other_commands_user_errors(capsys, argv, word):
    assert word in one_line_error(capsys, argv, f"flashsim {argv[0]}: ")


@pytest.mark.parametrize("argv, word", [([], "required: COMMAND"), (["nope"], "invalid choice")])
def test_no_or_unknown_command(capsys, argv, word):
    with pytest.raises(SystemExit) as info:
        main(argv)
    err = capsys.readouterr().err
    assert info.value.code == 2 and len(err.strip().splitlines()) == 1 and word in err, err


# ---- what is not a user error ------------------------------------------------------------------------------------


def _fake_command(monkeypatch, exc):
    from flashsim.commands import budget

    def run(args):
        raise exc

    monkeypatch.setattr(budget, "run", run)


@pytest.mark.parametrize(
    "exc",
    [TypeError("a bug"), KeyError("a bug"), ImportError("no module named x", name="x"), RuntimeError("a bug")],
    ids=lambda e: type(e).__name__,
)
def test_a_bug_keeps_its_traceback(monkeypatch, exc):
    _fake_command(monkeypatch, exc)
    with pytest.raises(type(exc)):
        main(["budget"])


def test_flashsim_traceback_shows_a_user_error_s_traceback(monkeypatch):
    _fake_command(monkeypatch, ValueError("bad input"))
    monkeypatch.setenv("FLASHSIM_TRACEBACK", "1")
    with pytest.raises(ValueError, match="bad input"):
        main(["budget"])


def test_a_multi_line_gpu_error_is_one_line(capsys, monkeypatch):
    from flashsim.errors import CompileError

    _fake_command(monkeypatch, CompileError("NVRTC failed for flash_fwd.cu", log="line 1\nline 2\nline 3"))
    line = one_line_error(capsys, ["budget"], "flashsim budget: NVRTC failed for flash_fwd.cu")
    assert "3 more lines" in line and "FLASHSIM_TRACEBACK=1" in line


def test_a_command_s_system_exit_message_is_one_line(capsys, monkeypatch):
    _fake_command(monkeypatch, SystemExit("something the user must fix"))
    assert one_line_error(capsys, ["budget"], "flashsim budget: ") == "flashsim budget: something the user must fix"


# ---- optional dependencies missing: found before the work -----------------------------------------------------


def run_without(module: str, *argv: str, cwd=None) -> subprocess.CompletedProcess:
    """The CLI in a child process where ``import <module>`` fails (sys.modules[module] = None)."""
    code = textwrap.dedent(f"""
        import sys
        sys.modules[{module!r}] = None
        from flashsim.cli import main
        sys.exit(main({list(argv)!r}))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120, cwd=cwd or ROOT
    )


@pytest.mark.parametrize(
    "module, argv, words",
    [
        ("jax", ["emulate", "--backend", "jax"], ["--backend jax needs jax", "pip install 'flashsim[jax]'"]),
        ("matplotlib", ["emulate", "--plot", "e.png"], ["--plot needs matplotlib", "pip install 'flashsim[plot]'"]),
        ("matplotlib", ["budget", "--registers", "estimate", "--plot", "b.png"], ["--plot needs matplotlib"]),
    ],
    ids=["emulate jax", "emulate plot", "budget plot"],
)
def test_a_missing_optional_dependency_is_one_line_before_the_work(tmp_path, module, argv, words):
    r = run_without(module, *argv, cwd=tmp_path)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1 and "Traceback" not in r.stderr, r.stderr
    assert err[0].startswith(f"flashsim {argv[0]}: ") and all(w in err[0] for w in words), err[0]
    assert r.stdout == "", r.stdout  # nothing was computed or printed before the error
    assert not any(tmp_path.iterdir())
