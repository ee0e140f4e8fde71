"""Connectors to outside systems, each an optional extra (``pip install squall[redis]``)."""
