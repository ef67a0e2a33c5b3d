"""What a job writes and how it knows what is done: the records file while the job writes it
(`records_file.py`), what an output must hold before a job may write to it (`checks.py`), one writer per
output (`lock.py`), how each record was made (`fingerprint.py`; its ids are caption/settings/settings_ids.py's)
and from which file (`provenance.py`)."""
