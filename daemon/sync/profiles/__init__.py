"""Profiles: the settings that decide every point of a collection, and what they load.

Owns one profile (the embedding model, the rules, their fingerprints: ``profile``), its
recorded settings as plain data (``settings``), and which profile made each collection
with the models and rules those profiles load (``profiles``).
"""
