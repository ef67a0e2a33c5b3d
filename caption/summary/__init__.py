"""What a finished job tells: the tally and the saved summary (`tally.py`), METEOR of its captions when it
has references (`scoring.py`), how much of each long video is captioned (`coverage.py`), and what reaches
the terminal and the run's log (`terminal.py`, `console.py`). How a job ends (its exceptions and exit
statuses) is caption/outcome.py's: every part of the job raises them, so they sit below all of it."""
