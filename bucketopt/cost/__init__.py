"""Time: the GPU cost model and its profiles, calibration, probing a model, step timing and
prediction intervals.
"""
