"""Evaluation: the papers' metrics (metrics), resumable runs of methods on a question sample
(run), and the table and chart they print (report)."""
