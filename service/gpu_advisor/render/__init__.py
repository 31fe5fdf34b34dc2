"""Answers as text: rich tables for a terminal and ``text/plain``, markdown for pull requests,
and the comparison with a baseline result. Rendering only; nothing here computes a figure."""
