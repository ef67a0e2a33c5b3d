"""Shared fixtures for the eval/ tests (METEOR, Korean tokenizer, CLI)."""

import os

import pytest

# Nothing in these tests may reach the Hugging Face hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


@pytest.fixture(scope="session")
def kiwi_tokenizer():
    """One Kiwi instance for the whole session (the model load takes ~1 s)."""
    from eval.tokenize_ko import get_tokenizer

    return get_tokenizer("kiwi")
