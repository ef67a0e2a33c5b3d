"""What installing vidcap-ko needs beyond pip: set-up helpers run once per environment (`make setup`, or by
hand after `pip install .`), never imported by the commands at run time."""
