"""Watching daari decide: the decision log, the live tail's filters, the report and its plots."""
