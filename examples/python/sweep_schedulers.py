"""Schedulers x queue depth on a rotating disk model, two seeds each: a sweep, its table
and two charts (IOPS against depth per scheduler, and the latency CDFs at depth 32).

    python examples/python/sweep_schedulers.py [OUT_DIR] [--backend=ray]
"""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import mqblk  # noqa: E402

out = Path(next((a for a in sys.argv[1:] if not a.startswith("--")), "."))
backend = "ray" if "--backend=ray" in sys.argv else "local"
df = mqblk.sweep(
    "--rw=randread --bs=4k --runtime=300ms --time_based --name=r",
    grid={"ioscheduler": ["none", "mq-deadline", "kyber", "bfq"], "iodepth": [1, 4, 16, 32]},
    seeds=[1, 2],
    device="hdd",
    backend=backend,
    progress=True,
)
table = df.groupby(["param.ioscheduler", "param.iodepth"])["iops"].mean().unstack()
print(table.round(0).to_string())
ax = mqblk.plot.iops_over(df, x="iodepth", hue="ioscheduler")
ax.set_title("randread 4k on the hdd model")
ax.figure.savefig(out / "iops_over_depth.png", dpi=120)
deep = df[(df["param.iodepth"] == 32) & (df["seed"] == 1)]
ax = mqblk.plot.latency_cdf(deep, by=["param.ioscheduler"])
ax.figure.savefig(out / "latency_cdf_qd32.png", dpi=120)
print(f"charts in {out}/iops_over_depth.png and {out}/latency_cdf_qd32.png")
