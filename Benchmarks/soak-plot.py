#!/usr/bin/env python3
"""Draws the samples of `parley-bench soak` (issue 47) as an SVG line chart, with the standard library only.

    python3 Benchmarks/soak-plot.py samples.csv docs/soak.svg [--title TEXT]

One panel per series (the server's resident memory, open descriptors, CPU, WAL, database, queued bytes, WebSocket
connections), one above the other on a shared time axis in minutes; the warm-up (the samples whose `warmup` column
is 1) is shaded. A series with no value in the file (an attached server without its pid, PostgreSQL's missing WAL)
shows "no samples". Missing values break the line.
"""

import argparse
import csv
import math
import sys
from xml.sax.saxutils import escape

# (CSV column, panel title, scale applied to the values)
SERIES = [
    ("rss_mib", "Server resident memory (MiB)", 1.0),
    ("fds", "Open descriptors", 1.0),
    ("cpu_pct", "Server CPU (% of one core)", 1.0),
    ("wal_mib", "WAL (MiB)", 1.0),
    ("db_mib", "Database (MiB)", 1.0),
    ("queued_bytes", "Queued bytes (KiB)", 1.0 / 1024),
    ("connections", "WebSocket connections", 1.0),
]

WIDTH = 960
LEFT = 80
RIGHT = 24
PANEL = 120
GAP = 46
TOP = 56
BOTTOM = 46
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#ff7f0e"]


def nice_step(span, ticks):
    """A step of 1, 2 or 5 times a power of ten that cuts `span` into about `ticks` parts."""
    if span <= 0:
        return 1.0
    raw = span / ticks
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power


def label(value):
    if abs(value) >= 1e6:
        return f"{value / 1e6:g}M"
    if abs(value) >= 1e4:
        return f"{value / 1e3:g}k"
    return f"{value:g}"


def read(path):
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    if not rows:
        sys.exit(f"{path}: no samples")
    return rows


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("samples", help="the CSV written by parley-bench soak --samples")
    parser.add_argument("output", help="the SVG to write, e.g. docs/soak.svg")
    parser.add_argument("--title", default=None, help="the chart's title (default: from the file's samples)")
    arguments = parser.parse_args()

    rows = read(arguments.samples)
    minutes = [number(row.get("elapsed_s")) / 60 for row in rows]
    warm = [row.get("warmup") == "1" for row in rows]
    x_max = max(minutes) or 1.0
    warmup_end = max((m for m, w in zip(minutes, warm) if w), default=None)
    if warmup_end is not None:
        # The warm-up lasts until the first sample after it.
        later = [m for m, w in zip(minutes, warm) if not w and m >= warmup_end]
        warmup_end = min(later) if later else warmup_end

    x_step = nice_step(x_max, 10)
    plot_width = WIDTH - LEFT - RIGHT
    height = TOP + len(SERIES) * (PANEL + GAP) - GAP + BOTTOM

    def x_of(value):
        return LEFT + value / x_max * plot_width

    title = arguments.title or (
        f"parley-bench soak: {len(rows)} samples over {x_max:.0f} min"
        + (f", warm-up {warmup_end:.1f} min shaded" if warmup_end else "")
    )
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="Helvetica, Arial, sans-serif" font-size="11">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        f'<text x="{LEFT}" y="24" font-size="15" font-weight="bold">{escape(title)}</text>',
    ]
    for index, (column, name, scale) in enumerate(SERIES):
        top = TOP + index * (PANEL + GAP)
        bottom = top + PANEL
        values = [number(row.get(column)) for row in rows]
        values = [None if v is None else v * scale for v in values]
        present = [v for v in values if v is not None]
        out.append(f'<text x="{LEFT}" y="{top - 8}" font-size="12" font-weight="bold">{escape(name)}</text>')
        out.append(
            f'<rect x="{LEFT}" y="{top}" width="{plot_width}" height="{PANEL}" fill="none" stroke="#999"/>'
        )
        if warmup_end:
            out.append(
                f'<rect x="{LEFT}" y="{top}" width="{x_of(warmup_end) - LEFT:.1f}" height="{PANEL}" '
                f'fill="#000" fill-opacity="0.07"/>'
            )
            if index == 0:
                out.append(f'<text x="{LEFT + 4}" y="{top + 13}" fill="#666">warm-up</text>')
        # Time grid.
        tick = 0.0
        while tick <= x_max + 1e-9:
            x = x_of(tick)
            out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#eee"/>')
            if index == len(SERIES) - 1:
                out.append(f'<text x="{x:.1f}" y="{bottom + 15}" text-anchor="middle">{label(tick)}</text>')
            tick += x_step
        if not present:
            out.append(
                f'<text x="{LEFT + plot_width / 2}" y="{top + PANEL / 2}" text-anchor="middle" fill="#999">'
                "no samples</text>"
            )
            continue
        low, high = min(present), max(present)
        # From zero when the values are not far from it; else at least a tenth of their size high, so that a flat
        # line with a little noise looks flat.
        if low >= 0 and low <= high * 0.5:
            low = 0.0
        least = max(1.0, 0.1 * max(abs(low), abs(high)))
        if high - low < least:
            middle = (high + low) / 2
            low, high = middle - least / 2, middle + least / 2
            if min(present) >= 0 and low < 0:
                low, high = 0.0, least
        y_step = nice_step(high - low, 4)
        low = math.floor(low / y_step) * y_step
        high = math.ceil(high / y_step) * y_step

        def y_of(value):
            return bottom - (value - low) / (high - low) * PANEL

        tick = low
        while tick <= high + y_step * 1e-6:
            y = y_of(tick)
            out.append(f'<line x1="{LEFT}" y1="{y:.1f}" x2="{LEFT + plot_width}" y2="{y:.1f}" stroke="#eee"/>')
            out.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{label(round(tick, 6))}</text>')
            tick += y_step
        # The line, broken where a sample has no value.
        segment = []
        segments = [segment]
        for m, v in zip(minutes, values):
            if v is None:
                segment = []
                segments.append(segment)
            else:
                segment.append(f"{x_of(m):.1f},{y_of(v):.1f}")
        color = COLORS[index % len(COLORS)]
        for points in segments:
            if len(points) == 1:
                x, y = points[0].split(",")
                out.append(f'<circle cx="{x}" cy="{y}" r="1.5" fill="{color}"/>')
            elif points:
                out.append(
                    f'<polyline fill="none" stroke="{color}" stroke-width="1.4" points="{" ".join(points)}"/>'
                )
        out.append(
            f'<text x="{LEFT + plot_width - 4}" y="{top + 13}" text-anchor="end" fill="#444">'
            f"min {label(round(min(present), 2))}, max {label(round(max(present), 2))}, "
            f"last {label(round(present[-1], 2))}</text>"
        )
    out.append(
        f'<text x="{LEFT + plot_width / 2}" y="{height - 10}" text-anchor="middle">minutes since the load started</text>'
    )
    out.append("</svg>")
    with open(arguments.output, "w") as handle:
        handle.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
