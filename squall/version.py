"""Squall's version, for the daemons and the API (squall.__version__ is the same)."""

VERSION = "0.1.0"
