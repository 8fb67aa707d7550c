"""Benchmarks (issue 6): each module measures one workload and prints its figures.

Run one with ``python -m bench.<module> [--smoke]``, all with ``make bench``. Nothing here is
part of the test suite; a smoke test only checks that every script still runs.
"""
