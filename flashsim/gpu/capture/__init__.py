"""Capture tools run on a GPU: python3 -m flashsim.gpu.capture.NAME --out DIR"""


def verdict(model: str, total_bad: int) -> int:
    """Print a capture's verdict on ``model`` (e.g. "flashsim.mma") and return the tools' exit status: 0 when every
    captured bit is reproduced, 2 when ``total_bad`` outputs differ (the files are written either way)."""
    print(
        f"VERDICT: {model} reproduces every captured bit"
        if total_bad == 0
        else f"VERDICT: {total_bad} output elements differ from {model} (exit status 2; the files are written)"
    )
    return 0 if total_bad == 0 else 2
