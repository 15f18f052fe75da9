"""Operators of one window: plan it, run each batch's partial aggregate, merge the partials."""
