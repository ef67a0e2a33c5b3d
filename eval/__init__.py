"""Caption evaluation: METEOR 1.5 (Python, parity with meteor-1.5.jar -l other)
on Korean morphemes.

* ``eval.meteor``: ``meteor_score(predictions, references, tokenizer=...)``,
  ``Scorer``, ``MeteorParams``;
* ``eval.tokenize_ko``: Kiwi morpheme tokenizer and the whitespace tokenizer;
* ``eval.cli``: the ``caption-meteor`` command;
* ``eval/meteor_ko``: the same metric as a Hugging Face ``evaluate`` module.

See docs/meteor.md.
"""
