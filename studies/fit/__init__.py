"""The paper's fitting workflow on learning-curve tables: record-breaking points, sigmoid fits,
frontiers and n*(C), pass@1 distributions, plan and predict, plots."""
