"""Run every proof (proofs/prove_*.py) and check the seed's claims; exit 0 iff every proof holds.

Proofs: the online-softmax identity and -inf guard (sympy), the S -> P register repack, the resource budget,
the P@V error bound. Claims: the eight claims of the seed design note (README, 'The seed's claims') with a
verdict each; a claim that does not hold is a finding and does not change the exit status. Register counts come
from NVRTC builds when the gpu extra is installed; without it the claims use the register estimate and say so
in one line.

examples:
  flashsim prove
  flashsim prove --only online_softmax --no-claims -v
"""

from __future__ import annotations

import argparse
import sys
import time


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--only",
        action="append",
        metavar="NAME",
        help="run only this proof (file stem without prove_, e.g. online_softmax); repeatable",
    )
    p.add_argument("--no-claims", action="store_true", help="run the proofs only")
    p.add_argument(
        "--registers",
        default="auto",
        choices=("auto", "estimate"),
        help="registers for the claims: auto (NVRTC builds when possible) or estimate",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="print every step of every proof")


def run(args) -> int:
    from ..prove.runner import run_all

    t0 = time.perf_counter()
    try:
        results = run_all(args.only)
    except (ValueError, FileNotFoundError) as e:
        print(f"flashsim prove: {e}", file=sys.stderr)
        return 2
    print("PROOFS")
    for r in results.values():
        print(f"  [{'holds' if r.holds else 'FAILS'}] {r.name} ({r.seconds:.1f} s): {r.title}")
        if args.verbose or not r.holds:
            print("      " + r.details.replace("\n", "\n      "))
    all_hold = all(r.holds for r in results.values()) and bool(results)
    if not args.no_claims:
        from ..prove.claims import check_claims

        print("\nTHE SEED'S CLAIMS (a claim that does not hold is a finding, not a failure)")
        for c in check_claims(results if not args.only else None, registers=args.registers):
            print()
            print("  " + str(c).replace("\n", "\n  "))
    print(
        f"\n{sum(r.holds for r in results.values())} of {len(results)} proofs hold "
        f"({time.perf_counter() - t0:.1f} s): {'PASS' if all_hold else 'FAIL'}"
    )
    return 0 if all_hold else 1
