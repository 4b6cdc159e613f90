"""Measured speedups: `specatlas bench` runs methods against the baseline and writes result
files under results/; `specatlas leaderboard` renders them (the site's leaderboard page)."""
