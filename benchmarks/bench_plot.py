"""The line plots of the benchmarks: files/s against one setting, one line per way of reading.

``line_plot`` draws them with matplotlib (imported there, so that modules importing this
one need only the standard library) and ``save`` writes the figures as JSON beside the
image. Used by ``bench_peers_plot`` (against the batch size) and ``bench_latency_plot``
(against storage latency).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any


def line_plot(
    lines: Mapping[str, Mapping[float, float]],
    out: str,
    *,
    xlabel: str,
    ylabel: str,
    title: str,
    xscale: Mapping[str, Any],
    ticks: Sequence[float],
    styles: Mapping[str, Mapping[str, Any]] | None = None,
    size: tuple[float, float] = (7, 4.5),
) -> None:
    """Save a plot of one line per entry of ``lines`` ({label: {x: y}}), y on a log scale.

    Args:
        lines: the points of each line, by its label (the legend's order).
        out: the image file written (its type from its suffix).
        xlabel: the x axis's label.
        ylabel: the y axis's label.
        title: the plot's title.
        xscale: ``Axes.set_xscale``'s arguments (e.g. ``{"value": "log", "base": 2}``).
        ticks: the x values marked on the axis.
        styles: more ``Axes.plot`` arguments for some lines (colour, line style).
        size: the figure's width and height, inches (at 110 dpi).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=size, dpi=110)
    for label, points in lines.items():
        xs = sorted(points)
        style = {"marker": "o", **(styles or {}).get(label, {})}
        ax.plot(xs, [points[x] for x in xs], label=label, **style)
    ax.set_xscale(**xscale)
    ax.set_xticks(list(ticks), [f"{t:g}" for t in ticks])
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)


def save(result: Mapping[str, Any], out: str) -> str:
    """Write ``result`` as JSON beside the image ``out`` (same name, ``.json``); its path."""
    path = os.path.splitext(out)[0] + ".json"
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
    return path
