"""What every runner shares, from decoded clips to records: the request intake (caption/pipeline/intake.py),
the engine supervisor (supervisor.py) and the record format (record.py, which eval/ and the review page
read too)."""
