"""Cell texts and colour-bar ends, checked against values worked out by hand."""

import math

import numpy as np
import pytest

from attn_gui.present.formats import format_compact, format_value, nice_ceil, visible_label


@pytest.mark.parametrize("value,text", [
    (0.829733, "0.83"), (-0.004, "-0.00"), (12.345, "12.3"), (-99.96, "-100.0"), (123.4, "123"),
    (1500.0, "1.5e+03"), (float("-inf"), "-∞"), (float("inf"), "∞"), (float("nan"), "NaN"),
])
def test_format_value(value, text):
    assert format_value(value) == text


@pytest.mark.parametrize("value,text", [
    (0.829733, ".8"), (-0.43, "-.4"), (0.04, "0"), (-0.04, "0"), (9.96, "10"), (5.5, "5.5"),
    (250.0, "250"), (float("-inf"), "-∞"),
])
def test_format_compact(value, text):
    assert format_compact(value) == text


@pytest.mark.parametrize("x,top", [
    (0.7, 0.8), (1.0, 1.0), (1.01, 1.5), (2.2, 3.0), (7.0, 8.0), (8.5, 10.0), (0.00034, 0.0004),
    (1234.0, 1500.0), (0.0, 1.0), (-3.0, 1.0), (float("nan"), 1.0), (float("inf"), 1.0),
])
def test_nice_ceil(x, top):
    assert nice_ceil(x) == pytest.approx(top)


@pytest.mark.parametrize("x", np.geomspace(1e-6, 1e6, 97))
def test_nice_ceil_is_the_smallest_nice_number_not_below_x(x):
    top = nice_ceil(x)
    assert top >= x * (1 - 1e-9)
    power = 10 ** math.floor(math.log10(top) + 1e-12)
    assert round(top / power, 6) in (1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0)
    assert top < 1.51 * x or top / power == 1.0  # the next nice step down would be below x


def test_visible_label():
    assert visible_label(" ") == "␣"
    assert visible_label("intelligent", 6) == "intel…"
    assert visible_label("in") == "in"


@pytest.mark.parametrize("top,values,full,compact", [
    # ω′ of ModernBERT and Phi-3: values about ±0.04 read "0" in every cell (issue 47)
    (0.043, [0.043, -0.041, 0.0049, 0.0], ["0.043", "-0.041", "0.005", "0.000"], [".04", "-.04", "0", "0"]),
    (0.0043, [-0.0043, 0.0011], ["-0.0043", "0.0011"], ["-.004", ".001"]),
    (0.83, [0.829733, -0.04], ["0.83", "-0.04"], [".8", "0"]),  # alpha's scale: as before
    (3.3, [3.3, -0.43], ["3.30", "-0.43"], ["3.3", "-.4"]),  # past 1: CELL_FORMATS
])
def test_cell_formats_print_the_digits_the_scale_needs(top, values, full, compact):
    from attn_gui.present.formats import cell_formats

    wide, narrow = cell_formats(top)
    assert [wide(v) for v in values] == full and [narrow(v) for v in values] == compact
    assert wide(float("-inf")) == "-∞"


def test_the_walk_prints_small_scaled_scores_with_their_digits():
    """ω / √d_k / 100 of the default sentence is about ±0.006: the walk's column read 0.00 and -0.00."""
    import re

    from attn_gui.engine import AttentionConfig, compute
    from attn_gui.present.walk import walk_html

    result = compute(AttentionConfig(temperature=100.0))
    shown = re.findall(r"<td align=right>(-?[0-9.]+)</td><td align=right>([^<]*)</td>", walk_html(result, 1, 0))
    scaled = result.scaled[0, 1].tolist()
    assert [float(text) for _, text in shown] == pytest.approx(scaled, abs=5e-5)
    assert all(float(text) != 0 for _, text in shown)
