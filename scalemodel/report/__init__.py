"""Rendering of engine results: rich tables, JSON, CSV and plots. No modelling here."""
