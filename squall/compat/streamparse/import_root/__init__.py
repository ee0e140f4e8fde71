"""Not a package to import: the directory Squall puts on the import path of the code it
runs (squall.plugins.add_import_roots), so that ``import streamparse`` finds the
``streamparse/`` beside this file (squall.compat.streamparse)."""
