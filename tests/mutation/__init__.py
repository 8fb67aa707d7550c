"""Mutation proof of the defences (``make mutation``): see catalogue.py and run.py."""
