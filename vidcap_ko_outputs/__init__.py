"""What the commands share about what they write: the record format (`record.py`), writing a file without
losing what is there (`writing.py`) and the exit statuses a scheduler reads (`exit_status.py`).

It imports only the standard library, so the caption job (caption/), the scorer (eval/) and the tools that
read records (caption_report/, caption_export/) all import it, and eval/ imports nothing of caption/.
"""
