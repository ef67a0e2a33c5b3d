"""The job's settings: each key declared once in a schema (`schema.py`, `option.py`), the composed Hydra
config read into typed settings and checked before anything loads (`config.py`, `unread.py`,
`engine_choice.py`, `credentials.py`), the paths a job reads and writes (`paths.py`), the command line as
users type it (`overrides.py`) and `caption --help` (`help.py`)."""
