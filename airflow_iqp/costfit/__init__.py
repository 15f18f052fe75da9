"""Fitting cost models on this machine: measure partial and merge jobs, fit, write cost_models/<query>.json."""
