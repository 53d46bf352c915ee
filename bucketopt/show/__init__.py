"""Output for people: plots, reports, exports to other tools, and the side-by-side comparison of
batching strategies.
"""
