"""The paper's fitting workflow on learning-curve tables (issue 26): record-breaking points, sigmoid fits,
frontiers and n*(C), pass@1 distributions, plan and predict, plots."""
