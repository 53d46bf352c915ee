"""Reading lengths and building histograms: files, Arrow/Parquet, Dask, input guards, and the
max_length overflow policies.
"""
