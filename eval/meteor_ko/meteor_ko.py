"""METEOR 1.5 for Korean captions as a Hugging Face ``evaluate`` metric.

Load it offline from the folder (the project must be importable, i.e.
installed or on PYTHONPATH)::

    import evaluate
    from eval.meteor_ko import module_path
    meteor = evaluate.load(module_path())          # or evaluate.load("eval/meteor_ko")
    meteor.compute(predictions=["남자가 공원을 걷는다"],
                   references=[["한 남자가 공원에서 걷고 있다", "공원을 산책하는 남자"]])

This module only adapts ``evaluate``'s interface: the scores come from
``eval.meteor.meteor_score``, the same function the ``caption-meteor`` CLI
and the plain Python API use.
"""

import datasets
import evaluate

from eval.meteor import meteor_score

_CITATION = """\
@inproceedings{denkowski-lavie-2014-meteor,
  title = {Meteor Universal: Language Specific Translation Evaluation for Any Target Language},
  author = {Denkowski, Michael and Lavie, Alon},
  booktitle = {Proceedings of the Ninth Workshop on Statistical Machine Translation},
  year = {2014},
  pages = {376--380},
}
"""

_DESCRIPTION = """\
METEOR 1.5 (language-independent parameters: alpha 0.75, beta 1.4, gamma 0.7,
delta 0.5, exact matching) computed in Python with results equal to
meteor-1.5.jar -l other, on Korean text split into Kiwi morphemes
(tokenizer="kiwi", default) or on already-tokenized text
(tokenizer="whitespace").  "meteor" is the corpus score from aggregated
statistics, not the mean of segment scores.
"""

_KWARGS_DESCRIPTION = """
Args:
    predictions: list of captions (str).
    references: per prediction, a list of reference captions (or one str).
    tokenizer: "kiwi" (default) or "whitespace".
    return_segments: also return "segment_scores" (default True).
Returns:
    meteor: corpus METEOR; mean_segment_meteor; precision; recall; fmean;
    fragmentation_penalty; chunks; n; and segment_scores.
Examples:
    >>> meteor = evaluate.load("eval/meteor_ko")
    >>> meteor.compute(predictions=["a b c"], references=[["a b c"]], tokenizer="whitespace")["meteor"]
    1.0
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class MeteorKo(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=[
                datasets.Features({
                    "predictions": datasets.Value("string", id="sequence"),
                    "references": datasets.Sequence(datasets.Value("string", id="sequence"), id="references"),
                }),
                datasets.Features({
                    "predictions": datasets.Value("string", id="sequence"),
                    "references": datasets.Value("string", id="sequence"),
                }),
            ],
            reference_urls=["https://www.cs.cmu.edu/~alavie/METEOR/"],
        )

    def _compute(self, predictions, references, tokenizer="kiwi", return_segments=True):
        out = meteor_score(predictions, references, tokenizer=tokenizer)
        if not return_segments:
            out.pop("segment_scores")
        return out
