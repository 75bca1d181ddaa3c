"""The plots a researcher makes first from a sweep's DataFrame (matplotlib)."""

from __future__ import annotations

from typing import Optional, Sequence


def _labels(df, by: Optional[Sequence[str]]):
    cols = list(by) if by else [c for c in df.columns if c.startswith("param.")]
    if not cols:
        return ["" for _ in range(len(df))]
    return [", ".join(f"{c.removeprefix('param.')}={r[c]}" for c in cols) for _, r in df.iterrows()]


def latency_cdf(df, by: Optional[Sequence[str]] = None, ax=None):
    """Completion latency CDFs, one line per row, from fio's clat percentiles."""
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(7, 4))[1]
    pcols = sorted((c for c in df.columns if c.startswith("clat_p") and c.endswith("_ns")),
                   key=lambda c: float(c[len("clat_p"):-len("_ns")]))
    pct = [float(c[len("clat_p"):-len("_ns")]) for c in pcols]
    for label, (_, row) in zip(_labels(df, by), df.iterrows()):
        xs = [row[c] / 1000 for c in pcols]
        ax.plot(xs, pct, marker=".", label=label or row.get("job", ""))
    ax.set_xscale("log")
    ax.set_xlabel("completion latency (µs)")
    ax.set_ylabel("percentile")
    ax.legend(fontsize="small")
    return ax


def iops_over(df, x: str, hue: Optional[str] = None, ax=None):
    """Mean IOPS (over seeds) against parameter ``x``, one line per value of ``hue``."""
    import matplotlib.pyplot as plt

    ax = ax or plt.subplots(figsize=(7, 4))[1]
    xcol = x if x in df.columns else f"param.{x}"
    hcol = None if hue is None else (hue if hue in df.columns else f"param.{hue}")
    groups = [(None, df)] if hcol is None else list(df.groupby(hcol))
    # Dashes and markers cycle too, so lines that coincide stay visible.
    styles = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D")]
    for i, (key, g) in enumerate(groups):
        m = g.groupby(xcol)["iops"].mean()
        ls, mk = styles[i % len(styles)]
        ax.plot(list(m.index), list(m.values), linestyle=ls, marker=mk,
                label=None if key is None else f"{hue}={key}")
    ax.set_xlabel(x)
    ax.set_ylabel("IOPS")
    if hcol is not None:
        ax.legend(fontsize="small")
    return ax
