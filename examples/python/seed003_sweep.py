"""`virtio-multi-vq` ("virtio_blk: support multi virt queues") rebuilt as a sweep: the chart of
`mqblk scenario virtio-multi-vq` from plain fio options, beside the mail's figures.

A 4-vCPU guest runs fio randread 4k QD64 with 2 and 4 jobs (spread over the vCPUs, as the
guest's scheduler spreads them) on the virtio model with 1 and 2 virtqueues.

    python examples/python/seed003_sweep.py [OUT_DIR] [--backend=ray]
"""

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import pandas as pd  # noqa: E402

import mqblk  # noqa: E402

out = Path(next((a for a in sys.argv[1:] if not a.startswith("--")), "."))
backend = "ray" if "--backend=ray" in sys.argv else "local"
base = ("--rw=randread --bs=4k --iodepth=64 --size=8g --runtime=1 --time_based "
        "--ioscheduler=none --cpus_allowed_policy=split --group_reporting --name=fio")
# Two jobs run on vCPUs 0 and 2, four on 0-3: one job per vCPU the guest spreads them over.
parts = [
    mqblk.sweep(base, grid={"device": ["virtio,num_queues=1", "virtio,num_queues=2"]},
                numjobs=n, cpus_allowed=cpus, cpus=4, cost_profile="kernel", backend=backend)
    .assign(numjobs=n)
    for n, cpus in ((2, "0,2"), (4, "0-3"))
]
df = pd.concat(parts, ignore_index=True)
df["virtqueues"] = df["param.device"].str.extract(r"num_queues=(\d)").astype(int)
mail = {(2, 1): 145e3, (2, 2): 186e3, (4, 1): 100e3, (4, 2): 199e3}
df["mail_iops"] = [mail[(j, q)] for j, q in zip(df["numjobs"], df["virtqueues"])]
table = df.pivot_table(index="numjobs", columns="virtqueues", values=["iops", "mail_iops"])
print(table.round(0).to_string())
for n in (2, 4):
    r = df[df.numjobs == n].set_index("virtqueues")
    print(f"numjobs {n}: 2 virtqueues / 1: ours {r.iops[2] / r.iops[1]:.2f}, "
          f"mail {r.mail_iops[2] / r.mail_iops[1]:.2f}")
ax = mqblk.plot.iops_over(df.rename(columns={"virtqueues": "param.virtqueues",
                                             "numjobs": "param.numjobs"}),
                          x="numjobs", hue="virtqueues")
ax.set_title("virtio-blk randread 4k QD64, 4 vCPUs, simulated")
ax.figure.savefig(out / "seed003.png", dpi=120)
print(f"chart in {out}/seed003.png")
