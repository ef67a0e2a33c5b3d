"""`caption-report`: a self-contained HTML page to review a caption job's records (see cli.py)."""
