"""Statistics of running topologies: Storm's windows and a metrics registry for users."""
