"""Identities of the CuTe-style layout algebra (flashsim.layout.cute), on random layouts."""

from math import prod

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from flashsim.layout.cute import Layout, flatten

SETTINGS = settings(max_examples=100, deadline=None)


def reference_table(layout: Layout) -> np.ndarray:
    """Evaluation by numpy's own column-major unravel: an independent statement of the definition."""
    shape = flatten(layout.shape)
    stride = np.array(flatten(layout.stride))
    coords = np.stack(np.unravel_index(np.arange(prod(shape)), shape, order="F"), axis=1)
    return coords @ stride


@st.composite
def layouts(draw, max_rank=4):
    rank = draw(st.integers(1, max_rank))
    shape = [draw(st.integers(1, 6)) for _ in range(rank)]
    stride = [draw(st.integers(0, 40)) for _ in range(rank)]
    if rank >= 3 and draw(st.booleans()):  # nest the first two modes
        return Layout(((shape[0], shape[1]), *shape[2:]), ((stride[0], stride[1]), *stride[2:]))
    return Layout(tuple(shape), tuple(stride))


@st.composite
def complementable(draw):
    """An injective layout whose sorted strides divide each other (the domain of complement)."""
    rank = draw(st.integers(1, 4))
    shapes = [draw(st.integers(2, 5)) for _ in range(rank)]
    gaps = [draw(st.integers(1, 3)) for _ in range(rank)]
    strides, d = [], 1
    for s, gap in zip(shapes, gaps):
        d *= gap
        strides.append(d)
        d *= s
    order = draw(st.permutations(range(rank)))
    return Layout(tuple(shapes[k] for k in order), tuple(strides[k] for k in order))


@SETTINGS
@given(layouts())
def test_table_is_the_definition(layout):
    assert np.array_equal(layout.table(), reference_table(layout))
    assert np.array_equal(layout.coords() @ np.array(flatten(layout.stride)), layout.table())


@SETTINGS
@given(layouts())
def test_coalesce_keeps_the_function(layout):
    c = layout.coalesce()
    assert np.array_equal(c.table(), layout.table())
    assert c.size == layout.size
    assert len(c.flat()) <= len(layout.flat())


@SETTINGS
@given(layouts(), layouts(max_rank=3))
def test_composition_is_function_composition(a, b):
    try:
        r = a.compose(b)
    except ValueError:
        assume(False)
    assume(b.table().max() < a.size)  # a layout's function is defined on range(size)
    assert r.size == b.size
    assert np.array_equal(r.table(), a(b.table()))


@SETTINGS
@given(layouts(max_rank=3), st.data())
def test_composition_with_a_divisor_tiler_always_succeeds(a, data):
    """B = (t0, t1):(u0, s0) with t0 * u0 = s0 and t1 | s1 takes every u0-th point of a's first mode and
    the first t1 points of its second: always a layout, always a's function restricted."""
    leaves = [s for s, _ in a.flat()]
    assume(len(leaves) >= 2)
    s0, s1 = leaves[0], leaves[1]
    u0 = data.draw(st.sampled_from([u for u in range(1, s0 + 1) if s0 % u == 0]))
    t1 = data.draw(st.sampled_from([t for t in range(1, s1 + 1) if s1 % t == 0]))
    tiler = Layout((s0 // u0, t1), (u0, s0))
    flat_a = a.flatten()
    assert np.array_equal(flat_a.compose(tiler).table(), flat_a(tiler.table()))


@SETTINGS
@given(complementable(), st.integers(1, 4))
def test_complement_fills_the_codomain(layout, mult):
    cotarget = layout.cosize * mult
    comp = layout.complement(cotarget)
    full = Layout((layout.shape, comp.shape), (layout.stride, comp.stride))
    assert full.is_injective()
    assert set(range(cotarget)) <= set(full.table().tolist())
    assert full.size >= cotarget


@SETTINGS
@given(layouts())
def test_right_inverse(layout):
    r = layout.right_inverse()
    assert np.array_equal(layout(r.table()), np.arange(r.size))


@SETTINGS
@given(complementable())
def test_left_inverse(layout):
    inv = layout.left_inverse()
    assert np.array_equal(inv(layout.table()), np.arange(layout.size))


def test_nested_coordinates_agree_with_indices():
    lay = Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128)))
    t, g, v0, v1, v2 = np.meshgrid(range(4), range(8), range(2), range(2), range(2), indexing="ij")
    by_coord = lay(((t, g), (v0, v1, v2)))
    by_index = lay(t + 4 * g + 32 * (v0 + 2 * v1 + 4 * v2))
    assert np.array_equal(by_coord, by_index)
    assert lay((1, 0)) == 32 and lay(((1, 2), 3)) == 32 + 2 + 16 + 8


def test_known_values():
    assert Layout((4, 8), (32, 1)).complement(128).table().tolist() == [0, 8, 16, 24]
    assert repr(Layout((2, 4), (3, 1)).compose(Layout(4, 2))) == "4:1"
    assert repr(Layout(((4, 8), (2, 2)), ((32, 1), (16, 8))).right_inverse()) == "(8,2,2,4):(4,64,32,1)"


def test_bad_input():
    with pytest.raises(ValueError, match="congruent"):
        Layout((2, 3), 1)
    with pytest.raises(ValueError, match="positive"):
        Layout((2, 0), (1, 2))
    with pytest.raises(ValueError, match="nested tuple"):
        Layout("4", 1)
    with pytest.raises(ValueError, match="does not divide"):
        Layout((3, 4), (1, 5)).compose(Layout(2, 2))
    with pytest.raises(ValueError, match="not a layout"):
        Layout((6, 2), (0, 1)).compose(Layout((3, 2), (2, 3)))
    with pytest.raises(ValueError, match="cotarget"):
        Layout(4, 1).complement(0)
