"""Output for people: plots, reports and exports to other tools (the figures they draw are
computed in :mod:`bucketopt.training`, :func:`bucketopt.compare` among them).
"""
