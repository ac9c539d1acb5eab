"""flashsim.ptx: the PTX-level simulator. Its front half: ``parser.parse`` turns PTX text into the frozen IR of
``ir`` (``Module``, ``Function``, ``Instruction``...), ``names.find_kernel`` finds a kernel by its PTX or C++ name,
and ``errors`` holds what they raise."""
