"""Stores: where executions and their step records live."""
