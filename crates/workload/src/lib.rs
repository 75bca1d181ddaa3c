//! Workload description and reporting for `mqblk bench`: fio job syntax, statistics, reports.
