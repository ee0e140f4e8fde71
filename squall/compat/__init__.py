"""Compatibility layers: code written for another Storm library, run by Squall as it is.

:mod:`squall.compat.streamparse` runs a streamparse (3.x/4.x) project's spouts,
bolts and topology classes in-process (docs/streamparse.md).
"""
