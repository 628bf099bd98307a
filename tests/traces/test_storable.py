"""without_nul: every NUL in nested values is replaced; a clean value is returned as it is."""

from __future__ import annotations

from collections import OrderedDict

import pytest

from traces.storable import NUL_STAND_IN, without_nul

R = NUL_STAND_IN


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("a\x00b", f"a{R}b"),
        ({"k\x00": "v"}, {f"k{R}": "v"}),
        ({"k": "v\x00"}, {"k": f"v{R}"}),
        ({"k": [1, {"deep": ["x", "y\x00"]}]}, {"k": [1, {"deep": ["x", f"y{R}"]}]}),
        ([None, 2.5, True, "\x00"], [None, 2.5, True, R]),
        (OrderedDict(a="\x00"), {"a": R}),  # subclasses are walked too
        ([["\x00"]], [[R]]),
    ],
)
def test_every_nul_is_replaced_at_any_depth(value, expected):
    assert without_nul(value) == expected


@pytest.mark.parametrize(
    "value",
    ["clean", {"k": ["a", {"b": 1}], 3: None}, [1, 2.5, None, True, ("tuple", "kept")], 7, None],
)
def test_a_clean_value_is_not_copied(value):
    assert without_nul(value) is value
