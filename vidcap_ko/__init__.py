"""What every package of vidcap-ko shares, below all of them: the record format (`record.py`), writing a file
without losing what is there (`writing.py`), the exit statuses a scheduler reads (`exit_status.py`), where
the shipped files are read from (`files.py`: conf/ and assets/, a checkout's or a wheel's), the settings
machinery (`settings.py`: the field every schema declares a key with, and the preset loader), the model
families (`families/`: prompt, processor arguments, token and parameter formulas, one module each) and the
torchvision shim installed once per environment (`torchvision_shim.py`).

It imports no other package of the project: the caption job (caption/), the decoders (video_io/), memory
planning (quant/) and the scorer (eval/) all import it, and none of them needs another to read a record.
"""
