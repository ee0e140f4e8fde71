"""The ``squall`` command line (the roof: nothing in squall imports it)."""
