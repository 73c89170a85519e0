"""The leaderboard's plots draw what its tables say (research/_estimates.html): a dot and its
interval, no interval where the table says "too few", nothing for a figure that has no mean."""

from __future__ import annotations

from app.leaderboards.plot import cdf_svg, estimates_svg


def test_a_plot_draws_intervals_only_where_the_table_shows_them():
    svg = str(
        estimates_svg(
            [
                ("enough", {"n": 12, "mean": 0.75, "low": 0.5, "high": 0.9}, "#000"),
                ("too few", {"n": 3, "mean": 0.9, "low": 0.36, "high": 0.99}, "#000"),
                ("no mean", {"n": 4, "mean": None, "low": None, "high": None}, "#000"),
                (
                    "a baseline whose name runs on well past the plot's margin",
                    {"n": 20, "mean": 0.5, "low": 0.3, "high": 0.7},
                    "#000",
                ),
            ],
            "accuracy",
        )
    )
    assert svg.count("<line x1=") - 5 == 2  # five grid lines; whiskers for "enough" and the baseline only
    assert "0.900 (too few for an interval), n=3" in svg and "0.750 [0.500, 0.900], n=12" in svg
    assert svg.count("<circle") == 3  # "no mean" gets its label, no dot
    long = "a baseline whose name runs on well past the plot's margin"
    assert f">{long[:33]}…</text>" in svg  # cut to the margin, the whole name on hover
    assert "<title>a baseline whose name runs on well past the plot&#39;s margin</title>" in svg


def test_a_cdf_scales_down_to_a_phone():
    svg = str(cdf_svg({"expert": [3, 4, 5]}, "steps"))
    assert 'viewBox="0 0 640 240"' in svg
