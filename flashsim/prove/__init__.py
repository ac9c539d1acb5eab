"""What ``flashsim prove`` runs: the proofs in proofs/ and the checks of the seed's claims.

runner.py   finds proofs/prove_*.py (next to the package, or the packaged copy ``_proofs``: a link to proofs/
            that a build turns into files), runs each one's ``check()`` and gives the helpers the proofs share
            (``run_steps``, ``run_as_script``);
claims.py   the eight claims of the seed design note (README, 'The seed's claims'), each with a verdict, checked
            with the resource model (flashsim.resources) and the proofs' results.
"""
