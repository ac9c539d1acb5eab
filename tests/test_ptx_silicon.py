"""flashsim.ptx against the H200: every silicon probe (flashsim.ptx.probes) rerun in the simulator on the inputs
the GPU ran must give the GPU's bits (tests/data/ptx_isa/, written by ``python -m flashsim.gpu.capture.isa``).

A probe whose PTX changed after its capture fails here (its stored bits are of another program: capture again on
the GPU), and so does a probe with no capture in its topic's file; a topic with no capture file yet (a new one) is
skipped with the command that makes it."""

from __future__ import annotations

import pytest

from flashsim import provenance
from flashsim.ptx import probes as P

pytestmark = pytest.mark.nvrtc  # the probes' PTX comes from NVRTC


def _captures() -> dict:
    out = {}
    for topic in P.TOPICS:
        if P.capture_path(topic).is_file():
            for name, stored in P.load_capture(topic).items():
                out[f"{topic}/{name}"] = stored
    return out


CAPTURED = _captures()
PROBES = {p.key: p for p in P.probes()}
UNCAPTURED_TOPICS = sorted(t for t in P.TOPICS if P.probes(t) and not P.capture_path(t).is_file())


def test_every_probe_has_a_capture():
    missing = sorted(k for k in set(PROBES) - set(CAPTURED) if k.split("/")[0] not in UNCAPTURED_TOPICS)
    assert not missing, f"probes never run on the GPU (python -m flashsim.gpu.capture.isa): {', '.join(missing)}"


def test_every_capture_belongs_to_a_probe():
    stale = sorted(set(CAPTURED) - set(PROBES))
    assert not stale, f"captures of probes that no longer exist: {', '.join(stale)}"


if UNCAPTURED_TOPICS:  # (none today: without this guard pytest reports an empty parameter set as a skip)

    @pytest.mark.parametrize("topic", UNCAPTURED_TOPICS)
    def test_topic_is_captured(topic):
        pytest.skip(
            f"the {topic} probes have not run on a GPU yet: python3 -m flashsim.gpu.capture.isa --topic {topic} "
            f"--out tests/data/ptx_isa (on the H200)"
        )


@pytest.mark.parametrize("key", sorted(set(PROBES) & set(CAPTURED)))
def test_probe_matches_the_gpu(key):
    probe, stored = PROBES[key], CAPTURED[key]
    nvrtc = stored["meta"].get("nvrtc")
    if nvrtc == provenance.nvrtc_version() and P.ptx_sha256(probe) != stored["ptx_sha256"]:
        pytest.fail(f"{key}: its PTX changed after the capture: run it on the GPU again", pytrace=False)
    mismatch = P.check(probe, stored)
    assert mismatch is None, str(mismatch)
