"""What daemons, workers and the CLI share: logging, settings, processes, packages, the foreground."""
