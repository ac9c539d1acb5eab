"""The mma.sync ceiling of this GPU (flashsim.gpu.peak; the same as `flashsim bench peak`).

PYTHONPATH=. python3 benchmarks/bench_peak.py [--chains 8] [--iters 4096] [--json out.json]
PYTHONPATH=. python3 benchmarks/bench_peak.py --sweep [--json out.json]   (warps per scheduler x chains)
"""

import sys

from flashsim.gpu.peak import main

if __name__ == "__main__":
    sys.exit(main())
