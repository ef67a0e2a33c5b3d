"""`caption-export`: a caption job's records as WebVTT / SRT subtitles per video, or as one CSV / Parquet
table (caption/export/cli.py). read.py reads and selects the records, cues.py places captions in time
and writes the subtitle formats, tables.py the tables."""
