"""The serving GPU tests with flashsim.gpu.serving.FUSED switched on before any of them runs: what turning the
fused-check build on by default would run them against (every public call's index check inside flash_fwd).

    python3 benchmarks/serving/fused_default_tests.py [pytest arguments]
"""

import sys

import pytest

from flashsim.gpu import serving

serving.FUSED = True
args = sys.argv[1:] or ["-q", "-m", "gpu", "-rs", "-p", "no:cacheprovider"]
sys.exit(pytest.main([*args, "tests/test_serving_gpu.py", "tests/test_serving_call_gpu.py"]))
