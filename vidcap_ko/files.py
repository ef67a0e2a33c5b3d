"""Where the files the commands read at run time live: conf/ (the presets Hydra composes) and assets/
(the embedded model, its LoRA adapter and its draft model).

In a checkout, and in an editable install (`make setup`), they are the checkout's own folders, and this
package holds only this file. A wheel (`pip install .`, `pip install git+...`) has no checkout: setup.py
copies both folders into this package, and the commands read them there, from whatever folder they run
in. A package of its own, importing only the standard library: caption/ and quant/ both read it, and
quant/ imports nothing of caption/.
"""

from __future__ import annotations

from pathlib import Path

CHECKOUT = Path(__file__).resolve().parents[1]  # the folder holding this package: a checkout, or site-packages
INSTALLED_FILES = Path(__file__).resolve().parent  # a wheel's copies sit in this package (setup.py)
INSTALLED = (INSTALLED_FILES / "conf" / "config.yaml").is_file()  # never true in a checkout

# conf/ and assets/ are under this folder
ROOT = INSTALLED_FILES if INSTALLED else CHECKOUT
# where benchmarks, training and the docs tools keep data/ (data/bench, data/models): the checkout; an
# installed package has none, and uses the folder it runs in
WORK_ROOT = Path.cwd() if INSTALLED else CHECKOUT
