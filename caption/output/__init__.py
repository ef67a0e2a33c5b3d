"""What a job writes and how it knows what is done: the records file while the job writes it
(`records_file.py`), what an output must hold before a job may write to it (`checks.py`), one writer per
output (`lock.py`), how each record was made (`fingerprint.py`, `settings_ids.py`) and from which file
(`sources.py`)."""
