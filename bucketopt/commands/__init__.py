"""One module per CLI subcommand, plus the arguments they share (``common``)."""
