"""Training of the shipped assets (the embedded captioner, its LoRA adapter, its draft model) and the
model card's evaluation; run from the repository root as `python -m training.<module>`. Not part of the
installed package: nothing the pipeline runs imports it."""
