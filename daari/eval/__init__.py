"""Evaluation runners (`daari eval ...`): each talks to a running daari over HTTP and prints a verdict."""
