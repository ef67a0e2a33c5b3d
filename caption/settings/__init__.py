"""The job's settings: each key declared once in a schema (`schema.py`, `option.py`; the engine group's in
`engine_schema.py`, sampling's in `generation.py`), the composed Hydra config read into typed settings and
checked before anything loads (`config.py`, `unread.py`, `engine_choice.py`, `credentials.py`), the paths a
job reads and writes and the manifest `input_list=` names (`paths.py`, `manifest.py`), what the plan fills in
for the engine (`engine_spec.py`), the ids that say with which settings each record was made
(`settings_ids.py`), the command line as users type it (`overrides.py`) and `caption --help` (`help.py`)."""
