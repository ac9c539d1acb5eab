"""Public tensor-core kernels of other projects (mma.sync, and Hopper's wgmma + TMA), built from their published
sources and run in flashsim.ptx.

``packages`` pins the registry archives their sources come from (name, version, sha256) and extracts the part the
builds need; ``build`` turns a kernel's instantiation unit (kernel/thirdparty/*.cu) into PTX with nvcc and the
project's own flags; ``kernels`` describes each launch (inputs, parameters, outputs, a float64 reference); and
``capture`` reads and writes the GPU's outputs (tests/data/thirdparty/<name>_sm90.npz). Hopper kernels whose
parameters the project's own host code builds (CUTLASS 3's sm90 GEMM, CuTe's Hopper tutorial: TMA maps inside) are
units that are host programs too: ``hostprogram`` builds them with flashsim.ptx.hostshim's tensor-map shim, and
``cutlass_gemm`` / ``cute_tutorial`` describe their launches (captures <name>_sm90a.npz). Nothing of the projects'
code is kept in this repository: tests/test_ptx_thirdparty.py fetches the pinned archives into the user cache, and
tools/thirdparty_capture.py carries a stripped copy to the GPU machine.
"""
