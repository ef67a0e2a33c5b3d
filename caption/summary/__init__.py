"""How a job ends and what it tells: the tally and the saved summary (`tally.py`), the exit status and the
exceptions that stop a job early (`outcome.py`), how much of each long video is captioned (`coverage.py`),
and what reaches the terminal and the run's log (`terminal.py`, `console.py`)."""
